"""The command line: a thin click layer over the commands' core (kvplan/app/). Only this package prints or exits.

Each command parses its options into a request record (kvplan.app.requests) and hands it to its core, which
says what to print and returns the exit code: 0 clean, 1 findings, 2 could not run.
"""

from __future__ import annotations

import click

from kvplan import __version__
from kvplan.cli import check, explore, plan, tools
from kvplan.cli.options import Number, _top

__all__ = ["Number", "_top", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kvplan")
@click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks (for bug reports).")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Plan the KV cache of long-context LLM serving.

    \b
    kvplan map      the regime map of a model on a device (s*, s_cap, effective bandwidth)
    kvplan advise   a justified plan for a .kvp deployment spec
    kvplan pareto   the plans that trade tokens/s per user against tokens/s per device
    kvplan emit     the plan as vLLM, SGLang, TensorRT-LLM and LMCache configs
    kvplan lint     check .kvp specs in CI (exit 0 clean, 1 findings, 2 could not run)
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


#: Every command, one row each (click lists them by name in --help).
COMMANDS = (explore.models_cmd, explore.devices_cmd, explore.map_cmd, explore.sweep_cmd, explore.tables_cmd,
            check.lint_cmd, check.fmt_cmd, plan.advise_cmd, plan.pareto_cmd, plan.report_cmd, plan.emit_cmd,
            tools.import_cmd, tools.calibrate_cmd, tools.completion_cmd)
for _command in COMMANDS:
    main.add_command(_command)
