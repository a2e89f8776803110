"""The commands that plan a spec: `advise`, `pareto`, `report` and `emit`."""

from __future__ import annotations

from typing import Literal

import click

from kvplan.app import requests as rq
from kvplan.cli.options import (
    DIR,
    FILE,
    allow_path_option,
    bytes_type,
    deploy_options,
    plan_reserve_options,
    planner_options,
)
from kvplan.cli.run import handles_errors, shown


@click.command("advise")
@click.argument("spec_file", type=FILE, metavar="FILE.kvp")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--scenario", default=None, help="Plan only this scenario (a deployment name or an expanded name).")
@planner_options
@allow_path_option
@handles_errors
def advise_cmd(spec_file: str, fmt: str, scenario: str | None, planner: rq.PlannerOptions,
               allow_paths: tuple[str, ...]) -> None:
    """Plan a deployment: the regime map, then each decision with its numbers, rules and evidence.

    Exit 0 when every plan meets the spec, 1 when a plan misses a constraint (does not fit, an SLO), 2 when
    the spec cannot be planned.
    """
    from kvplan.app.plans import advise

    shown(advise(rq.AdviseRequest(spec_file, fmt, scenario, planner, allow_paths)))



@click.command("pareto")
@click.argument("spec_file", type=FILE, metavar="FILE.kvp")
@click.option("--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text", show_default=True)
@click.option("--scenario", default=None, help="Only this scenario (a deployment name or an expanded name).")
@click.option("--plot", "plot_path", type=FILE, metavar="FILE.png|svg",
              help="Also draw the front to this file, one scenario's (needs matplotlib: pip install matplotlib).")
@planner_options
@allow_path_option
@handles_errors
def pareto_cmd(spec_file: str, fmt: str, scenario: str | None, plot_path: str | None, planner: rq.PlannerOptions,
               allow_paths: tuple[str, ...]) -> None:
    """The plans no other beats on both tokens/s per user and tokens/s per device, each with the pins that make
    `kvplan advise` choose it.

    The candidates are advise's own, after its rules, fit and SLO checks. Exit 0 when every scenario has a front,
    1 when one has no feasible candidate, 2 when the spec cannot be planned.
    """
    from kvplan.app.plans import pareto

    shown(pareto(rq.ParetoRequest(spec_file, fmt, scenario, plot_path, planner, allow_paths)))



@click.command("report")
@click.argument("spec_file", type=FILE, metavar="FILE.kvp")
@click.option("-o", "--out", "out_dir", type=DIR, required=True,
              help="Directory for the rationale documents (created if missing).")
@click.option("--scenario", default=None, help="Only this scenario.")
@planner_options
@allow_path_option
@handles_errors
def report_cmd(spec_file: str, out_dir: str, scenario: str | None, planner: rq.PlannerOptions,
               allow_paths: tuple[str, ...]) -> None:
    """Write MADR-shaped design-rationale documents, one per decision, ready to commit and review."""
    from kvplan.app.plans import report

    shown(report(rq.ReportRequest(spec_file, out_dir, scenario, planner, allow_paths)))



@click.command("emit")
@click.argument("spec_file", type=FILE, metavar="FILE.kvp")
@click.option("--target", "targets", default=None, metavar="NAME[,NAME]",
              help="vllm, sglang, trtllm, lmcache, flashinfer, k8s or all (all but k8s)  [default: the spec's "
                   "engine; any: all].")
@click.option("-o", "--out", "out_dir", type=DIR, default=None, metavar="DIR",
              help="Write DIR/<scenario>/<file> instead of printing; `kvplan lint --check-digest` looks in "
                   "<spec>.kvplan/.")
@click.option("--scenario", default=None, help="Only this scenario (a deployment name or an expanded name).")
@click.option("--sizing", type=click.Choice(["fill", "exact"]), default="fill", show_default=True,
              help="fill: the engine's usual memory fraction, and the capacity it buys; exact: a KV pool of exactly "
                   "the plan's footprint.")
@click.option("--cudagraph-reserve", type=bytes_type(), default=None, metavar="BYTES",
              help="CUDA-graph memory per GPU an engine subtracts in fill sizing  [default: the engine's, assumed; "
                   "vLLM 1GiB].")
@click.option("--allow-unmet", is_flag=True, default=False,
              help="Write the files of a plan that misses its spec (an SLO, the fit); each header says UNMET and "
                   "the exit stays 1.")
@plan_reserve_options
@deploy_options
@allow_path_option
@handles_errors
def emit_cmd(spec_file: str, targets: str | None, out_dir: str | None, scenario: str | None,
             sizing: Literal["fill", "exact"], cudagraph_reserve: float | None, allow_unmet: bool,
             planner: rq.PlannerOptions, deploy: rq.Deploy, allow_paths: tuple[str, ...]) -> None:
    """Write the engine configurations of a plan: command lines and YAML the engine takes as written.

    Without -o the files go to stdout, each after a `==> scenario/name <==` line; warnings and the KV
    capacity each config gives go to stderr. A target other than the spec's engine (each one for `engine =
    any`) is written from the plan made for its engine, and says so. Exit 0 when every config was written
    from a plan that meets its spec, 1 when the plan misses its spec (an SLO, the fit: nothing is written
    unless --allow-unmet), a pinned choice was changed to the nearest the target has, a config does not fit
    the device, or a target's own plan does not fit (an error: nothing is written for it), 2 when the spec
    cannot be planned.
    """
    from kvplan.app.emit import emit

    shown(emit(rq.EmitRequest(spec_file, targets, out_dir, scenario, sizing, cudagraph_reserve, planner, deploy,
                              allow_paths, allow_unmet)))
