"""The planner's search evaluates its candidates with the model's equations (issue 20 item 3): each candidate's
KV bytes, step bound, expected step and TTFTs are, bit for bit, what kvplan.model's functions give for the same
deployment point, so that the sweep, the regime map and the planner share one equation each."""

from __future__ import annotations

import pytest

from kvplan.lang import check_source
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors, fragmentation
from kvplan.model.scenario import Scenario
from kvplan.planner import candidates, factors_for, plan
from tests.paths import ROOT

#: Batch-form examples: dense and MoE (deepseek-v3 on MI300X, a multi-partition device), a shared prefix (σ > 1),
#: reuse, a custom model.
EXAMPLES = ("w1-batch1.kvp", "w2-batch32.kvp", "w3-shared-prefix.kvp", "w4-reuse.kvp", "deepseek-v3-mi300x.kvp",
            "llama-3.1-8b-h100-custom.kvp")


def _scenarios() -> list[Scenario]:
    out = []
    for name in EXAMPLES:
        path = ROOT / "examples" / name
        r = check_source(path.read_text(encoding="utf-8"), str(path))
        out += [sc for sc in r.scenarios if sc.rate is None]
    return out


@pytest.mark.parametrize("sc", _scenarios(), ids=lambda sc: sc.name)
def test_each_candidates_figures_are_the_model_functions_at_its_point(sc: Scenario) -> None:
    p, c = plan(sc), candidates(sc)
    ev = c.evaluated
    assert len(ev) > 1
    phi = float(fragmentation(sc.context, c.block_size))
    b, s = sc.batch, sc.context
    link = ex.link_bandwidth(sc.device)
    for i in range(len(ev)):
        cfg = rf.Config(sc.model, sc.device, n_devices=int(ev.n[i]), tp=int(ev.tp[i]), w_p=sc.weights.width,
                        w_kv=float(ev.width[i]), factors=KvFactors(float(ev.retention[i]), p.sharing, phi),
                        placement=str(ev.placement[i]), attention_dp=sc.attention_dp)
        f = factors_for(sc, str(ev.dtype[i]))
        got = (ev.kv_read[i], ev.kv_stored[i], ev.step[i], ev.step_exp[i], ev.ttft[i], ev.ttft_exp[i])
        want = (rf.kv_bytes_read(cfg, b, s), rf.kv_bytes_stored(cfg, b, s), rf.step_time(cfg, b, s).step,
                ex.expected_step(cfg, b, s, f, link).step, ex.expected_ttft(cfg, s, f.perfect(), None).ttft,
                ex.expected_ttft(cfg, s, f, link).ttft)
        assert [float(x) for x in got] == [float(x) for x in want], (i, str(ev.dtype[i]), int(ev.n[i]))


def test_the_chosen_candidates_figures_are_the_plans() -> None:
    # the plan's metrics come from the same functions (kvplan.planner.figures): its step and TTFT are the search's
    sc = next(x for x in _scenarios() if x.name.startswith("w2"))
    p, c = plan(sc), candidates(sc)
    ev = c.evaluated
    i = next(j for j in range(len(ev)) if (str(ev.dtype[j]), int(ev.n[j]), int(ev.tp[j]), float(ev.retention[j]),
                                           str(ev.placement[j])) == (p.kv_dtype.id, p.n_devices, p.tp, p.retention,
                                                                     p.placement))
    assert float(ev.step_exp[i]) == p.metrics.step_time_expected.value
    assert float(ev.ttft_exp[i]) == p.metrics.ttft_expected.value and float(ev.step[i]) == p.metrics.step_time.value
