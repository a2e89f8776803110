"""The TTFT lower bound of FP8 weights is a bound on the public record (issue 22): for every fit-set row of the
silicon sample (measured before 2026-03-01) with FP8 weights that kvplan expresses, the prefill of its prompt alone
at the FP8 peak and the full bandwidth, no overhead, is at or below the measured mean TTFT (which adds queueing)."""

from __future__ import annotations

import datetime

from kvplan import catalog
from kvplan.engines import silicon
from kvplan.model import expected as ex
from kvplan.model import roofline as rf
from tests.paths import DATA

HOLDOUT = datetime.date(2026, 3, 1)


def test_every_fp8_fit_row_measures_at_or_above_its_ttft_bound() -> None:
    rows = [r for r in silicon.read(str(DATA / "public" / "silicon_sample.csv")).rows
            if r.measured_on < HOLDOUT and r.mode == "agg" and r.weights == "fp8"
            and r.layout.moe_ep == 1 and r.layout.attention_dp == 1]
    assert len(rows) > 400
    above = []
    for r in rows:
        d = catalog.get_device(r.device)
        cfg = rf.Config(catalog.get_model(r.model), d, n_devices=r.layout.tp * r.layout.pp, tp=r.layout.tp, w_p=1.0)
        perfect = ex.default_factors(d, "bf16", r.engine).perfect()
        bound = float(ex.expected_ttft(cfg, r.isl, perfect, None).ttft) * 1e3
        if bound > r.ttft_ms:
            above.append((r.id, round(bound, 1), r.ttft_ms))
    assert above == []
