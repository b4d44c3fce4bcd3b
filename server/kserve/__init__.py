"""The KServe explainer runtime: counterplan behind KServe's ``POST /v1/models/NAME:explain``.

The outer ring: only ``counterplan kserve`` (:mod:`counterplan.server.cli.kserve`) imports it,
and only :mod:`counterplan.server.kserve.runtime` loads the ``kserve`` SDK. The request's form
and bounds (:mod:`~counterplan.server.kserve.request`) and the solves
(:mod:`~counterplan.server.kserve.explaining`) know nothing of KServe, so they are tested and
reused without it.
"""

PREDICTOR_PROTOCOLS = ("v2", "grpc-v2")
"""KServe's names of the predictor protocols the runtime speaks (KServe's ``--predictor_protocol``):
the Open Inference Protocol over REST and over gRPC. Here, not in the runtime: the command's
``--help`` lists them without loading anything."""
