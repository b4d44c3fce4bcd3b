"""Models served over the Open Inference Protocol v2 (KServe, MLServer, Triton): REST or gRPC.

:class:`~counterplan.planning.remote.adapter.RemoteModel` is the adapter; the modules below it
each do one job: :mod:`.url` reads an address, :mod:`.oip` holds the protocol's messages (and
their JSON), :mod:`.tensors` builds requests from candidates and reads answers,
:mod:`.transport` tells failures apart and retries, :mod:`.rest` and :mod:`.grpc_transport`
carry the messages. Importing this package loads neither httpx nor grpc: each transport loads
its library on its first call.
"""

from __future__ import annotations

from counterplan.planning.remote.adapter import RemoteModel
from counterplan.planning.remote.url import ModelAddress, ModelAddressError, parse_model_address

__all__ = ["ModelAddress", "ModelAddressError", "RemoteModel", "parse_model_address"]
