"""Review findings on the planner and the memory model (issue 9): layouts the model cannot take,
the reason a rejected option is given, the R1 map's formula and layout, and one set of reserve
options on every command that plans."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.catalog import get_model
from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plan
from kvplan.planner.plan import Rejection

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def scenario(text: str) -> Any:
    res = check_source(text, "t.kvp")
    assert res.ok, [f"{d.code} {d.message}" for d in res.diagnostics]
    return res.scenarios[0]


def llama8b(devices: str, *, pin: str = "", context: str = "128Ki") -> str:
    return f"""kvplan 1
deployment "t" {{
    model  = llama-3-8b
    device = h100-sxm
    engine = vllm
    {devices}
    workload {{
        batch   = 8
        context = {context}
    }}
    {pin}
    expect {{ regime == capacity-bound }}
}}
"""


# 1 ---------------------------------------------------------------- layouts the model cannot take

@pytest.mark.parametrize("text", [llama8b("devices = 4096"), llama8b("", pin="pin { devices = 2048 }")])
def test_a_count_with_no_split_is_unmet_with_a_verified_suggestion(text: str) -> None:
    m = get_model("llama-3-8b")  # 32 layers, 32 query heads: at most 32 × 32 = 1,024 devices split
    sc = scenario(text)
    p = plan(sc)
    assert not p.feasible
    gap = [u for u in p.unmet if u.constraint == "layout"]
    assert len(gap) == 1, [u.message for u in p.unmet]
    assert "no layout" in gap[0].message and "1,024" in gap[0].message
    # the suggestion is applied to the spec and planned again: it splits and meets everything
    assert gap[0].changes, gap[0].suggestions
    change, = gap[0].changes[0]
    path, n = change.path, int(str(change.value))
    key = "pin { devices = " if "pin.devices" == path else "devices = "
    fixed = text.replace(f"{key}{int(p.n_devices)}", f"{key}{n}")
    assert fixed != text
    p2 = plan(scenario(fixed))
    assert not p2.unmet and p2.feasible
    assert p2.tp * p2.pp == n and p2.pp <= m.n_layers and m.n_q % p2.tp == 0


def test_no_plan_has_more_pipeline_stages_than_layers() -> None:
    m = get_model("llama-3-8b")
    for n in (64, 96, 1024, 2048, 4096):
        p = plan(scenario(llama8b(f"devices = {n}")))
        assert p.pp <= m.n_layers or any(u.constraint == "layout" for u in p.unmet), (n, p.tp, p.pp)


def test_advise_lint_emit_refuse_a_count_with_no_split(tmp_path: Path) -> None:
    spec = tmp_path / "t.kvp"
    spec.write_text(llama8b("", pin="pin { devices = 2048 }"), encoding="utf-8")
    adv = run("advise", str(spec))
    assert adv.exit_code == 1, adv.output
    assert "no layout" in adv.output and "pipeline 2048" not in adv.output
    lint = run("lint", str(spec))
    assert lint.exit_code == 1 and "KV301 no layout" in lint.output, lint.output
    emit = run("emit", str(spec), "--target", "vllm")
    assert emit.exit_code == 2, emit.output
    assert "--pipeline-parallel-size" not in emit.output and "Traceback" not in emit.output
    assert "no layout" in emit.output and "t.kvp:" in emit.output


def test_import_rejects_a_split_the_model_cannot_take(tmp_path: Path) -> None:
    out = tmp_path / "tp.kvp"
    r = run("import", "--from", "vllm", "vllm serve x -tp 64 -pp 64 --max-num-seqs 8", "--model", "llama-3-8b",
            "--device", "h100-sxm", "-o", str(out))
    assert r.exit_code == 2, r.output
    assert not out.exists()
    line = r.output.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "tensor parallel 64 × pipeline parallel 64" in line and "32 layers" in line
    # the split the help names is one the model takes: it imports
    tp, pp = map(int, re.search(r"tensor parallel (\d+) × pipeline parallel (\d+)\)", line).groups())  # type: ignore[union-attr]
    ok = run("import", "--from", "vllm", f"vllm serve x -tp {tp} -pp {pp} --max-num-seqs 8", "--model",
             "llama-3-8b", "--device", "h100-sxm", "-o", str(out))
    assert ok.exit_code == 0, ok.output
    assert f"devices        = {tp * pp}" in out.read_text(encoding="utf-8")


def test_import_keeps_a_split_the_model_takes(tmp_path: Path) -> None:
    out = tmp_path / "tp.kvp"
    r = run("import", "--from", "vllm", "vllm serve x -tp 3 --max-num-seqs 8", "--model", "llama-3-8b",
            "--device", "h100-sxm", "-o", str(out))
    assert r.exit_code == 2 and "32 query heads" in r.output, r.output  # 3 does not divide 32 heads


# 2 ---------------------------------------------------------------- the reason that decides it

@pytest.mark.parametrize("batch", [16, 32])
def test_a_rejected_option_that_does_not_fit_says_so_first(batch: int) -> None:
    spec = ROOT / "examples" / "deepseek-v3-mi300x.kvp"
    r = run("advise", str(spec), "--scenario", f"deepseek-v3[batch={batch}]", "--format", "json")
    assert r.exit_code in (0, 1), r.output
    p = json.loads(r.output)["plans"][0]
    m = get_model("deepseek-v3")
    weights = m.params * 1.0  # FP8 weights: 671 GB
    mem = 192e9              # one MI300X
    devices = next(d for d in p["decisions"] if d["domain"] == "devices")
    checked = 0
    for o in devices["options"]:
        n = int(o["choice"].split(" × ")[0].split(",")[0])
        if weights > n * mem:  # the weights alone cannot fit: that decides it, before any rule
            assert o["reason"].startswith("does not fit"), o
            checked += 1
    assert checked >= 2  # 1 and 2 devices


# 3 ---------------------------------------------------------------- the R1 map's formula

R1_SPEC = """kvplan 1
deployment "big" {
    model  = llama-3.1-405b
    device = h100-sxm
    engine = vllm
    devices = auto
    workload {
        batch   = 8
        context = 32k
    }
}
"""


def test_r1_map_is_what_its_source_says_and_what_map_draws(tmp_path: Path) -> None:
    spec = tmp_path / "big.kvp"
    spec.write_text(R1_SPEC, encoding="utf-8")
    r = run("advise", str(spec), "--format", "json")
    mb = json.loads(r.output)["plans"][0]["map_before"]
    m = get_model("llama-3.1-405b")
    n, C, b = 11, 80e9, 8
    assert mb["devices"]["value"] == n  # ceil(811.7 GB / 80 GB) = 11
    kappa = 2 * m.n_layers * m.n_kv * m.head_dim * 2
    assert mb["kappa"]["value"] == kappa
    # 11 devices do not split 128 query heads: tp 1 × pp 11, 12 of 126 layers on the fullest stage
    stage = math.ceil(m.n_layers / 11)
    w_d = m.params * 2 * stage / m.n_layers
    want = (C - w_d) * m.n_layers * 1 / (stage * b * kappa)
    src = mb["s_cap"]["source"]
    assert "tp 1 × pp 11" in src and f"{stage} of {m.n_layers} layers" in src and "⌈L/pp⌉" in src
    assert mb["s_cap"]["value"] == pytest.approx(want, rel=1e-9)
    # kvplan map at the layout the source names gives the same number
    mp = run("map", "--model", "llama-3.1-405b", "--device", "h100-sxm", "--devices", "11", "--tp", "1",
             "--batch", "8", "--context", "32k", "--format", "json")
    assert json.loads(mp.output)["results"]["s_cap"]["value"] == pytest.approx(mb["s_cap"]["value"], rel=1e-12)


def test_r1_map_even_split_uses_the_printed_formula() -> None:
    text = (ROOT / "examples" / "deepseek-v3-mi300x.kvp").read_text(encoding="utf-8")
    res = check_source(text, "d.kvp")
    sc = next(s for s in res.scenarios if s.batch == 16)
    mb = dict(plan(sc).map_before.items())
    m = get_model("deepseek-v3")
    n, C = 4, 192e9
    rho = 4.0  # an MLA latent is held by every one of the 4 tensor-parallel ranks
    kappa = mb["kappa"].value
    want = (n * C - m.params * 1.0) / (16 * kappa * rho)
    assert "(N·C − P·w_p)/(b·κ·ρ)" in mb["s_cap"].source and "ρ = 4" in mb["s_cap"].source
    assert mb["s_cap"].value == pytest.approx(want, rel=1e-9)


# 4 ---------------------------------------------------------------- one memory model

RES_SPEC = """kvplan 1
deployment "r" {
    model  = llama-3-8b
    device = h100-sxm
    devices = 1
    workload {
        batch   = 1
        context = 8k
    }
    expect { regime == weight-bound }
}
"""


def test_every_reserve_option_kv301_names_works_on_every_planning_command(tmp_path: Path) -> None:
    spec = tmp_path / "r.kvp"
    spec.write_text(RES_SPEC, encoding="utf-8")
    big = run("lint", str(spec), "--runtime-reserve", "90GB")
    assert big.exit_code == 1 and "KV301" in big.output, big.output
    named = set(re.findall(r"--[a-z][a-z-]+", big.output.split("KV301", 1)[1].splitlines()[0]))
    assert named == {"--runtime-reserve", "--activation-reserve"}
    for cmd in (["lint"], ["advise"], ["report", "-o", str(tmp_path / "rep")], ["emit", "--target", "vllm"]):
        for opt in sorted(named):
            ok = run(*cmd[:1], str(spec), *cmd[1:], opt, "0")
            assert ok.exit_code in (0, 1), (cmd, opt, ok.output)
            assert "No such option" not in ok.output
            bad = run(*cmd[:1], str(spec), *cmd[1:], opt, "90GB")  # larger than the device: the plan says so
            assert "No such option" not in bad.output, (cmd, opt, bad.output)
            if cmd[0] == "report":  # report writes the rationale and exits 0; the documents say it
                text = "".join(f.read_text(encoding="utf-8") for f in (tmp_path / "rep").rglob("*.md"))
                assert "reserves alone take more than the device" in text
            else:
                assert bad.exit_code == 1, (cmd, opt, bad.output)


def test_lint_and_advise_agree_under_the_same_reserves(tmp_path: Path) -> None:
    spec = tmp_path / "r.kvp"
    spec.write_text(RES_SPEC, encoding="utf-8")
    lint = run("lint", str(spec), "--activation-reserve", "70GB")
    adv = run("advise", str(spec), "--activation-reserve", "70GB")
    assert lint.exit_code == adv.exit_code == 1
    assert "does not fit" in lint.output and "does not fit" in adv.output
    assert run("lint", str(spec)).exit_code == 0 and run("advise", str(spec)).exit_code == 0


# 5 ---------------------------------------------------------------- the records behind the reasons

def test_fit_and_layout_rejections_are_typed_records() -> None:
    # fit takes precedence over a rule's rejection, as a Rejection with no rule and cause "fit";
    # a count with no split is rejected with cause "layout" (rulemods' typed records, issue 9's order)
    res = check_source((ROOT / "examples" / "deepseek-v3-mi300x.kvp").read_text(encoding="utf-8"),
                       "deepseek-v3-mi300x.kvp")
    sc = next(s for s in res.scenarios if s.name == "deepseek-v3[batch=16]")
    devices = next(d for d in plan(sc).decisions if d.domain == "devices")
    tight = [o for o in devices.options if int(o.choice.split(" × ")[0].split(",")[0]) * 192e9 < 671e9]
    assert len(tight) >= 2
    for o in tight:
        assert isinstance(o.reason, Rejection) and o.reason.rule is None and o.reason.cause == "fit", o
    p = plan(scenario(llama8b("", pin="pin { devices = 2048 }\n    quality { budget = moderate }")))
    assert any(u.constraint == "layout" for u in p.unmet)
    opts = [o for d in p.decisions for o in d.options if isinstance(o.reason, Rejection)]
    assert opts and all(o.reason.cause == "layout" and o.reason.rule is None for o in opts)
