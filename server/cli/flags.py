"""What every command shares besides its flags: the usage error and the exit code of "not found".

The flags that shape the question are one group (:mod:`counterplan.server.cli.problem_flags`);
the bounds of the flags that feed solver settings are :mod:`counterplan.server.cli.bounds`.
"""

from __future__ import annotations

from counterplan.planning.errors import CounterplanError

EXIT_NOT_FOUND = 3
"""Exit code of a command that ran and found no valid answer (its note says what blocks it)."""


class UsageError(CounterplanError, ValueError):
    """A command-line flag has a bad value (exit code 2)."""
