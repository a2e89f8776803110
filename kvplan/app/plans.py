"""`kvplan advise`, `kvplan pareto` and `kvplan report`: a checked spec planned, and the plans said or written.

Each checks the spec before it loads the planner: a spec with errors costs neither it nor numpy.
"""

from __future__ import annotations

import shlex

from kvplan.app.output import EXIT_CLEAN, EXIT_FINDINGS, Said, out
from kvplan.app.requests import AdviseRequest, ParetoRequest, ReportRequest
from kvplan.app.spec import checked, findings, with_expected
from kvplan.base.errors import KvplanError


def advise(req: AdviseRequest) -> Said:
    """The plans, then what lint reports on them; exit 1 when a plan misses a constraint."""
    result = yield from checked(req.spec_file, req.allow_paths)  # first: errors never load the planner (nor numpy)
    result = with_expected(result, req.planner.calibration, req.planner.slo_on)
    from kvplan.planner import plans_for, with_engines
    from kvplan.render import plan_view

    plans = [with_engines(p) for p in plans_for(result, req.scenario, **req.planner.overrides())]
    render = {"text": plan_view.text, "json": plan_view.json_text, "markdown": plan_view.markdown}[req.fmt]
    yield out(render(plans), nl=False)
    yield from findings(req.spec_file, result, req.allow_paths, plans=plans)
    return EXIT_FINDINGS if any(p.unmet or not p.feasible for p in plans) else EXIT_CLEAN


def pareto(req: ParetoRequest) -> Said:
    """Each scenario's front and the advise command that plans a point; exit 1 when one has no front."""
    result = yield from checked(req.spec_file, req.allow_paths)
    result = with_expected(result, req.planner.calibration, req.planner.slo_on)
    from kvplan.planner import pareto, scenarios_for
    from kvplan.render import pareto_view

    scenarios = scenarios_for(result, req.scenario)
    if req.plot_path is not None and len(scenarios) > 1:
        raise KvplanError(f"--plot draws one scenario's front, and {req.spec_file} has {len(scenarios)}",
                          help="name one with --scenario: " + ", ".join(sc.name for sc in scenarios))
    fronts = pareto.fronts(scenarios, **req.planner.overrides())
    advise = advise_command(req, req.scenario if len(scenarios) == 1 else None)
    if req.plot_path is not None:
        from kvplan.render import plot

        plot.pareto_figure(fronts[0], req.plot_path)
    fmt = req.fmt
    yield out(pareto_view.csv_text(fronts) if fmt == "csv" else pareto_view.json_text(fronts, advise)
              if fmt == "json" else pareto_view.text(fronts, advise), nl=False)
    return EXIT_FINDINGS if any(not f.points for f in fronts) else EXIT_CLEAN


def advise_command(req: ParetoRequest, scenario: str | None) -> str:
    """The `kvplan advise` command line that plans a pareto point once its pins are added: the same file, scenario
    and planner options."""
    p = req.planner
    args = ["kvplan", "advise", req.spec_file] + (["--scenario", scenario] if scenario else [])
    for flag, v in (("--reserve", p.reserve), ("--min-gain", p.min_gain), ("--prefill-efficiency", p.eta),
                    ("--activation-reserve", p.activation_reserve), ("--runtime-reserve", p.runtime_reserve)):
        if v is not None:  # exactly the number given: a whole number without a point, else its shortest repr
            args += [flag, str(int(v)) if float(v).is_integer() else repr(float(v))]
    if p.slo_on != "expected":
        args += ["--slo-on", p.slo_on]
    if p.calibration is not None:
        args += ["--calibration", p.calibration]
    for d in req.allow_paths:
        args += ["--allow-path", d]
    return shlex.join(args)


def report(req: ReportRequest) -> Said:
    """The rationale documents, one per decision, written under the output folder; each path on stdout."""
    from kvplan.base.outputs import check_out_dir

    check_out_dir(req.out_dir)
    result = yield from checked(req.spec_file, req.allow_paths)  # errors: no planner loaded
    result = with_expected(result, req.planner.calibration, req.planner.slo_on)
    from kvplan.planner import plans_for
    from kvplan.render import report

    plans = plans_for(result, req.scenario, **req.planner.overrides())
    for path in report.write(plans, req.out_dir, req.spec_file):
        yield out(path)
    return EXIT_CLEAN
