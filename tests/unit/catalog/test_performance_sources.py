"""performance.toml's cited defaults: each η_w is the fraction its source's figures give, of the datasheet
bandwidth the device catalog holds, and comes back from kvplan.catalog.performance as a reported factor."""

from __future__ import annotations

import re

import pytest

from kvplan import catalog
from kvplan.catalog import performance

CITED = sorted(performance._tables()["device"])
FIGURES = re.compile(r"Triad ([\d.]+) TB/s / the datasheet's ([\d.]+) TB/s = ([\d.]+)")


def test_the_devices_a_public_bandwidth_measurement_covers_are_cited() -> None:
    assert CITED == ["a100-80g", "h100-sxm", "h200", "mi300x"]


@pytest.mark.parametrize("device", CITED)
def test_each_cited_eta_w_is_its_sources_ratio_of_the_catalogs_bandwidth(device: str) -> None:
    f = performance.factor("eta_w", device=device)
    assert (f.table, f.note.startswith("reported")) == (f"device.{device}", True)
    assert re.search(r"[\w.-]+/AI-benchmarking-guide@[0-9a-f]{40}:Azure_Results/\S+\.md", f.source), f.source
    m = FIGURES.search(f.source)
    assert m, f.source
    measured, datasheet, stated = (float(x) for x in m.groups())
    assert datasheet * 1e12 == pytest.approx(catalog.get_device(device).bandwidth, rel=1e-9)
    assert f.value == stated == round(measured / datasheet, 4)


def test_an_uncited_device_and_the_other_factors_stay_assumed() -> None:
    f = performance.factor("eta_w", device="b200")
    assert (f.table, f.source, f.value) == ("defaults", "", 0.85)
    for name in ("kv_efficiency", "t_fixed", "collective_latency", "eta_compute"):
        d = performance.factor(name, kv="int4", engine="vllm", link="nvlink4", device="h100-sxm")
        assert d.table == "defaults" and d.source == "" and d.note.startswith("assumed"), name


def test_vllms_t_layer_is_its_sources_kernel_time_times_the_kernels_it_counts() -> None:
    # the source names a measured time per kernel call and the kernels a dense layer runs: the default is their
    # product, recomputed here from the figures in the text (not a figure fitted to tests/data/measured)
    f = performance.factor("t_layer", engine="vllm")
    assert (f.table, f.note.startswith("reported")) == ("engine.vllm", True)
    assert "vllm-project/vllm pull request #36899" in f.source
    assert re.search(r"vllm-project/vllm@[0-9a-f]{40}:vllm/model_executor/models/llama\.py", f.source)
    m = re.search(r"(\d+) x ([\d.]+) us = ([\d.]+) us", f.source)
    assert m, f.source
    kernels, per_call, stated = int(m[1]), float(m[2]), float(m[3])
    assert f"takes {m[2]} us per call" in f.source
    named = ("input_layernorm", "rotary_emb", "post_attention_layernorm", "SiluAndMul", "write_to_paged_cache")
    assert kernels == len(named) and all(k in f.source for k in named)
    assert f.value == pytest.approx(stated * 1e-6, rel=1e-12)
    assert stated == round(kernels * per_call, 1)


def test_t_layer_of_an_engine_without_a_kernel_measurement_is_an_assumed_zero() -> None:
    for engine in ("any", "sglang", "trtllm", "lmdeploy"):
        f = performance.factor("t_layer", engine=engine)
        assert (f.table, f.source, f.value) == ("defaults", "", 0.0)
        assert f.note.startswith("assumed")
