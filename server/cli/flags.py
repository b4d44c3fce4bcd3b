"""What every command shares besides its flags: the parser, the usage error and the exit code of "not found".

The flags that shape the question are one group (:mod:`counterplan.server.cli.problem_flags`);
the bounds of the flags that feed solver settings are :mod:`counterplan.server.cli.bounds`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn

from counterplan.planning.errors import TEXT_CHARS, CounterplanError, cut, one_line

EXIT_NOT_FOUND = 3
"""Exit code of a command that ran and found no valid answer (its note says what blocks it)."""


class UsageError(CounterplanError, ValueError):
    """A command-line flag has a bad value (exit code 2)."""


class RemoteError(CounterplanError):
    """The server refused or failed the request (exit code 1)."""


def server_refusal(exc: Any, usage: Callable[[str], Exception] = UsageError) -> Exception:
    """A ``grpc.RpcError`` of a command run with ``--server`` as the command's error, in the
    server's words: a field the server refused (INVALID_ARGUMENT) is a bad flag (``usage``, exit
    code 2), any other failure the server's (:class:`RemoteError`, exit code 1)."""
    code = exc.code()
    text = f"server said {code.name}: {exc.details()}"
    return usage(text) if code.name == "INVALID_ARGUMENT" else RemoteError(text)


class Parser(argparse.ArgumentParser):
    """The argument parser of the command line and of each command (a subcommand's parser is of
    its parent's class): its error quotes what the user typed cut, as every error of counterplan
    does (:mod:`counterplan.planning.errors`). argparse echoes a bad value whole (``invalid int
    value: '…'``, an invalid choice, every unrecognized argument), so a 1 MB value was printed
    back whole, and a control character in it reached the terminal as it was."""

    def error(self, message: str) -> NoReturn:
        super().error(bounded(message))


def bounded(message: str) -> str:
    """argparse's ``message`` on one line of at most 1 KB, each word of it (a value, quoted or
    not, or an unrecognized argument) cut to 100 characters: the values are argparse's words."""
    return one_line(" ".join(_cut_word(word) for word in message.split()), TEXT_CHARS)


def _cut_word(word: str) -> str:
    if len(word) > 2 and word[0] == word[-1] and word[0] in "'\"":  # a quoted value keeps its quotes
        return word[0] + cut(word[1:-1]) + word[-1]
    return cut(word)
