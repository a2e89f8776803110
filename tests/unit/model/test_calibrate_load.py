"""kvplan.model.calibrate on closed-loop (concurrency) sweeps: the fit inverts the planner's load model once."""

from __future__ import annotations

import attrs
import pytest

from kvplan import catalog
from kvplan.base.evidence import Evidence, Value
from kvplan.model import calibrate as cal
from kvplan.model import expected as ex
from kvplan.model import load
from kvplan.model.pools.vllm import batched_tier

DEVICE = catalog.get_device("h100-sxm")
CLIENTS = (1, 2, 4, 8, 16, 32, 64)
N_IN, N_OUT = 1_024, 256


def truth(kv: str = "bf16", **over: float) -> ex.Factors:
    """kvplan's defaults for the device with the named factors replaced (assumed, the test's)."""
    f = ex.default_factors(DEVICE, kv, "vllm", DEVICE.scaleup_link or "")
    return f.replaced({k: Value(v, "x" if k.startswith("eta") else "s", Evidence.ASSUMED, "test")
                       for k, v in over.items()})


def served(model: str, clients: int, f: ex.Factors) -> cal.Measurement:
    """A `vllm bench serve --max-concurrency C` run as the reader makes it, its mean ITL what the load model
    gives at the factors `f` (kvplan.model.load.solve, as the planner runs a `concurrency = C` workload)."""
    m = cal.Measurement(model, DEVICE.id, 1, 1, "", "bf16", "vllm", clients, N_IN + N_OUT / 2, itl_s=1.0,
                        input_len=N_IN, output_len=N_OUT, prefill_prompts=1 if clients == 1 else 0, clients=clients)
    d = cal.deployment(m)
    sv = load.Service(0.0, N_IN, N_OUT, batched_tier(DEVICE.memory, DEVICE.id)[0], clients=float(clients))
    return attrs.evolve(m, itl_s=load.solve(d.cfg, f, d.link_bandwidth, sv).itl)


def test_a_concurrency_sweep_gives_back_the_per_step_constant() -> None:
    """One model, one (input, output): η_w is held (it moves with t_fixed) and η_kv too (the context does not
    move, so its KV bytes grow with the batch alone); t_fixed comes back (to 1e-6; the brief asks 1%)."""
    f = truth(t_fixed=3e-3)
    (fit,) = cal.fit([served("llama-3-8b", c, f) for c in CLIENTS], "p.toml")
    got, left = dict(fit.fitted), dict(fit.left_out)
    assert set(got) == {"t_fixed"}
    assert got["t_fixed"].value == pytest.approx(3e-3, rel=1e-6)
    assert "held at its default" in left["eta_w"] and "batch growth" in left["eta_kv:bf16"]
    assert all(abs(r.error) < 1e-2 for r in fit.residuals)


def test_two_models_give_back_eta_w_and_t_fixed() -> None:
    """Two weight sizes separate η_w from t_fixed (t_layer held at its default, the truth's)."""
    f = truth(eta_w=0.7, t_fixed=2.5e-3)
    ms = [served(model, c, f) for model in ("llama-3-8b", "llama-2-13b") for c in CLIENTS]
    (fit,) = cal.fit(ms, "p.toml")
    got = dict(fit.fitted)
    assert got["eta_w"].value == pytest.approx(0.7, rel=1e-6)
    assert got["t_fixed"].value == pytest.approx(2.5e-3, rel=1e-6)


def test_the_measured_itl_is_not_taken_for_the_step() -> None:
    """The double count the fit avoids: taking each run's ITL for a step at batch C (its prefill stretch
    inside the step) fits a larger t_fixed, which the planner would divide by (1 − X·P) a second time."""
    f = truth(t_fixed=3e-3)
    ms = [served("llama-3-8b", c, f) for c in CLIENTS]
    (loaded,) = cal.fit(ms, "p.toml")
    (naive,) = cal.fit([attrs.evolve(m, clients=None) for m in ms], "p.toml")
    assert dict(loaded.fitted)["t_fixed"].value == pytest.approx(3e-3, rel=1e-6)
    assert dict(naive.fitted)["t_fixed"].value > 3e-3 * 1.01


def test_a_closed_loop_itl_is_the_load_models() -> None:
    """expected_time of a closed-loop ITL is the load model's, above the bare step at batch C (the stretch)."""
    f = truth()
    m = served("llama-3-8b", 16, f)
    d = cal.deployment(m)
    assert cal.expected_time(m, "itl", d, f) == pytest.approx(m.itl_s, rel=1e-12)
    bare = float(ex.expected_step(d.cfg, 16, m.context, f, d.link_bandwidth).step)
    assert m.itl_s is not None and m.itl_s > bare
