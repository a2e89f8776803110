"""`kvplan emit`: the engine configurations of a spec's plans, each target written from the plan for its engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import attrs

from kvplan.app.output import EXIT_CLEAN, EXIT_FINDINGS, Line, Said, err, out
from kvplan.app.requests import Deploy, EmitRequest
from kvplan.app.spec import checked, findings, with_expected
from kvplan.base.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.engines import DeployOptions
    from kvplan.engines.common import Emitted
    from kvplan.planner.plan import Plan


def deploy_options(targets: str | None, deploy: Deploy) -> DeployOptions:
    """emit's k8s overrides as DeployOptions; one given without the k8s target is refused."""
    from kvplan.engines import DeployOptions, resolve_targets

    named = deploy.given()
    if named and "k8s" not in resolve_targets(targets, "any"):
        raise KvplanError(f"{', '.join(named)} appl{'ies' if len(named) == 1 else 'y'} to the k8s "
                          "target only", help="add --target k8s, or leave the option out")
    return DeployOptions(deploy.image, deploy.namespace, deploy.pvc, deploy.shm_size, deploy.gpus_per_node,
                         deploy.gpu_resource)


# one loop over plans and targets, saying each file as it is written: an error half-way leaves what came before
def emit(req: EmitRequest) -> Said:
    """Every target's files (on stdout, or written under -o), its lines on stderr, then lint's findings; exit 1
    when a target's config has findings or a plan misses its spec (then nothing is written unless allow_unmet)."""
    from kvplan.app.replan import Reserves, capacity_line, emit, resolve_targets
    from kvplan.base.outputs import OutputTree, check_out_dir, scenario_folders
    from kvplan.catalog.settings import pin as pin_row
    from kvplan.planner import plans_for, with_engines
    from kvplan.planner.plan import Constraint

    p_opts = req.planner
    reserves = Reserves(activation=p_opts.activation_reserve, runtime=p_opts.runtime_reserve,
                        cudagraph=req.cudagraph_reserve)
    deploy = deploy_options(req.targets, req.deploy)
    if req.out_dir is not None:
        check_out_dir(req.out_dir)
    # one memory model: the plan is made under the reserves its configs are sized with
    result = yield from checked(req.spec_file, req.allow_paths)
    result = with_expected(result, p_opts.calibration, p_opts.slo_on)
    plans = [with_engines(p) for p in plans_for(result, req.scenario, **p_opts.overrides())]
    for p in plans:  # a count the model cannot split has no configuration to write
        gap = next((u for u in p.unmet if u.constraint is Constraint.LAYOUT), None)
        if gap is not None:
            raise KvplanError(f"scenario {p.scenario.name}: {gap.message}",
                              help="try " + "; or ".join(s.text for s in gap.suggestions) if gap.suggestions else None,
                              span=p.scenario.pinned.span(pin_row("devices")) or p.scenario.spans.get("devices"))
    unmet = list(_unmet(plans, req))
    if unmet and not req.allow_unmet:  # nothing written: a file that misses its spec is not safe to paste
        yield from findings(req.spec_file, result, req.allow_paths, plans=plans)
        for p, note in unmet:
            yield err(f"kvplan: error: scenario {p.scenario.name}: the plan{note} misses its spec, so no file is "
                      f"written: {p.verdict().line}")
        own = " (for a plan made for another engine: leave its target out of --target)" if any(
            n for _, n in unmet) else ""
        yield err(f"kvplan: help: apply a change the findings above suggest{own}, or pass --allow-unmet to write "
                  "the files anyway (each header says UNMET, and emit still exits 1)")
        return EXIT_FINDINGS
    folders = scenario_folders(plans, req.out_dir)
    tree = None if req.out_dir is None else OutputTree(req.out_dir)
    n_findings = 0
    chunks: list[str] = []
    for top in plans:
        for folder, p in _parts(folders[top.scenario.name], top):
            where = "/".join(folder)
            for target in resolve_targets(req.targets, p.scenario.engine):
                # the reserves the plan was made with (its memory fraction, the reserve options), and the CUDA-graph
                # reserve, which only an engine's own fraction holds
                plan_reserves = (None if reserves.cudagraph is None
                                 else attrs.evolve(p.reserves, cudagraph=reserves.cudagraph))
                written = emit(p, target, spec=req.spec_file, reserves=plan_reserves, deploy=deploy,
                               sizing=req.sizing)
                n_findings += len(written.findings)
                yield from _said(where, target, written)
                for f in written.files:
                    if tree is None:
                        chunks.append(f"==> {where}/{f.name} <==\n{f.text}")
                        continue
                    yield out(tree.write((*folder, f.name), f.text, executable=f.executable))
            line = capacity_line(written)
            if line:
                yield err(f"kvplan: {where}/{target}: {line}")
    if chunks:
        yield out("\n".join(chunks), nl=False)
    yield from findings(req.spec_file, result, req.allow_paths, plans=plans)  # last: a stopping error stays one line
    return EXIT_FINDINGS if n_findings or unmet else EXIT_CLEAN


def _parts(where: str, p: Plan) -> tuple[tuple[tuple[str, ...], Plan], ...]:
    """The plans a scenario's files are written from, each with its folder: the plan itself, or for a disaggregated
    plan (docs/service.md, Disaggregated serving) each pool's, in the folders prefill/ and decode/."""
    if p.pools is None:
        return (((where,), p),)
    return (((where, "prefill"), p.pools.prefill), ((where, "decode"), p.pools.decode))


def _unmet(plans: list[Plan], req: EmitRequest) -> Iterator[tuple[Plan, str]]:
    """Each plan a target would be written from that misses its spec (the spec's own, or the plan made for a
    target's engine, with the words that name it); a plan made for an engine that does not run is the target's
    error (nothing written for it), not listed."""
    from kvplan.app.replan import own_plans, resolve_targets

    for p in plans:
        if p.unmet:
            yield p, ""
            continue
        by: dict[str, tuple[Plan, list[str]]] = {}
        for target in resolve_targets(req.targets, p.scenario.engine):
            for own in own_plans(p, target, req.sizing):
                if own.error is None and own.plan.unmet:
                    by.setdefault(own.plan.digest, (own.plan, []))[1].append(target)
        for q, targets in by.values():
            yield q, (f" made for {q.scenario.engine}, which target{'s' if len(targets) > 1 else ''} "
                      f"{', '.join(targets)} {'are' if len(targets) > 1 else 'is'} written from,")


def _said(where: str, target: str, written: Emitted) -> Iterator[Line]:
    """A target's lines on stderr: the plan it was written from when not the spec's, its errors (nothing was
    written for it), then its warnings."""
    for line in written.planned:
        yield err(f"kvplan: {where}/{target}: {line}")
    for e in written.errors:
        yield err(f"kvplan: error: {where}: {e}")
    for w in written.warnings:
        if w not in written.errors:
            yield err(f"kvplan: warning: {where}: {w}")
