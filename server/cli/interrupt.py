"""Ctrl-C on the command line: the first one stops the search, which answers with what it has.

A user who presses Ctrl-C during a search wants it to end now, and to see what it found, not a
stack trace. :func:`stop_on_interrupt` turns the first SIGINT (or SIGTERM) inside its block into a stop
request (a solver's ``terminate_early``, a plan search's stop check): the search ends at its
next step and its result comes back as usual; the command then raises :class:`Interrupted`
with one line, which ``main`` prints before exiting with :data:`EXIT_INTERRUPTED`. A second
Ctrl-C raises ``KeyboardInterrupt`` at once (the user insists), which ``main`` reports in one
line too.

Python runs a signal handler only between bytecodes of the main thread, so while the main thread
is inside native code (a MILP solver holding no GIL, a model call) the handler waits until it
returns, which may be minutes. So the signal's wakeup byte (``signal.set_wakeup_fd``) also
reaches a helper thread, which asks for the stop at once: the solver's own stop check (HiGHS's
interrupt callback, OR-Tools' watcher) then ends the native search. Only light modules load here:
``main`` imports this module for ``--help`` too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

EXIT_INTERRUPTED = 130
"""The exit code of a command stopped with Ctrl-C (128 + SIGINT, as shells report it); one
stopped by SIGTERM exits 143 (128 + SIGTERM)."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Ctrl-C, and a container's or a scheduler's stop (``kill``, Kubernetes, Slurm): both stop the
search and keep what it has; SIGTERM's default would kill the process with its last records."""
_received: list[int] = []
"""The stop signals this command heard, in order (the first sets the exit code)."""


class Interrupted(KeyboardInterrupt):
    """The user stopped a command; ``line`` says what it had (the best answer so far, the rows kept).

    A ``KeyboardInterrupt``, so that whatever cleans up after Ctrl-C (a batch's writer) does so for
    this one as well."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


class Interrupt:
    """What a :func:`stop_on_interrupt` block heard; callable as a stop check."""

    def __init__(self, stops: tuple[Callable[[], None], ...]) -> None:
        self._stops = stops
        self._heard = threading.Event()
        self.count = 0
        """Interrupts handled in the main thread."""

    @property
    def requested(self) -> bool:
        """True once a Ctrl-C asked the search to stop."""
        return self._heard.is_set()

    def __call__(self) -> bool:
        return self.requested

    def hear(self, signum: int) -> None:
        """A signal's wakeup byte (any thread): a stop signal stops the search; nothing else is counted."""
        if signum in STOP_SIGNALS:
            self._stop()

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The stop signals' handler (main thread): the first stops the search, a second raises."""
        _received.append(signum)
        self.count += 1
        self._stop()
        if self.count > 1:
            raise KeyboardInterrupt

    def _stop(self) -> None:
        self._heard.set()
        for stop in self._stops:
            stop()


@contextlib.contextmanager
def stop_on_interrupt(*stops: Callable[[], None]) -> Iterator[Interrupt]:
    """Within the block, the first Ctrl-C calls every ``stops`` (each must be safe from any thread
    and more than once) instead of raising; the caller checks ``requested`` after the search and
    reports. Outside the main thread (where signals cannot be handled) the block runs as it is."""
    interrupt = Interrupt(stops)
    if threading.current_thread() is not threading.main_thread():
        yield interrupt
        return
    previous = {signum: signal.signal(signum, interrupt.handle) for signum in STOP_SIGNALS}
    try:
        with _wakeup(interrupt):
            yield interrupt
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block (a whole command), SIGTERM raises ``KeyboardInterrupt`` as Ctrl-C does, so
    a command that keeps what it has on Ctrl-C (a batch's records, an audit's, a tuning study's
    trials) does so on SIGTERM too, and exits 143; a :func:`stop_on_interrupt` block inside takes
    both signals its own way. Outside the main thread the block runs as it is."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


@contextlib.contextmanager
def _wakeup(interrupt: Interrupt) -> Iterator[None]:
    """Signals' wakeup bytes go to a helper thread that calls ``interrupt.hear``."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except (ValueError, OSError):  # no wakeup descriptor here: the handler alone hears the signal
        os.close(read)
        os.close(write)
        yield
        return
    listener = threading.Thread(target=_listen, args=(read, interrupt), name="counterplan-interrupt", daemon=True)
    listener.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write)  # the listener reads the end of the pipe and returns
        listener.join(timeout=5)
        os.close(read)


def _listen(read: int, interrupt: Interrupt) -> None:
    """Until the pipe closes: each byte is a signal number."""
    while True:
        try:
            data = os.read(read, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            interrupt.hear(signum)


def report(error: KeyboardInterrupt) -> int:
    """Print the one line of an interrupted command on stderr; the exit code (128 + the first
    stop signal heard: 130 for Ctrl-C, 143 for SIGTERM)."""
    detail = error.line if isinstance(error, Interrupted) else ""
    terminated = bool(_received) and _received[0] == signal.SIGTERM
    print(
        f"counterplan: {'terminated' if terminated else 'interrupted'}{'; ' + detail if detail else ''}",
        file=sys.stderr,
    )
    return 128 + signal.SIGTERM if terminated else EXIT_INTERRUPTED
