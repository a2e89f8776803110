"""`kvplan advise` and `kvplan emit` on the H100 `engine = any` W2 example (issue 11, build 3): each engine
target is written from the plan made for its engine, advise shows those plans side by side in the words
emit prints, a target whose own plan does not fit is an error (exit 1, nothing written for it), and
`lint --check-digest` takes the files as current.

tests/unit/app/test_pertarget.py checks the same at the engines layer.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT

ANY = "tests/data/emit/w2-h100-any.kvp"
EIGHT = "tests/data/emit/w2-h100-8.kvp"


def _heads(stdout: str) -> dict[str, str]:
    """`==> name <==` sections of emit's stdout."""
    parts = re.split(r"^==> (.+) <==$\n", stdout, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_advise_and_emit_agree_engine_by_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    adv = CliRunner().invoke(main, ["advise", ANY, "--format", "json"])
    assert adv.exit_code == 0, adv.output
    (plan,) = json.loads(adv.stdout)["plans"]
    assert plan["choices"]["kv_dtype"] == "int4"
    engines = {e["engine"]: e for e in plan["engines"]}
    assert list(engines) == ["vllm", "sglang", "trtllm"]
    # vLLM runs the spec's choices as they are, at its own expected factors (its reported t_layer): its own digest
    assert engines["vllm"]["choices"] == plan["choices"] and engines["vllm"]["digest"] != plan["digest"]
    assert engines["trtllm"]["choices"]["kv_dtype"] == "fp8" and engines["trtllm"]["written"]

    r = CliRunner().invoke(main, ["emit", ANY, "--target", "vllm,sglang,trtllm"])
    files = _heads(r.stdout)
    for name, text in files.items():
        assert "nvfp4" not in text, name                     # h100-sxm has no FP4; SGLang refuses it there
    for engine, e in engines.items():
        own = [t for n, t in files.items() if n.startswith(f"w2-h100/{engine}")]
        if not e["written"]:                                 # its own plan does not fit: an error, no file
            assert not own and "kvplan: error: w2-h100: " in r.stderr and f"nothing written for {engine}" in r.stderr
            continue
        assert own and all(f"plan {e['digest']}" in t for t in own), engine
        if e["digest"] != plan["digest"]:                   # a plan of its own, said as such
            assert f"kvplan: w2-h100/{engine}: planned for {engine}" in r.stderr
            assert all(f"# planned for {engine}" in t for t in own)
    text = files["w2-h100/trtllm.yaml"]
    assert "dtype: fp8" in text and f"tensor_parallel_size: {engines['trtllm']['choices']['tensor_parallel']}" in text
    # the advise text prints each engine's plan in the words emit prints
    txt = CliRunner().invoke(main, ["advise", ANY])
    assert "per engine (engine = any" in txt.stdout
    assert " ".join(engines["trtllm"]["summary"].split()) in " ".join(txt.stdout.split())


def test_a_target_that_does_not_fit_is_an_error_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(main, ["emit", EIGHT])
    assert r.exit_code == 1
    assert set(_heads(r.stdout)) == {"w2-h100-8/vllm.sh"}    # the only engine whose plan fits 8 H100s
    for target in ("SGLang 0.5.23", "TensorRT-LLM (main, > 1.2.1)", "FlashInfer 0.7.4"):
        assert re.search(rf"^kvplan: error: w2-h100-8: {re.escape(target)}: .*does not fit", r.stderr, re.M), target
    assert "kvplan: warning: w2-h100-8: SGLang" not in r.stderr   # an error, not a warning
    ok = CliRunner().invoke(main, ["emit", EIGHT, "--target", "vllm"])
    assert ok.exit_code == 0, ok.output


def test_check_digest_takes_the_replanned_files_as_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "w2.kvp"
    shutil.copy(ROOT / ANY, spec)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["emit", "w2.kvp", "--target", "vllm,trtllm", "-o", "w2.kvplan"])
    written = [line for line in r.stdout.splitlines() if line.startswith("w2.kvplan/")]
    assert sorted(Path(w).name for w in written) == ["trtllm.sh", "trtllm.yaml", "vllm.sh"]
    lint = CliRunner().invoke(main, ["lint", "--check-digest", "w2.kvp"])
    assert "KV401" not in lint.stdout, lint.stdout
    spec.write_text(spec.read_text().replace("batch   = 32", "batch   = 30"))
    stale = CliRunner().invoke(main, ["lint", "--check-digest", "w2.kvp"])
    assert stale.stdout.count("KV401") == len(written), stale.stdout
