"""The deployment the load model's tests run on: Llama-3.1-8B on one H100, 16-bit weights and KV, with kvplan's
default factors and the device's scale-up link."""

from __future__ import annotations

import pytest

from kvplan import catalog
from kvplan.model import expected as ex
from kvplan.model import roofline as rf


@pytest.fixture(scope="module")
def dep() -> tuple[rf.Config, ex.Factors, float | None]:
    d = catalog.get_device("h100-sxm")
    cfg = rf.Config(catalog.get_model("llama-3.1-8b"), d, n_devices=1, tp=1, w_p=2.0, w_kv=2.0)
    return cfg, ex.default_factors(d, "bf16", "any", ""), ex.link_bandwidth(d)
