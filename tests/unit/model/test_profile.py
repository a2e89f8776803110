"""kvplan.model.profile: calibration profiles read as /work/p2's contract says (docs/expected.md), each bad one a
located error, and their fits laid over the default factors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import catalog
from kvplan.base.errors import KvplanError
from kvplan.base.evidence import Evidence
from kvplan.model import expected as ex
from kvplan.model import profile as pr
from kvplan.model import roofline as rf
from tests.paths import DATA

GOOD = DATA / "profiles" / "h100-vllm.toml"
ANY = DATA / "profiles" / "any-engine.toml"


def test_the_documented_profile_reads_as_written() -> None:
    p = pr.load_profile(str(GOOD))
    assert p.name == "h100-vllm" and p.inputs == ("latency.json", "serve.json")
    (fit,) = p.fits
    assert (fit.device, fit.engine, fit.points) == ("h100-sxm", "vllm", 12)
    assert fit.eta_w == 0.87 and fit.eta_compute == 0.55
    assert fit.t_fixed == pytest.approx(1.2e-3) and fit.collective_latency == pytest.approx(12e-6)
    assert fit.rms_error == pytest.approx(0.31e-3)
    assert dict(fit.kv_efficiency) == {"bf16": 1.0, "fp8": 0.93}


def test_the_name_defaults_to_the_file_name() -> None:
    assert pr.load_profile(str(ANY)).name == "any-engine"


def test_lookup_exact_engine_then_any_then_none() -> None:
    p = pr.load_profile(str(ANY))
    assert p.fit_for("h200", "vllm") is not None and p.fit_for("h200", "vllm").engine == "any"  # type: ignore[union-attr]
    assert p.fit_for("h100-sxm", "sglang") is not None
    assert p.fit_for("h100-sxm", "vllm") is None  # an sglang fit is no vllm fit, and there is no `any` one
    assert p.fit_for("b200", "any") is None


def _laid(path: Path, device: str, kv: str, engine: str) -> tuple[ex.Factors, ex.Factors]:
    """(the defaults, the profile's fit laid over them) for that device, KV dtype and engine."""
    d = catalog.get_device(device)
    defaults = ex.default_factors(d, kv, engine, d.scaleup_link or "")
    return defaults, pr.factors(pr.load_profile(str(path)), device, kv, engine, defaults)


def test_factors_override_what_the_fit_determined() -> None:
    _, f = _laid(GOOD, "h100-sxm", "fp8", "vllm")
    assert f.profile == "h100-vllm [fit h100-sxm/vllm]"
    assert (f.eta_w.value, f.eta_compute.value) == (0.87, 0.55)
    assert f.t_fixed.value == pytest.approx(1.2e-3) and f.collective_latency.value == pytest.approx(12e-6)
    assert f.t_layer.value == pytest.approx(25e-6)
    assert f.eta_kv.value == pytest.approx(0.87 * 0.93)  # η_kv = η_w × kv_efficiency
    defaults, _ = _laid(GOOD, "h100-sxm", "fp8", "vllm")
    for name, v in f.items():
        if name == "t_moe":  # a profile fits no MoE routing time: the default stays, with its evidence
            assert v == defaults.t_moe
            continue
        assert v.evidence is Evidence.DERIVED, name
        assert str(GOOD) in v.source and "[fit h100-sxm/vllm]" in v.source, name
    assert "from 12 measurements" in f.t_fixed.source


def test_a_partial_fit_keeps_the_defaults_it_did_not_determine() -> None:
    defaults, f = _laid(ANY, "h200", "int4", "vllm")
    assert f.eta_w.value == 0.9 and f.eta_kv.value == pytest.approx(0.9 * 0.5)
    assert f.t_fixed == defaults.t_fixed and f.eta_compute == defaults.eta_compute
    # a KV dtype the fit has no kv_efficiency for: its default efficiency times the fitted η_w
    _, g = _laid(ANY, "h200", "fp8", "vllm")
    default_eff = ex.performance.factor("kv_efficiency", kv="fp8").value
    assert g.eta_kv.value == pytest.approx(0.9 * default_eff)


def test_no_fit_for_the_device_keeps_the_defaults_and_says_so() -> None:
    defaults, f = _laid(GOOD, "b200", "bf16", "any")
    p = pr.load_profile(str(GOOD))
    assert f.profile == ""
    assert [v.value for _, v in f.items()] == [v.value for _, v in defaults.items()]
    assert all("has no [[fit]] for b200" in v.source for _, v in f.items())
    assert "no [[fit]] for b200" in pr.missing_fit(p, "b200", "any")
    assert pr.missing_fit(p, "h100-sxm", "vllm") == ""


def test_a_calibrated_step_follows_the_fitted_factors() -> None:
    # computed independently: the bound's weight and KV times over the fitted fractions, plus the fitted costs
    m, d = catalog.get_model("llama-3-8b"), catalog.get_device("h100-sxm")
    cfg = rf.Config(m, d, w_kv=1.0)
    f = ex.deployment_factors(d, "fp8", "vllm", pr.load_profile(str(GOOD)))
    bound = rf.step_time(cfg, 8, 4096)
    want = 1.2e-3 + 32 * 25e-6 + float(bound.weights) / 0.87 + float(bound.kv) / (0.87 * 0.93)
    assert float(ex.expected_step(cfg, 8, 4096, f, ex.link_bandwidth(d)).step) == pytest.approx(want, rel=1e-12)


BASE = '[[fit]]\ndevice = "h100-sxm"\nengine = "vllm"\n'


@pytest.mark.parametrize("text, where, words", [
    # unknown keys, in each table, named with the ones allowed
    ('[profile]\nnmae = "x"\n', (2, 1), ["unknown key `nmae` in [profile]", "name, inputs"]),
    (BASE + "eta_kv = 0.9\n", (4, 1), ["unknown key `eta_kv` in [[fit]]", "eta_w"]),
    (BASE + "[fit.kv_efficiency]\nfp9 = 0.9\n", (5, 1), ["unknown key `fp9` in [fit.kv_efficiency]", "fp8"]),
    ('[fits]\ndevice = "h100-sxm"\n', (1, 1), ["unknown key `fits`", "profile, fit"]),
    # a fraction outside (0, 1], a negative time
    (BASE + "eta_w = 1.2\n", (4, 1), ["eta_w is 1.2", "(0, 1]"]),
    (BASE + "eta_compute = 0\n", (4, 1), ["eta_compute is 0", "(0, 1]"]),
    (BASE + "[fit.kv_efficiency]\nint4 = -0.5\n", (5, 1), ["int4 is -0.5", "(0, 1]"]),
    (BASE + 't_fixed = "-1 ms"\n', (4, 1), ["t_fixed", "not negative"]),
    (BASE + "collective_latency = -0.00001\n", (4, 1), ["collective_latency", "not negative"]),
    (BASE + 't_fixed = "1 parsec"\n', (4, 1), ["t_fixed is not a time"]),
    (BASE + 'eta_w = "0.8"\n', (4, 1), ["eta_w is a string"]),
    # two fits for one (device, engine)
    (BASE + "\n" + BASE, (5, 1), ["a second [[fit]] for h100-sxm/vllm", "line 1"]),
    # what a fit must say
    ('[[fit]]\nengine = "vllm"\n', (1, 1), ["has no device"]),
    ('[[fit]]\ndevice = "h100-sxm"\nengine = "ollama"\n', (3, 1), ["engine is not one", "vllm, sglang, trtllm, any"]),
    ('[[fit]]\ndevice = "h100-sxn"\nengine = "vllm"\n', (2, 1), ["not a catalog device", "h100-sxm"]),
    (BASE + "points = -3\n", (4, 1), ["points"]),
    # not TOML at all
    ("[[fit]\n", (1, 6), ["not valid TOML"]),
])
def test_each_bad_profile_is_one_located_error(tmp_path: Path, text: str, where: tuple[int, int],
                                               words: list[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(KvplanError) as info:
        pr.load_profile(str(path))
    exc = info.value
    assert exc.span is not None and (exc.span.file, exc.span.line, exc.span.column) == (str(path), *where), str(exc)
    for w in words:
        assert w in str(exc), str(exc)
    assert "\n" not in str(exc)


def test_a_value_of_the_wrong_type_is_named_by_its_type_not_its_text(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(BASE + 'eta_w = "hunter2"\n', encoding="utf-8")
    with pytest.raises(KvplanError) as info:
        pr.load_profile(str(path))
    assert "hunter2" not in str(info.value) and "a string" in str(info.value)


@pytest.mark.parametrize("content, words", [(b"", "is empty"), (b"# nothing\n", "only comments"),
                                            (b"name = \xff\n", "not UTF-8")])
def test_an_empty_or_undecodable_file_is_refused(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "p.toml"
    path.write_bytes(content)
    with pytest.raises(KvplanError, match=words):
        pr.load_profile(str(path))


def test_engine_any_takes_every_fit_of_its_device_and_a_profile_matching_nothing_says_why() -> None:
    """`engine = any` plans each engine's line: the profile's vllm fit on h100-sxm calibrates it (the spec's
    own line says whose fits those are); a spec on another device matches nothing, and the reason names the
    fits the profile holds and what was asked."""
    p = pr.load_profile(str(GOOD))
    assert [f.label for f in p.fits_on("h100-sxm", "any")] == ["h100-sxm/vllm"]
    assert p.fits_on("h100-sxm", "sglang") == () and p.fits_on("b200", "any") == ()
    assert pr.unmatched(p, [("h100-sxm", "any")]) is None
    why = pr.unmatched(p, [("b200", "any"), ("h100-sxm", "sglang")])
    assert why is not None and "holds h100-sxm/vllm" in why and "b200 (engine any), h100-sxm (engine sglang)" in why
    _, f = _laid(GOOD, "h100-sxm", "bf16", "any")
    assert f.profile == "" and all("its fits vllm calibrate those engines' lines" in v.source for _, v in f.items())
