"""One set of numbers: for the same deployment `map`, `advise`, `lint`, `emit` and `report` agree, and
where two differ on purpose each output says why (issue 9, "One set of numbers" and the regime map
of a model whose weights do not fit one device)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan import catalog
from kvplan.cli import main
from kvplan.lang import check_source

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _deepseek_with_fp8_pinned(tmp_path: Path) -> Path:
    text = (EXAMPLES / "deepseek-v3-mi300x.kvp").read_text(encoding="utf-8")
    text = text.replace("    engine    = sglang\n", "    engine    = sglang\n\n    pin {\n        kv_dtype = fp8\n    }\n")
    assert "kv_dtype = fp8" in text
    path = tmp_path / "deepseek-fp8.kvp"
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ lint's gain is advise's gain

def test_kv203_gain_is_the_one_advise_prints_on_the_plans_layout(tmp_path: Path) -> None:
    """examples/deepseek-v3-mi300x.kvp with `pin { kv_dtype = fp8 }`. lint used to judge R3 and the gain
    on one device (1.06×, 1.11×, 1.14× for batch 1, 16, 32) while advise plans 4 and 8 devices with the MLA
    latent replicated on every tensor-parallel rank (1.19×, 1.51×, 1.57×). The planner applies R3 per
    layout, so the plan's layout is right: one computation, used by both."""
    spec = _deepseek_with_fp8_pinned(tmp_path)
    m = catalog.get_model("deepseek-v3")
    # the arithmetic, independently: κ = L·(d_c + d_r)·2 B at 16-bit; K = b·s·κ·tp; W = non-routed
    # parameters + the routed experts a batch touches, E·(1 − (1 − k/E)^b), at 1 B (fp8 weights)
    kappa = 61 * (512 + 64) * 2
    assert kappa == 70_272
    s = 64_000

    def weights_read(b: int) -> float:
        dense = m.params - m.params_routed
        return (dense + m.params_routed * (1 - (1 - m.experts_per_token / m.n_experts) ** b)) * 1.0

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
        if k < w:  # below s* on the plan's layout: batch 1 only (18 GB of KV vs 37.5 GB of weights)
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
    r = run("emit", str(EXAMPLES / "llama-3.1-8b-h100-custom.kvp"), "-o", str(out), "--target", "vllm")
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
    r = run("emit", str(EXAMPLES / spec), "-o", str(out), "--target", "vllm,sglang,trtllm")
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


def test_pinned_placement_is_not_listed_as_a_default() -> None:
    text = (EXAMPLES / "w2-batch32.kvp").read_text(encoding="utf-8")
    text = re.sub(r"\n    placement = striped[^\n]*", "", text)
    assert "placement" not in check_source(text, "w2.kvp").scenarios[0].spans
    text = text.replace("    workload {", "    pin {\n        placement = striped\n    }\n\n    workload {", 1)
    (sc,) = check_source(text, "w2.kvp").scenarios
    assert "placement" in sc.pins
    assert not [a.source for a in sc.assumptions if a.source.startswith("default: placement")]


# ------------------------------------------------------------------ a file with no deployment

@pytest.mark.parametrize("text", ["", "# nothing here yet\n", "kvplan 1\n",
                                  'kvplan 1\n\ndevice "x" {\n    memory = 80 GB\n    bandwidth = 3 TB/s\n'
                                  '    compute = 900 TFLOPS\n}\n'])
def test_a_file_with_no_deployment_is_the_same_located_error_in_lint_and_advise(text: str, tmp_path: Path) -> None:
    """lint said `no findings` where advise refused the file: now both report KV104 at 1:1; lint exits 1
    (a finding), advise 2 (nothing to plan)."""
    spec = tmp_path / "empty.kvp"
    spec.write_text(text, encoding="utf-8")
    located = f"{spec}:1:1: KV104 this file declares no deployment"
    lint = run("lint", str(spec))
    assert lint.exit_code == 1, lint.output
    assert lint.stdout.splitlines()[0].startswith(located), lint.stdout
    advise = run("advise", str(spec))
    assert advise.exit_code == 2, advise.output
    assert advise.stderr.splitlines()[0].startswith(located), advise.stderr
