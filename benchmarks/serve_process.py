"""A ``counterplan serve`` in its own process, for benchmarks that measure it from outside."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def serve_process(
    *flags: str, command: tuple[str, ...] = ("counterplan", "serve"), log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``python -m counterplan serve --port 0`` (another module with ``command``, run from
    the repository's root) with ``flags``; yield the process and its target. ``log``: where its
    JSON access log (stderr) goes, else nowhere."""
    sink = log.open("w", encoding="utf-8") if log is not None else subprocess.DEVNULL
    server = subprocess.Popen(
        [sys.executable, "-m", *command, "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=sink,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        yield server, server.stdout.readline().strip().rsplit(" ", 1)[-1]
    finally:
        server.terminate()
        server.wait(timeout=60)
        if log is not None and not isinstance(sink, int):
            sink.close()


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (VmRSS from /proc)."""
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024 if match else float("nan")
