"""The command line: a thin click layer over the pure core. Only this module prints or exits.

Exit codes: 0 clean, 1 findings, 2 could not run.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, TypeVar

import click

from kvplan import __version__
from kvplan.errors import KvplanError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _fail(message: str) -> None:
    click.echo(f"kvplan: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def handles_errors(fn: F) -> F:
    """Turn a user error into one line on stderr and exit 2; a traceback only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KvplanError as exc:
            if _debug():
                raise
            _fail(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            if _debug():
                raise
            _fail(f"{getattr(exc, 'filename', '') or ''}{': ' if getattr(exc, 'filename', None) else ''}"
                  f"{getattr(exc, 'strerror', None) or exc}")

    return wrapper  # type: ignore[return-value]


def _debug() -> bool:
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.obj and ctx.obj.get("debug"):
            return True
        ctx = ctx.parent
    return False


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kvplan")
@click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks (for bug reports).")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Plan the KV cache of long-context LLM serving.

    \b
    kvplan map      the regime map of a model on a device (s*, s_cap, effective bandwidth)
    kvplan advise   a justified plan for a .kvp deployment spec
    kvplan lint     check .kvp specs in CI (exit 0 clean, 1 findings, 2 could not run)
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@main.command("models")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_errors
def models_cmd(fmt: str) -> None:
    """List the model catalog."""
    from kvplan import catalog
    from kvplan.render import catalog_view

    click.echo(catalog_view.models(list(catalog.models().values()), fmt), nl=False)


@main.command("devices")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handles_errors
def devices_cmd(fmt: str) -> None:
    """List the device catalog."""
    from kvplan import catalog
    from kvplan.render import catalog_view

    click.echo(catalog_view.devices(list(catalog.devices().values()), fmt), nl=False)
