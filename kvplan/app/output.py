"""What a command says: its lines for stdout and stderr in the order it says them, and its exit code.

A command's core is a generator of `Line`s that returns the exit code (`Said`); the CLI echoes each line
as it comes, so that a terminal sees stdout and stderr interleaved as the command said them, and a
command stopped half-way by an error has said what it said before it. The core never prints.
"""

from __future__ import annotations

from typing import Generator

from kvplan.base.records import record

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


@record
class Line:
    """A piece of output: for stdout, or stderr when `err`; `nl` ends it with a newline."""

    text: str
    err: bool = False
    nl: bool = True


def out(text: str, nl: bool = True) -> Line:
    return Line(text, False, nl)


def err(text: str, nl: bool = True) -> Line:
    return Line(text, True, nl)


#: A command's core: the lines it says, then (as the generator's value) its exit code.
Said = Generator[Line, None, int]


class Stop(Exception):
    """The command cannot go on: `kvplan: error: <message>` on stderr and exit 2, even under --debug (what it
    said before stands)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
