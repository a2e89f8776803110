"""How a command runs: its core's lines echoed as they come, its exit code, and a user error as one line on
stderr with exit 2 (a traceback only with --debug)."""

from __future__ import annotations

import functools
import sys
from typing import Callable, Generator, NoReturn, ParamSpec, TypeVar

import click

from kvplan.app.output import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, Line, Stop
from kvplan.base.errors import KvplanError

__all__ = ["EXIT_CLEAN", "EXIT_ERROR", "EXIT_FINDINGS", "fail", "handles_errors", "quiet_stdout", "show", "shown"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def fail(message: str) -> NoReturn:
    click.echo(f"kvplan: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def handles_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a user error into one line on stderr and exit 2; a traceback only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:  # `kvplan advise x.kvp | head`: the reader is done, so are we
            quiet_stdout()
            sys.exit(EXIT_CLEAN)
        except Stop as exc:  # the core said why it stops: one line, even under --debug
            fail(exc.message)
        except KvplanError as exc:
            if _debug():
                raise
            fail(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            if _debug():
                raise
            fail(f"{getattr(exc, 'filename', '') or ''}{': ' if getattr(exc, 'filename', None) else ''}"
                  f"{getattr(exc, 'strerror', None) or exc}")
        except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
            if _debug():
                raise
            fail(f"internal error: {type(exc).__name__}: {exc} (a kvplan bug; rerun with --debug and report it)")

    return wrapper


def show(said: Generator[Line, None, T]) -> T:
    """Echo each line a command's core says, as it says it; the core's value (its exit code, or what it made)."""
    while True:
        try:
            line = next(said)
        except StopIteration as done:
            value: T = done.value
            return value
        click.echo(line.text, err=line.err, nl=line.nl)


def shown(said: Generator[Line, None, int]) -> None:
    """Echo a command's lines, then exit with its code (0: return, as click does)."""
    code = show(said)
    if code != EXIT_CLEAN:
        sys.exit(code)


def quiet_stdout() -> None:
    """Point stdout at /dev/null so Python's exit flush does not raise again on the closed pipe."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (e.g. under a test runner)
        pass


def _debug() -> bool:
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.obj and ctx.obj.get("debug"):
            return True
        ctx = ctx.parent
    return False

