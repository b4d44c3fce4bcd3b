"""A model served over the Open Inference Protocol, named where a model file could be: the
command line's ``--model http://HOST:PORT/v2/models/NAME`` (or ``grpc://HOST:PORT/NAME``) and a
model card's ``model_url`` with its ``remote`` options.

Both build the same :class:`~counterplan.planning.remote.RemoteModel` (the one address parser is
:mod:`counterplan.planning.remote.url`) and ask the server for the model's metadata at once, so a
server that is down, a wrong address or an unknown model is refused when the model is loaded, in
one line, as a missing model file is, not on the first solve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from counterplan.planning.remote.options import MAX_CALL_SECONDS

if TYPE_CHECKING:
    from counterplan.planning.remote import RemoteModel


class ServedModelOptions(BaseModel):
    """How to call a served model: :class:`~counterplan.planning.remote.RemoteModel`'s keywords
    (a model card's ``remote`` block). Every field is optional; the adapter's defaults apply."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: Literal["rest", "grpc"] | None = None
    """Must agree with the address's scheme (http/https: rest, grpc/grpcs: grpc)."""
    version: str | None = None
    timeout: float | None = Field(None, gt=0, le=MAX_CALL_SECONDS)
    """Seconds each call may wait for its answer (default 10)."""
    connect_timeout: float | None = Field(None, gt=0, le=MAX_CALL_SECONDS)
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every call (an ``Authorization`` token, KServe's ``Host``)."""
    layout: Literal["tensor", "columns"] | None = None
    """One 2-D tensor, or one input per column (MLServer's pandas codec); default: from the metadata."""
    task: Literal["classification", "regression"] | None = None
    classes: list[Any] | None = None
    """The class names in the order of the model's probability columns (default: the training
    target's sorted labels, scikit-learn's order)."""
    served_output: str | None = None
    max_rows: int | None = Field(None, ge=1)
    max_bytes: int | None = Field(None, ge=1)

    def keywords(self) -> dict[str, Any]:
        """The options given, as ``RemoteModel`` keywords."""
        return self.model_dump(exclude_none=True, exclude_defaults=True)


def load_served_model(
    address: str, options: ServedModelOptions | None = None, output: str | None = None
) -> RemoteModel:
    """The served model at ``address``, its metadata read (the server answers and knows it).

    Raises the adapter's one-line errors: a bad address
    (:class:`~counterplan.planning.remote.url.ModelAddressError`), a server that is down or slow,
    or an unknown model (:class:`~counterplan.planning.errors.RemoteModelError`), each a
    ``ValueError`` naming the address."""
    from counterplan.planning.remote import RemoteModel  # noqa: PLC0415 - numpy and the protocol: only when asked

    model = RemoteModel(address, output=output, **(options or ServedModelOptions()).keywords())
    model.metadata()
    return model


__all__ = ["MAX_CALL_SECONDS", "ServedModelOptions", "load_served_model"]
