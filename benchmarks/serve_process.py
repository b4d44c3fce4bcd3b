"""A ``counterplan serve`` in its own process, for benchmarks that measure it from outside."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def serve_process(*flags: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``counterplan serve --port 0`` (and ``flags``); yield the process and its target."""
    server = subprocess.Popen(
        [sys.executable, "-m", "counterplan", "serve", "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # its JSON access log
        text=True,
    )
    try:
        assert server.stdout is not None
        yield server, server.stdout.readline().strip().rsplit(" ", 1)[-1]
    finally:
        server.terminate()
        server.wait(timeout=60)


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (VmRSS from /proc)."""
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024 if match else float("nan")
