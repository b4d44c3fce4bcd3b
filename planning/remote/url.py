"""The one parser of a served model's address (the command line, model cards and the KServe runtime
read addresses through it too).

Two forms, the Open Inference Protocol's own paths:

- ``http(s)://HOST:PORT/v2/models/NAME[/versions/VERSION]``: REST; the base URL is everything
  before ``/v2``, so a server behind a path prefix (``https://gw/ns/pred/v2/models/NAME``) works.
- ``grpc(s)://HOST:PORT/NAME[/versions/VERSION]``: gRPC (``grpcs``: with TLS).

A bare ``http://HOST:PORT`` (no model path) is accepted when the model's name is given apart
(``RemoteModel("http://h:8080", model_name="m")``), as KServe gives a predictor's host.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from counterplan.planning.errors import ModelAdapterError, echo

Protocol = Literal["rest", "grpc"]

_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_HOST = re.compile(r"[A-Za-z0-9_.\-]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(%[A-Za-z0-9_.\-]+)?")
"""A host name or IPv4 address (ASCII: an international name in its ``xn--`` form), or an IPv6
address (urlsplit gives it without its brackets), with a zone."""
_SCHEMES: dict[str, tuple[Protocol, bool]] = {
    "http": ("rest", False),
    "https": ("rest", True),
    "grpc": ("grpc", False),
    "grpcs": ("grpc", True),
}


class ModelAddressError(ModelAdapterError):
    """A served model's address cannot be read (names the address, as :func:`shown_address`
    shows it, and what is wrong)."""

    def __init__(self, address: str, problem: str) -> None:
        super().__init__(shown_address(address), problem + f"; expected {FORMS}")


def shown_address(address: str) -> str:
    """``address`` as an error or a log shows it: its credentials (``user:password@``), query and
    fragment, which may carry a secret (an address is refused with them, and the refusal went into
    the log), each as ``…``: ``http://…@host:80/v2/models/m?…``."""
    start = address.find("://")
    start = start + 3 if start >= 0 else 0
    ends = [at for at in (address.find(mark, start) for mark in "/?#") if at >= 0]
    authority_end = min(ends, default=len(address))
    at = address.rfind("@", start, authority_end)
    if at >= 0:
        address = address[:start] + "…" + address[at:]
    marks = [at for at in (address.find(mark, start) for mark in "?#") if at >= 0]
    if marks:
        address = address[: min(marks) + 1] + "…"
    return address


FORMS = "http(s)://HOST:PORT/v2/models/NAME[/versions/V] or grpc(s)://HOST:PORT/NAME[/versions/V]"
"""The accepted forms, as every error and help text states them."""


class ModelAddress(BaseModel):
    """A served model's address, read: where, which model, which version, over what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: Protocol
    tls: bool
    host: str
    port: int
    prefix: str = ""
    """A REST path before ``/v2`` (a gateway's route), without a trailing slash."""
    model_name: str
    version: str | None = None

    @property
    def base_url(self) -> str:
        """``http(s)://HOST:PORT[/prefix]`` for REST, ``HOST:PORT`` (the gRPC target) for gRPC."""
        if self.protocol == "grpc":
            return f"{_host(self.host)}:{self.port}"
        return f"{'https' if self.tls else 'http'}://{_host(self.host)}:{self.port}{self.prefix}"

    @property
    def model_path(self) -> str:
        """The REST path of the model's metadata: ``/v2/models/NAME[/versions/V]``."""
        path = f"/v2/models/{self.model_name}"
        return path + (f"/versions/{self.version}" if self.version else "")

    def __str__(self) -> str:
        if self.protocol == "rest":
            return self.base_url + self.model_path
        scheme = "grpcs" if self.tls else "grpc"
        return f"{scheme}://{self.base_url}/{self.model_name}" + (f"/versions/{self.version}" if self.version else "")


def is_model_address(text: object) -> bool:
    """True when ``text`` starts with a served model's scheme (``http://``, ``https://``,
    ``grpc://``, ``grpcs://``): the command line reads such a ``--model`` as an address (then
    :func:`parse_model_address` checks it), anything else as a file."""
    if not isinstance(text, str):
        return False
    scheme, found, _ = text.strip().partition("://")
    return bool(found) and scheme.lower() in _SCHEMES


def parse_model_address(
    address: str,
    model_name: str | None = None,
    version: str | None = None,
    protocol: Protocol | None = None,
) -> ModelAddress:
    """Read ``address``; ``model_name`` and ``version`` complete an address without them (or must
    agree with it), ``protocol`` must agree with the scheme. Raises :class:`ModelAddressError`."""
    if not isinstance(address, str) or not address.strip():
        raise ModelAddressError(echo(address), "give the served model's address")
    text = address.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ModelAddressError(text, str(exc)) from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ModelAddressError(text, f"unknown scheme {scheme or '(none)'!r}")
    kind, tls = _SCHEMES[scheme]
    if protocol is not None and protocol != kind:
        raise ModelAddressError(text, f"the scheme {scheme!r} is {kind}, but protocol {protocol!r} was asked")
    port = _checked_port(
        text, scheme, parts.hostname, port, bool(parts.query or parts.fragment or parts.netloc.count("@"))
    )
    prefix, name, found_version = _path(text, kind, parts.path)
    name = _agree(text, "model name", name, model_name)
    if name is None:
        raise ModelAddressError(text, "no model name (give it in the address or as model_name)")
    found_version = _agree(text, "version", found_version, version)
    for label, value in (("model name", name), ("version", found_version)):
        if value is not None and not _NAME.fullmatch(value):
            raise ModelAddressError(text, f"bad {label} {echo(value)}: letters, digits, '_', '.', '-' only")
        if value is not None and not value.strip("."):  # a path's dot segment: '..' would name the parent
            raise ModelAddressError(text, f"bad {label} {echo(value)}: '.' and '..' are a path's steps, not names")
    return ModelAddress(
        protocol=kind,
        tls=tls,
        host=str(parts.hostname),
        port=port,
        prefix=prefix,
        model_name=name,
        version=found_version,
    )


def _checked_port(text: str, scheme: str, host: str | None, port: int | None, extra: bool) -> int:
    """The address's port (80 or 443 by default for REST); refuses a missing host, a query, a
    fragment or credentials."""
    if not host:
        raise ModelAddressError(text, "no host")
    if not _HOST.fullmatch(host):
        raise ModelAddressError(text, f"bad host {echo(host)}: an ASCII name (xn--... if international) or address")
    if port == 0:
        raise ModelAddressError(text, "port 0 is no server's port")
    if extra:
        raise ModelAddressError(text, "no query, fragment or credentials are allowed (give headers apart)")
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
        if port is None:
            raise ModelAddressError(text, "a gRPC address needs its port")
    return port


def _path(text: str, kind: Protocol, path: str) -> tuple[str, str | None, str | None]:
    """The REST prefix, the model name and the version read from the address's path."""
    path = path.rstrip("/")
    if kind == "grpc":
        segments = [s for s in path.split("/") if s]
        if not segments:
            return "", None, None
        if len(segments) == 1:
            return "", segments[0], None
        if len(segments) == 3 and segments[1] == "versions":
            return "", segments[0], segments[2]
        raise ModelAddressError(text, f"bad gRPC path {echo(path)}")
    parts = [s for s in path.split("/") if s]
    at = next((i for i, s in enumerate(parts) if s == "v2" and parts[i + 1 : i + 2] in ([], ["models"])), None)
    if at is None:  # whole segments: '/v2models/m' is no '/v2/models/m'
        if parts:
            raise ModelAddressError(text, f"the path {echo(path)} has no /v2/models/NAME")
        return "", None, None
    prefix = "".join("/" + s for s in parts[:at])
    segments = parts[at + 1 :]
    if not segments:
        return prefix, None, None
    if segments[0] == "models" and len(segments) == 2:
        return prefix, segments[1], None
    if segments[0] == "models" and len(segments) == 4 and segments[2] == "versions":
        return prefix, segments[1], segments[3]
    raise ModelAddressError(text, f"bad REST path {echo(path)}")


def _agree(text: str, label: str, found: str | None, given: str | None) -> str | None:
    if given is not None and found is not None and given != found:
        raise ModelAddressError(text, f"the address names {label} {found!r}, but {given!r} was given")
    return found if found is not None else given


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


__all__ = [
    "FORMS",
    "ModelAddress",
    "ModelAddressError",
    "Protocol",
    "is_model_address",
    "parse_model_address",
    "shown_address",
]
