"""The runtime's model: the KServe predictor, called over the Open Inference Protocol.

KServe gives an explainer its predictor as a host (``NAME-predictor.NAMESPACE``, with a port or
not) and a protocol (``v2`` for REST, ``grpc-v2`` for gRPC), and names the predictor's model
after the InferenceService, as the explainer is named. :func:`predictor_model` turns those into a
:class:`~counterplan.planning.remote.RemoteModel` (its one address parser reads and checks them).
"""

from __future__ import annotations

import re

from counterplan.planning.errors import InvalidInputError, echo
from counterplan.planning.remote import RemoteModel
from counterplan.planning.remote.url import shown_address
from counterplan.server.kserve import PREDICTOR_PROTOCOLS

SCHEMES = dict(zip(PREDICTOR_PROTOCOLS, ("http", "grpc"), strict=True))
_HOST = re.compile(r"^[A-Za-z0-9._\-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$")


class PredictorError(InvalidInputError):
    """The predictor's host or protocol cannot be read (names which)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("predictor", field, problem)


def predictor_model(host: str, protocol: str, model_name: str, *, timeout: float) -> RemoteModel:
    """The predictor's model: ``http://HOST[:PORT]`` (port 80 by default) or ``grpc://HOST:PORT``,
    model ``model_name``. Only a host and a port are taken (a path or a scheme in ``host`` would
    change what the address parser reads)."""
    if protocol not in SCHEMES:
        raise PredictorError("protocol", f"give one of {', '.join(PREDICTOR_PROTOCOLS)}, given {echo(protocol)}")
    if not _HOST.match(host):
        raise PredictorError("host", f"give HOST or HOST:PORT (no scheme, no path), given {echo(shown_address(host))}")
    return RemoteModel(f"{SCHEMES[protocol]}://{host}", model_name, timeout=timeout)
