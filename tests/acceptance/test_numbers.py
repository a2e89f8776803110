"""One set of numbers: for the same deployment `map`, `advise`, `lint`, `emit` and `report` agree, and
where two differ on purpose each output says why (issue 9, "One set of numbers" and the regime map
of a model whose weights do not fit one device)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from kvplan import catalog
from kvplan.catalog.engines import kv_width
from kvplan.cli import main
from kvplan.lang import check_source
from tests.unit.lang.test_numbers import EXAMPLES
from tests.unit.model.test_numbers import _no_equal_exceed


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _deepseek_with_fp8_pinned(tmp_path: Path) -> Path:
    text = (EXAMPLES / "deepseek-v3-mi300x.kvp").read_text(encoding="utf-8")
    text = text.replace("    engine    = sglang\n",
                        "    engine    = sglang\n\n    pin {\n        kv_dtype = fp8\n    }\n")
    assert "kv_dtype = fp8" in text
    path = tmp_path / "deepseek-fp8.kvp"
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ lint's gain is advise's gain

#: DeepSeek-V3's FP8 checkpoint by hand from its config.json's quantization_config (fp8, weight_block_size
#: 128 × 128: 1 B a weight and a float32 scale per 16,384), its embedding and untied head (129,280 × 7,168
#: each) bf16: what the catalog entry plans with unless a spec declares `weights` (docs/weights.md)
DS_FP8, DS_EMBED = 1 + 4 / 16_384, 129_280 * 7_168


def test_kv203_gain_is_the_one_advise_prints_on_the_plans_layout(tmp_path: Path) -> None:
    """examples/deepseek-v3-mi300x.kvp with `pin { kv_dtype = fp8 }`. lint used to judge R3 and the gain
    on one device (1.06×, 1.11×, 1.14× for batch 1, 16, 32) while advise plans 4 and 8 devices with the MLA
    latent replicated on every tensor-parallel rank (1.19×, 1.51×, 1.57×). The planner applies R3 per
    layout, so the plan's layout is right: one computation, used by both."""
    spec = _deepseek_with_fp8_pinned(tmp_path)
    m = catalog.get_model("deepseek-v3")
    # the arithmetic, independently: κ = L·(d_c + d_r)·2 B at 16-bit; K = b·s·κ·tp; W = non-routed
    # parameters + the routed experts a batch touches, E·(1 − (1 − k/E)^b), at the FP8 checkpoint's widths
    kappa = 61 * (512 + 64) * 2
    assert kappa == 70_272
    s = 64_000

    def weights_read(b: int) -> float:
        dense = m.params - m.params_routed - 2 * DS_EMBED
        touched = 1 - (1 - m.experts_per_token / m.n_experts) ** b
        return 2 * DS_EMBED * 2 + (dense + m.params_routed * touched) * DS_FP8

    plans = {p["batch"]: p for p in json.loads(run("advise", str(spec), "--format", "json").stdout)["plans"]}
    assert {b: (p["choices"]["devices"], p["choices"]["tensor_parallel"]) for b, p in plans.items()} == {
        1: (4, 4), 16: (8, 8), 32: (8, 8)}
    r = run("lint", str(spec))
    kv203 = [line for line in r.stdout.splitlines() if " KV203 " in line]
    for b, p in plans.items():
        tp = p["choices"]["tensor_parallel"]
        w, k = weights_read(b), b * s * kappa * tp
        gain = (w + k) / (w + k / 2)
        q = next(d for d in p["decisions"] if d["domain"] == "quantization")
        assert q["numbers"]["speedup_from_quantization"]["value"] == pytest.approx(gain)
        mine = [line for line in kv203 if f"[deepseek-v3[batch={b}]]" in line]
        if k < w:  # below s* on the plan's layout: batch 1 only (18 GB of KV vs 39.4 GB of weights)
            assert b == 1
            assert len(mine) == 1 and f"buys only {gain:.2f}×" in mine[0], kv203
            assert "on 4 × mi300x, tp 4" in mine[0]
        else:  # KV-bound on 8 devices: compressing is speed, not an R3 finding
            assert mine == [], kv203
    assert len(kv203) == 1


# ------------------------------------------------------------------ emit: what the pool holds

_POOL = re.compile(r"KV capacity \(derived\): (?P<t>[\d,]+) tokens \((?P<n>[\d,]+) blocks of (?P<b>\d+) tokens\)"
                   r"(?P<rest>.*); the plan stores (?P<plan>[\d,]+) tokens for its batch of (?P<batch>\d+)$")


def _int(x: str) -> int:
    return int(x.replace(",", ""))


def _check_capacity_line(line: str, context: int) -> None:
    m = _POOL.search(line)
    assert m, line
    t, n, b = _int(m["t"]), _int(m["n"]), int(m["b"])
    assert n * b == t, line  # token slots are whole blocks
    own_blocks = math.ceil(context / b)
    rest = m["rest"]
    plain = re.fullmatch(r" = (\d+) sequences? of ([\d,]+) tokens \(([\d,]+) blocks(?: = ([\d,]+) tokens)? each\)"
                         r"(?: \+ ([\d,]+) spare tokens)?", rest)
    if plain:
        seqs, ctx, blocks = int(plain[1]), _int(plain[2]), _int(plain[3])
        assert ctx == context and blocks == own_blocks, line
        spare = _int(plain[5]) if plain[5] else 0
        assert seqs * blocks * b + spare == t and 0 <= spare < blocks * b, line  # the line adds up
        return
    shared = re.fullmatch(r"; at the spec's context of ([\d,]+) tokens that is (\d+) sequences? as planned "
                          r"\(([\d,.]+) tokens each on average, with the plan's prefix sharing and eviction\), "
                          r"or (\d+) sequences? that share nothing \(([\d,]+) blocks(?: = [\d,]+ tokens)? each\)", rest)
    assert shared, line
    assert _int(shared[1]) == context
    per_seq = float(shared[3].replace(",", ""))
    assert int(shared[2]) == math.floor(t / per_seq + 1e-9), line
    assert _int(shared[5]) == own_blocks and int(shared[4]) == t // (own_blocks * b), line


def test_emit_capacity_comment_adds_up(tmp_path: Path) -> None:
    """`482,000 tokens = 16 sequences of 32,000 tokens` did not add up (16 × 32,000 = 512,000): the 16
    sequences share a 2,000-token prefix. The comment now says what the pool holds: token slots in whole
    blocks, sequences at the spec's context as planned, and without sharing."""
    out = tmp_path / "out"
    r = run("emit", str(EXAMPLES / "llama-3.1-8b-h100-custom.kvp"), "-o", str(out), "--target", "vllm",
            "--sizing", "exact")  # the plan's footprint; fill sizing states what vLLM's 0.92 buys
    assert r.exit_code in (0, 1), r.output
    script = (out / "chat-8b-context-32k" / "vllm.sh").read_text(encoding="utf-8")
    line = next(x for x in script.splitlines() if "KV capacity" in x)
    _check_capacity_line(line, 32_000)
    # 2,000 shared + 16 × 30,000 own = 482,000 tokens = 30,125 blocks of 16; 2,000 blocks a sequence alone
    assert "482,000 tokens (30,125 blocks of 16 tokens)" in line
    assert "16 sequences as planned (30,125 tokens each on average" in line
    assert "or 15 sequences that share nothing (2,000 blocks each)" in line


@pytest.mark.parametrize("spec", sorted(p.name for p in EXAMPLES.glob("*.kvp")))
def test_every_emitted_capacity_comment_adds_up(spec: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    # --allow-unmet: a target's own plan that misses an SLO still states its capacity
    r = run("emit", str(EXAMPLES / spec), "-o", str(out), "--target", "vllm,sglang,trtllm", "--allow-unmet")
    assert r.exit_code in (0, 1), r.output
    contexts = {sc.name: sc.context for sc in check_source((EXAMPLES / spec).read_text(encoding="utf-8"),
                                                           str(EXAMPLES / spec)).scenarios}
    seen = 0
    for f in sorted(out.rglob("*")):
        if f.suffix not in (".sh", ".yaml"):
            continue
        lines = f.read_text(encoding="utf-8").splitlines()
        head = next((x for x in lines if " · scenario " in x), None)
        cap = next((x for x in lines if "KV capacity" in x), None)
        if head is None or cap is None:
            continue
        scenario = re.search(r" · scenario (.+?) · plan ", head)
        assert scenario, head
        _check_capacity_line(cap, contexts[scenario[1]])
        seen += 1
    assert seen


# ------------------------------------------------------------------ import: assumptions follow the spec

def test_imported_spec_lists_no_default_for_its_pinned_devices(tmp_path: Path) -> None:
    """`kvplan import` pins devices (tp × pp); the assumptions said `default: devices = auto`."""
    spec = tmp_path / "imported.kvp"
    r = run("import", "--from", "vllm", "vllm serve meta-llama/Llama-3.1-8B -tp 2 --max-num-seqs 16 "
            "--max-model-len 32000", "--device", "h100-sxm", "--model", "llama-3-8b", "-o", str(spec))
    assert r.exit_code == 0, r.output
    assert re.search(r"^ +devices += 2 ", spec.read_text(encoding="utf-8"), re.M)
    (sc,) = check_source(spec.read_text(encoding="utf-8"), str(spec)).scenarios
    assert not [a.source for a in sc.assumptions if a.source.startswith("default: devices")], sc.assumptions
    advice = run("advise", str(spec))
    assert "default: devices" not in advice.stdout
    assert "We will run on 2 devices" in advice.stdout


# ------------------------------------------------------------------ a file with no deployment

@pytest.mark.parametrize("text", ["", "# nothing here yet\n", "kvplan 1\n",
                                  'kvplan 1\n\ndevice "x" {\n    memory = 80 GB\n    bandwidth = 3 TB/s\n'
                                  '    compute = 900 TFLOPS\n}\n'])
def test_a_file_with_no_deployment_is_the_same_located_error_in_lint_and_advise(text: str, tmp_path: Path) -> None:
    """lint said `no findings` where advise refused the file: now both report one error at 1:1 (KV017
    for a file with nothing but comments, KV104 for one that declares no deployment); lint exits 1
    (a finding), advise 2 (nothing to plan)."""
    spec = tmp_path / "empty.kvp"
    spec.write_text(text, encoding="utf-8")
    blank = all(not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines())
    located = f"{spec}:1:1: " + ("KV017 the file " if blank else "KV104 this file declares no deployment")
    lint = run("lint", str(spec))
    assert lint.exit_code == 1, lint.output
    assert lint.stdout.splitlines()[0].startswith(located), lint.stdout
    advise = run("advise", str(spec))
    assert advise.exit_code == 2, advise.output
    # the same finding, located the same: lint's line is inside advise's one-line refusal
    assert lint.stdout.splitlines()[0] in advise.stderr.splitlines()[0], advise.stderr


# ------------------------------------------------------------------ the regime map when the weights do not fit

_NEGATIVE_TOKENS = re.compile(r"-\d[\d.,]*[kMG]? tokens")
_INFINITE = re.compile(r"\binf\s?x\b|\binfx\b|\binf tokens\b", re.I)


def _no_impossible_numbers(text: str, where: str) -> None:
    assert not _NEGATIVE_TOKENS.search(text), (where, _NEGATIVE_TOKENS.search(text))
    assert not _INFINITE.search(text), (where, _INFINITE.search(text))


def test_advise_draws_r1_at_the_fewest_devices_that_hold_the_weights(tmp_path: Path) -> None:
    """DeepSeek-V3's FP8 checkpoint is 673 GB of weights; one MI300X holds 192 GB. R1 printed `s cap -6.817M
    tokens` and `infx`; it is now drawn on ceil(673/192) = 4 devices, and says so."""
    spec = EXAMPLES / "deepseek-v3-mi300x.kvp"
    m = catalog.get_model("deepseek-v3")
    w = (m.params - 2 * DS_EMBED) * DS_FP8 + 2 * DS_EMBED * 2
    assert math.ceil(w / 192e9) == 4
    kappa = 61 * (512 + 64) * 2
    text = run("advise", str(spec)).stdout
    _no_impossible_numbers(text, "advise text")
    assert "regime map (R1, 16-bit KV, 4 devices: the fewest mi300x that hold the weights)" in text
    body = json.loads(run("advise", str(spec), "--format", "json").stdout)
    for p in body["plans"]:
        b, s = p["batch"], p["context"]
        mb = p["map_before"]
        assert mb["devices"]["value"] == 4
        # 4 × 192 GB less the weights, over b sequences of κ bytes a token on each of the 4 tp ranks
        assert mb["s_cap"]["value"] == pytest.approx((4 * 192e9 - w) / (b * kappa * 4))
        assert mb["context_over_s_cap"]["value"] == pytest.approx(s / mb["s_cap"]["value"])
    assert body["plans"][0]["regime_before"] == "weight-bound"  # batch 1 at 64k on 4 devices
    md = run("advise", str(spec), "--format", "markdown").stdout
    _no_impossible_numbers(md, "advise markdown")
    out = tmp_path / "report"
    assert run("report", str(spec), "-o", str(out)).exit_code == 0
    for f in sorted(out.rglob("*.md")):
        _no_impossible_numbers(f.read_text(encoding="utf-8"), str(f))


def test_a_plan_that_cannot_hold_its_weights_prints_no_capacity_crossover(tmp_path: Path) -> None:
    """Pinned to one MI300X, the plan after R8 has no s_cap: it says so instead of a negative number."""
    text = (EXAMPLES / "deepseek-v3-mi300x.kvp").read_text(encoding="utf-8")
    text = re.sub(r"devices   = <= 8[^\n]*", "devices = 1", text)
    spec = tmp_path / "one.kvp"
    spec.write_text(text, encoding="utf-8")
    r = run("advise", str(spec))
    assert r.exit_code == 1
    _no_impossible_numbers(r.stdout, "advise text")
    assert "s_cap = none (weights alone exceed memory)" in r.stdout
    body = json.loads(run("advise", str(spec), "--format", "json").stdout)
    for p in body["plans"]:
        cap = p["map_after"]["s_cap"]
        assert cap["value"] is None and "the weights alone (673 GB) exceed the memory (176.6 GB)" in cap["source"]
        assert p["map_after"]["context_over_s_cap"]["value"] is None


def test_map_says_weights_alone_exceed_memory_and_which_count_holds_them() -> None:
    args = ["map", "--model", "deepseek-v3", "--device", "mi300x", "--weights", "fp8", "--context", "64k"]
    r = run(*args)
    assert r.exit_code == 0, r.output
    _no_impossible_numbers(r.stdout, "map text")
    assert re.search(r"s_cap capacity crossover\s+none \(weights alone exceed memory\)", r.stdout)
    assert re.search(r"context / s_cap\s+none \(weights alone exceed memory\)", r.stdout)
    note = re.search(r"(\d+) devices are the fewest that hold them: --devices (\d+)", r.stdout)
    assert note and note[1] == note[2] == "4", r.stdout
    body = json.loads(run(*args, "--format", "json").stdout)
    assert body["results"]["s_cap"]["value"] is None and body["results"]["context_over_s_cap"]["value"] is None
    assert all(row["s_cap"]["value"] is None for row in body["by_kv_dtype"])
    # the note's suggestion, applied: a positive crossover, (4·192 GB − 671 GB)/(64,000... per token κ·tp)
    fixed = json.loads(run(*args, "--devices", note[2], "--format", "json").stdout)
    assert fixed["results"]["s_cap"]["value"] == pytest.approx((4 * 192e9 - 671e9) / (61 * 576 * 2 * 4), rel=1e-3)
    _no_impossible_numbers(run(*args, "--devices", note[2]).stdout, "map --devices 4")
    three = json.loads(run(*args, "--devices", "3", "--format", "json").stdout)
    assert three["results"]["s_cap"]["value"] is None  # 576 GB < 671 GB: 4 is the fewest


def test_sweep_writes_no_negative_capacity_crossover() -> None:
    r = run("sweep", "--model", "deepseek-v3", "--device", "mi300x", "--weights", "fp8", "--devices", "1,4",
            "--batch", "1,32")
    assert r.exit_code == 0, r.output
    header, *rows = [line.split(",") for line in r.stdout.splitlines()]
    col = header.index("s_cap_tokens")
    by_n = {(row[2], row[4]): row[col] for row in rows}
    assert by_n[("1", "1")] == "" and by_n[("1", "32")] == ""
    assert float(by_n[("4", "1")]) == pytest.approx((4 * 192e9 - 671e9) / (61 * 576 * 2 * 4), rel=1e-3)
    assert not any(row[col].startswith("-") for row in rows)
    js = json.loads(run("sweep", "--model", "deepseek-v3", "--device", "mi300x", "--weights", "fp8",
                        "--format", "json").stdout)
    names = [c["name"] for c in js["columns"]]
    assert js["rows"][0][names.index("s_cap_tokens")] is None


# ------------------------------------------------------------------ tables vs map: P differs on purpose

def test_tables_and_map_each_say_why_their_p_differs() -> None:
    counted = catalog.get_model("llama-3-70b").params
    assert counted == 70_553_706_496
    diff = f"{counted / 70e9 - 1:.2%}"
    assert diff == "0.79%"
    for fmt in ("text", "markdown", "json"):
        out = run("tables", "--format", fmt).stdout
        assert "P = 70e9" in out and "70,553,706,496" in out and f"s* is {diff} higher" in out, fmt
    m = run("map", "--model", "llama-3-70b", "--device", "b200").stdout
    assert re.search(r"note: params 70\.55B are counted from the model's config\.json; `kvplan tables` uses the "
                     r"paper's round P = 70e9 for this model, so its s\* is 0\.7\d% lower than here", m), m
    assert "P = 70e9" not in run("map", "--model", "llama-3-8b", "--device", "b200").stdout


# ------------------------------------------------------------------ one set of numbers, every example

def _map_json(sc: Any, n: int, tp: int, kv: str, placement: str) -> dict[str, Any]:
    """`kvplan map --format json` at the plan's point; a spec's own model or device block goes through
    the same code (kvplan.model.regime.regime_map) since the CLI takes catalog ids only."""
    try:
        catalog.get_model(sc.model.id)
        catalog.get_device(sc.device.id)
        in_catalog = True
    except Exception:
        in_catalog = False
    if in_catalog:
        r = run("map", "--model", sc.model.id, "--device", sc.device.id, "--devices", str(n), "--tp", str(tp),
                "--batch", str(sc.batch), "--context", str(sc.context),
                # a model planned at its checkpoint's bytes is drawn at them too: --weights would declare a width
                *(() if sc.model.weight_bytes is not None else ("--weights", sc.weights.id)), "--kv-dtype", kv,
                "--placement", placement, "--format", "json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)  # type: ignore[no-any-return]
    from kvplan.model import roofline as rf
    from kvplan.model.regime import regime_map
    from kvplan.render import map_view

    cfg = rf.Config(sc.model, sc.device, n_devices=n, tp=tp, w_p=sc.weights.width, w_kv=catalog.dtype(kv).width,
                    placement=placement)
    rm = regime_map(cfg, sc.batch, sc.context, weights=sc.weights, kv=catalog.dtype(kv))
    return json.loads(map_view.json_text(rm))  # type: ignore[no-any-return]


def _v(d: dict[str, Any], key: str) -> float:
    return float(d[key]["value"])


@pytest.mark.parametrize("spec", sorted(p.name for p in EXAMPLES.glob("*.kvp")))
def test_map_advise_report_and_emit_agree_for_every_example(spec: str, tmp_path: Path) -> None:
    """κ, s*, s_cap, step time, KV bytes and devices: advise's plan against `map` at the same point
    (same devices, tp, KV dtype, placement), through the plan's byte factors r, σ, φ and the reserve,
    each of which advise prints; then the report and the emitted configs against advise."""
    from kvplan.base.units import fmt_unit
    from kvplan.render.report import slug

    path = EXAMPLES / spec
    scenarios = {sc.name: sc for sc in check_source(path.read_text(encoding="utf-8"), str(path)).scenarios}
    r = run("advise", str(path), "--format", "json")
    assert r.exit_code in (0, 1), r.output
    plans = json.loads(r.stdout)["plans"]
    report = tmp_path / "report"
    assert run("report", str(path), "-o", str(report)).exit_code == 0
    emitted = tmp_path / "emit"
    e = run("emit", str(path), "-o", str(emitted), "--target", "vllm")
    assert e.exit_code in (0, 1), e.output
    for p in plans:
        # a request workload's batch is the planner's (docs/service.md): the plan has it
        sc = attrs.evolve(scenarios[p["scenario"]], batch=p["batch"])
        assert sc.model.all_full  # the relations below are linear in s (no sliding windows)
        ch = p["choices"]
        n, tp, kv, b, s = ch["devices"], ch["tensor_parallel"], ch["kv_dtype"], sc.batch, sc.context
        r_, sigma = ch["retention"], 1.0 / _v(p["byte_factors"], "prefix_caching")
        phi, block = _v(p["byte_factors"], "paging") - 1.0, ch["block_size"]
        reserve = next(a["value"] for a in p["assumptions"] if a["source"].startswith("memory reserve per device"))
        mp = _map_json(sc, n, tp, kv, ch["placement"])
        mr, ma, met = mp["results"], p["map_after"], p["metrics"]
        assert mp["devices"] == n and mp["tensor_parallel"] == tp and mp["kv_dtype"] == kv
        # `map` names no engine and draws the paper's width; the plan counts KV at its engine's, scales included
        # (kvplan.catalog.engines.kv_width): q = that width / the dtype's
        q = kv_width(sc.engine, kv, sc.model) / catalog.DTYPES[kv].width
        # κ and s*: advise's are map's through q and the traffic factor r/σ (SPEC §3, §5)
        assert _v(ma, "kappa") == pytest.approx(_v(mr, "kappa") * q * r_ / sigma, rel=1e-12)
        assert _v(ma, "s_star") == pytest.approx(_v(mr, "s_star") * sigma / (q * r_), rel=1e-9)
        # KV bytes: map's b·B_kv(s)·replication times q·r(1+φ)/σ
        per_token = _v(mr, "kv_bytes_stored") / (b * s) * q  # κ × tp replication, all layers, engine width
        assert _v(met, "kv_bytes") == pytest.approx(_v(mr, "kv_bytes_stored") * q * r_ * (1 + phi) / sigma,
                                                    rel=1e-12)
        # step time: map's streams, the KV stream scaled by q·r/σ
        t_w, t_kv, t_c = _v(mr, "step_time_weights"), _v(mr, "step_time_kv"), _v(mr, "step_time_compute")
        assert _v(met, "step_time") == pytest.approx(max(t_w + t_kv * q * r_ / sigma, t_c), rel=1e-12)
        if r_ == 1 and sigma == 1 and q == 1:
            assert _v(met, "step_time") == pytest.approx(_v(mr, "step_time"), rel=1e-12)
        # s_cap after the plan: map's memory less the reserve, in whole pages
        free = _v(mr, "capacity") * (1 - reserve) - _v(mr, "weight_bytes")
        if free > 0:
            want = math.floor(free / (b * per_token * r_ / sigma) / block) * block
            assert _v(ma, "s_cap") == pytest.approx(want, rel=1e-9)
        else:
            assert ma["s_cap"]["value"] is None
        # R1: advise's map before the plan is map's at its device count with 16-bit KV
        mb = p["map_before"]
        n0 = int(mb["devices"]["value"]) if "devices" in mb else 1
        m0 = _map_json(sc, n0, n0 if "devices" not in mb else _tp0(sc, n0), "bf16", "striped")["results"]
        assert _v(mb, "kappa") == _v(m0, "kappa")
        assert _v(mb, "s_star") == pytest.approx(_v(m0, "s_star"), rel=1e-12)
        assert _v(mb, "s_cap") == pytest.approx(_v(m0, "s_cap"), rel=1e-12)
        # report: the digest, the devices record, and the predicted numbers as advise prints them
        d = report / slug(sc.name)
        index = (d / "index.md").read_text(encoding="utf-8")
        assert f"Plan digest `{p['digest']}`" in index
        assert f"| step time | {fmt_unit(_v(met, 'step_time'), 's')} *(derived)*" in index
        assert f"| kv bytes | {fmt_unit(_v(met, 'kv_bytes'), 'B')} *(derived)*" in index
        devices = next(f for f in d.glob("*-devices.md")).read_text(encoding="utf-8")
        assert devices.startswith(f"# 02. How many devices: {n} × {sc.device.id} (tensor parallel {tp}, "
                                  f"pipeline {n // tp})")
        # emit: the header's digest, the layout flags, and the tokens the plan stores
        script = next(f for f in sorted(emitted.rglob("vllm*.sh"))  # vllm.sh, or host 0's of several
                      if f" · scenario {sc.name} · " in f.read_text(encoding="utf-8")).read_text(encoding="utf-8")
        if "\n# planned for vllm: " in script:  # the spec names another engine: vLLM's own plan, its own digest
            continue                           # (kvplan/app/replan.py; tests/acceptance/test_pertarget.py)
        assert f" · plan {p['digest']} · " in script
        assert f"--tensor-parallel-size {tp} " in script
        seqs = re.search(r"--max-num-seqs (\d+) ", script)
        assert seqs  # a batch workload's cap is its batch; a rate's is above the mean running count (its batch)
        if sc.concurrency is not None:  # a closed loop's cap is its clients: at most one request in flight each
            assert int(seqs[1]) == sc.concurrency and "the closed loop's" in script
        else:
            assert int(seqs[1]) == b if sc.rate is None else int(seqs[1]) > b and "the mean running count" in script
        assert (f"--pipeline-parallel-size {n // tp} " in script) == (n // tp > 1)
        stores = re.search(r"the plan stores ([\d,]+) tokens for its batch of (\d+)", script)
        assert stores and int(stores[2]) == b
        assert _int(stores[1]) == math.ceil(_v(met, "kv_bytes") / per_token - 1e-6)


def _tp0(sc: Any, n0: int) -> int:
    from kvplan.planner.search import tp_options

    return tp_options(sc.model, n0)[0]


def test_emit_stderr_capacity_line_counts_sequences_as_planned() -> None:
    r = run("emit", str(EXAMPLES / "w1-batch1.kvp"), "--target", "vllm", "--sizing", "exact")
    assert r.exit_code in (0, 1), r.output
    assert "KV capacity 128k tokens = 1 sequence as planned (derived); plan 128k tokens = 1 sequence (derived)" \
        in r.stderr


# ------------------------------------------------------------------ R1 on devices that cannot hold the weights

_TINY = """kvplan 1

device "tiny" {{
    memory     = {memory}
    bandwidth  = 1 TB/s
    compute    = 100 TFLOPS
    partitions = 1
}}

deployment "d" {{
    model   = llama-3-8b
    device  = tiny
    devices = 1
    workload {{
        batch   = 1
        context = 4k
    }}
}}
"""


def _all_outputs(spec: Path, tmp_path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for fmt in ("text", "json", "markdown"):
        r = run("advise", str(spec), "--format", fmt)
        assert r.exit_code == 1, r.output
        out[f"advise {fmt}"] = r.stdout
    report = tmp_path / "report"
    r = run("report", str(spec), "-o", str(report))
    assert r.exit_code in (0, 1), r.output
    for f in sorted(report.rglob("*.md")):
        out[str(f)] = f.read_text(encoding="utf-8")
    return out


def _nothing_impossible(outputs: dict[str, str]) -> None:
    for where, text in outputs.items():
        _no_impossible_numbers(text, where)
        assert not re.search(r"-inf\s?%|\binf\s?%", text), (where, re.search(r".{40}-?inf\s?%", text))
        assert "Infinity" not in text and "NaN" not in text, where
        _no_equal_exceed(text, where)


def test_r1_says_no_device_count_holds_the_weights_instead_of_drawing_a_map_past_the_limit(tmp_path: Path) -> None:
    """1 MB devices: advise drew R1 at "16061 devices" (above the 4,096 limit), printed `s cap -122.3k
    tokens`, "weights alone (16.06 GB) exceed the memory (16.06 GB)" and `headroom -inf%`. One layer of
    Llama-3-8B on the widest split (tp 32, its query heads) is P·w_p/(32·32) = 15.7 MB > 1 MB, so no
    count holds the weights: it says so."""
    m = catalog.get_model("llama-3-8b")
    assert m.params * 2 / (m.n_layers * m.n_q) > 1e6
    spec = tmp_path / "tiny.kvp"
    spec.write_text(_TINY.format(memory="1 MB"), encoding="utf-8")
    outputs = _all_outputs(spec, tmp_path)
    _nothing_impossible(outputs)
    text = outputs["advise text"]
    assert "16061" not in text
    assert "regime map (R1, 16-bit KV, one device: no count up to the device limit holds the weights)" in text
    assert "no count of tiny up to 4,096 (the device limit) holds the weights" in " ".join(text.split())
    body = json.loads(outputs["advise json"])
    mb = body["plans"][0]["map_before"]
    assert mb["devices"]["value"] is None and "4,096" in mb["devices"]["source"]
    assert mb["s_cap"]["value"] is None and mb["context_over_s_cap"]["value"] is None
    metrics = dict(body["plans"][0]["metrics"]) if isinstance(body["plans"][0]["metrics"], list) \
        else body["plans"][0]["metrics"]
    assert metrics["headroom"]["value"] is None and "reserves" in metrics["headroom"]["source"]


def test_r1_is_drawn_where_the_most_loaded_device_holds_its_weights(tmp_path: Path) -> None:
    """1 GB devices: ceil(16.06 GB / 1 GB) = 17 devices hold the weights in total, but 17 is prime, so
    tp 1 and 17 pipeline stages of ⌈32/17⌉ = 2 layers = 1.004 GB each: advise printed `s cap -461.8
    tokens` there. Counted by hand: 18 → tp 2 × pp 9 (4 layers/2 = 1.004 GB), 19 → tp 1 (2 layers),
    20 → tp 4 × pp 5, ⌈32/5⌉ = 7 layers / 4 = 0.878 GB: the fewest is 20."""
    m = catalog.get_model("llama-3-8b")
    w = m.params * 2
    per_device = {17: w * 2 / 32, 18: w * 4 / (32 * 2), 19: w * 2 / 32, 20: w * 7 / (32 * 4)}
    assert [n for n, held in per_device.items() if held < 1e9] == [20]
    spec = tmp_path / "tiny.kvp"
    spec.write_text(_TINY.format(memory="1 GB"), encoding="utf-8")
    outputs = _all_outputs(spec, tmp_path)
    _nothing_impossible(outputs)
    assert "regime map (R1, 16-bit KV, 20 devices: the fewest tiny that hold the weights)" in outputs["advise text"]
    mb = json.loads(outputs["advise json"])["plans"][0]["map_before"]
    assert mb["devices"]["value"] == 20
    kappa = 2 * m.n_layers * m.n_kv * m.head_dim * 2  # tp 4 < 8 KV heads: no replication
    free = (1e9 - per_device[20]) * (32 * 4) / 7  # the most loaded device full, scaled to the deployment
    assert mb["s_cap"]["value"] == pytest.approx(free / kappa)


def test_map_prints_no_negative_crossover_where_a_pipeline_stage_overflows() -> None:
    """DeepSeek-V3 in BF16 (1342 GB) on 7 × MI300X (1344 GB) with tp 1: the total holds the weights,
    but each stage holds ⌈61/7⌉ = 9 layers = 198 GB > 192 GB. map printed a negative s_cap.
    `--weights bf16` declares a BF16 checkpoint: it wins over the catalog's FP8 one (docs/weights.md)."""
    m = catalog.get_model("deepseek-v3")
    w = m.params * 2
    assert w < 7 * 192e9 and w * 9 / 61 > 192e9
    args = ["map", "--model", "deepseek-v3", "--device", "mi300x", "--devices", "7", "--tp", "1", "--context", "64k",
            "--weights", "bf16"]
    r = run(*args)
    assert r.exit_code == 0, r.output
    _no_impossible_numbers(r.stdout, "map text")
    assert re.search(r"s_cap capacity crossover\s+none", r.stdout), r.stdout
    assert "the most loaded device holds 198 GB of weights (9 of 61 layers, 1/1 of the heads)" in r.stdout, \
        r.stdout
    note = re.search(r"(\d+) devices are the fewest that hold them: --devices (\d+)(?: --tp (\d+))?", r.stdout)
    assert note, r.stdout
    body = json.loads(run(*args, "--format", "json").stdout)
    assert body["results"]["s_cap"]["value"] is None
    assert all(row["s_cap"]["value"] is None for row in body["by_kv_dtype"])
    # the note's suggestion, applied, has a positive crossover
    fixed = ["map", "--model", "deepseek-v3", "--device", "mi300x", "--devices", note[2], "--context", "64k",
             "--weights", "bf16", "--format", "json"] + (["--tp", note[3]] if note[3] else [])
    cap = json.loads(run(*fixed).stdout)["results"]["s_cap"]["value"]
    assert cap is not None and cap > 0
