"""Running the command line inside a test: its exit code and what it printed."""

from __future__ import annotations

import pytest

from counterplan.server.cli.main import main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``counterplan <args>``: the exit code (a ``SystemExit``'s too), stdout and stderr."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
