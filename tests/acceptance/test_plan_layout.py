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
from tests.paths import ROOT
from tests.unit.planner.test_plan_layout import llama8b


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


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
    text = out.read_text(encoding="utf-8")
    assert re.search(rf"devices +\= {tp * pp} ", text) and re.search(rf"tensor_parallel +\= {tp} ", text)
    assert re.search(rf"pipeline_parallel += {pp} ", text)


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
