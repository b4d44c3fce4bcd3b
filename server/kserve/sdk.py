"""Loading the ``kserve`` SDK safely: with the process's arguments hidden from it.

``kserve.model_server`` parses ``sys.argv`` when it is first imported (``parse_known_args``, with
argparse's prefix matching on), so a flag of the program importing it can be taken for one of
KServe's own: pytest's ``--timeout`` reads as KServe's ``--timeout-keep-alive``, and a bad value
ends the process. Import it through :func:`import_kserve` first; later imports find it loaded.
This module loads nothing itself.
"""

from __future__ import annotations

import sys

from counterplan.planning.errors import CounterplanError


class KServeMissingError(CounterplanError):
    """The ``kserve`` SDK is not installed (the command exits with code 1, in one line)."""


def import_kserve() -> None:
    """Import ``kserve.model_server`` with ``sys.argv`` cut to the program's name, then put the
    arguments back; refused in one line when the ``kserve`` extra is not installed."""
    argv = sys.argv
    sys.argv = argv[:1]
    try:
        import kserve.model_server  # noqa: F401, PLC0415
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] != "kserve":
            raise
        raise KServeMissingError(
            "the KServe runtime needs the kserve extra: pip install 'counterplan[kserve]'"
        ) from None
    finally:
        sys.argv = argv
