"""The commands that check .kvp files: `lint` and `fmt`."""

from __future__ import annotations

import click

from kvplan.app import requests as rq
from kvplan.cli.options import ANY_PATH, FILE, LINT_FORMATS, allow_path_option, planner_options
from kvplan.cli.run import handles_errors, shown


@click.command("lint")
@click.argument("paths", nargs=-1, type=ANY_PATH)
@click.option("--output-format", type=click.Choice(LINT_FORMATS), default="concise", show_default=True,
              help="How to print diagnostics (stdout).")
@click.option("--select", multiple=True, metavar="CODES",
              help="Report only codes with these prefixes, comma-separated (KV1,KV201); replaces the config's.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Also leave out codes with these prefixes.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info"]), default=None,
              help="Lowest severity that makes the exit status 1  [config, else error].")
@click.option("--config", type=FILE, default=None, metavar="PYPROJECT",
              help="Read [tool.kvplan] from this file instead of the nearest pyproject.toml.")
@click.option("--check-digest", is_flag=True,
              help="Also report configs emitted into <spec>.kvplan/ whose plan digest is stale (KV401).")
@click.option("--online", is_flag=True,
              help="Fetch a repo id's config.json from the Hugging Face hub when the local cache lacks it "
                   "(default: the cache only, so findings do not depend on the network; docs/hub.md).")
@planner_options
@allow_path_option
@handles_errors
def lint_cmd(paths: tuple[str, ...], output_format: str, select: tuple[str, ...], ignore: tuple[str, ...],
             fail_on: str | None, config: str | None, check_digest: bool, online: bool, planner: rq.PlannerOptions,
             allow_paths: tuple[str, ...]) -> None:
    """Check .kvp files and directories: diagnostics on stdout, a summary on stderr.

    Exit 0 when nothing reaches --fail-on, 1 when something does, 2 when lint could not run.
    """
    from kvplan.app.lint import lint

    shown(lint(rq.LintRequest(paths, output_format, select, ignore, fail_on, config, check_digest, online, planner,
                              allow_paths)))



@click.command("fmt")
@click.argument("paths", nargs=-1, type=ANY_PATH)
@click.option("--check", is_flag=True, help="Write nothing; list files that would change; exit 1 if any.")
@click.option("--diff", is_flag=True, help="Write nothing; print what would change as a diff; exit 1 if any.")
@handles_errors
def fmt_cmd(paths: tuple[str, ...], check: bool, diff: bool) -> None:
    """Rewrite .kvp files in the canonical layout (comments kept). Exit 2 on a syntax error."""
    from kvplan.app.fmt import fmt

    shown(fmt(rq.FmtRequest(paths, check, diff)))
