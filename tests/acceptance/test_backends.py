"""`kvplan emit`: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/app/test_backends.py;
tests/unit/app/test_backends.py says what they check.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvplan.app.digest import emitted_dir
from kvplan.app.replan import emit
from kvplan.base.errors import KvplanError
from kvplan.cli import main
from kvplan.engines import TARGETS, resolve_targets
from tests.paths import ROOT
from tests.unit.app.test_backends import files, flags, plans, shell


def test_int2_emitted_for_vllm_warns_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    (p,) = plans("tests/data/emit/int2-any.kvp")
    out = emit(p, "vllm", spec="x")
    assert out.findings and "int2 → int4" in out.findings[0]
    _, argv = shell(files(out)["vllm.sh"])
    assert flags(argv)[1]["--kv-cache-dtype"] == "int4_per_token_head"
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(main, ["emit", "tests/data/emit/int2-any.kvp", "--target", "vllm"])
    assert r.exit_code == 1
    assert "kvplan: warning: int2-any: vLLM 0.33.0: kv_dtype int2 → int4" in r.stderr
    assert r.stdout.startswith("==> int2-any/vllm.sh <==\n#!/bin/sh\n")


# ------------------------------------------------------------------ CLI

def test_cli_prints_files_with_headers_and_capacity_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(main, ["emit", "examples/llama-3.1-8b-h100-custom.kvp"])
    assert r.exit_code == 0, r.output
    heads = re.findall(r"^==> (.+) <==$", r.stdout, re.M)
    assert heads == ["chat-8b-context-8k/vllm.sh", "chat-8b-context-32k/vllm.sh"]  # the spec's engine: vllm
    assert re.search(r"chat-8b-context-8k/vllm: KV capacity .* \(derived\); plan .* \(derived\)", r.stderr)


def test_cli_writes_files_and_lint_checks_digests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "w2.kvp"
    shutil.copy(ROOT / "examples" / "w2-batch32.kvp", spec)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["emit", "w2.kvp", "--target", "vllm,trtllm,lmcache", "-o", "w2.kvplan"])
    # TensorRT-LLM has no int4: its target is written from its own plan (nvfp4 on B200), not a finding
    assert r.exit_code == 0, r.output
    assert "kvplan: w2-batch32/trtllm: planned for trtllm" in r.stderr
    written = r.stdout.split()
    assert written == ["w2.kvplan/w2-batch32/vllm.sh", "w2.kvplan/w2-batch32/trtllm.yaml",
                       "w2.kvplan/w2-batch32/trtllm.sh"]
    assert (tmp_path / written[0]).stat().st_mode & 0o111
    assert emitted_dir("w2.kvp") == Path("w2.kvplan")
    (tmp_path / "w2.kvplan" / "notes.txt").write_text("not ours\n")
    clean = CliRunner().invoke(main, ["lint", "--check-digest", "w2.kvp"])
    assert "KV401" not in clean.stdout
    text = spec.read_text().replace("batch   = 32", "batch   = 16")
    spec.write_text(text)
    stale = CliRunner().invoke(main, ["lint", "--check-digest", "w2.kvp"])
    assert stale.exit_code == 1
    hits = [line for line in stale.stdout.splitlines() if "KV401" in line]
    assert len(hits) == 3 and all(h.startswith("w2.kvp:6:") for h in hits)
    assert "KV401" not in CliRunner().invoke(main, ["lint", "w2.kvp"]).stdout  # opt-in


def test_cli_errors_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(main, ["emit", "examples/w2-batch32.kvp", "--target", "vlm"])
    assert r.exit_code == 2 and "unknown target 'vlm'" in r.stderr and "vllm" in r.stderr
    r = CliRunner().invoke(main, ["emit", "examples/w2-batch32.kvp", "--runtime-reserve", "5 tokens"])
    assert r.exit_code == 2 and "--runtime-reserve" in r.stderr
    with pytest.raises(KvplanError):
        resolve_targets("nope", "any")
    assert resolve_targets(None, "any") == tuple(t for t in TARGETS if t != "k8s")  # k8s only when named
    assert resolve_targets(None, "sglang") == ("sglang",)


def test_cli_sizing_is_a_checked_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    fill = CliRunner().invoke(main, ["emit", "examples/w2-batch32.kvp", "--target", "vllm"])
    exact = CliRunner().invoke(main, ["emit", "examples/w2-batch32.kvp", "--target", "vllm", "--sizing", "exact"])
    assert fill.exit_code == exact.exit_code == 0, (fill.output, exact.output)
    assert "--gpu-memory-utilization 0.92" in fill.stdout and "--kv-cache-memory-bytes" not in fill.stdout
    assert "--kv-cache-memory-bytes 89129308160" in exact.stdout   # (256,000 + 1 null) blocks × 348,160 B
    bad = CliRunner().invoke(main, ["emit", "examples/w2-batch32.kvp", "--sizing", "full"])
    assert bad.exit_code == 2 and "'full' is not one of 'fill', 'exact'" in bad.stderr


def test_cli_reports_a_deployment_vllm_would_refuse_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    r = CliRunner().invoke(main, ["emit", "examples/w2-batch32.kvp", "--target", "vllm",
                                  "--cudagraph-reserve", "136GB"])
    assert r.exit_code == 1
    line = next(ln for ln in r.stderr.splitlines() if "would refuse to start" in ln)
    assert line.startswith("kvplan: warning: w2-batch32: vLLM 0.33.0: vLLM would refuse to start: \"To serve at "
                           "least one request with the model's max seq len (128000)")
    assert "--gpu-memory-utilization 0.93 would start it" in line
    r = CliRunner().invoke(main, ["emit", "examples/w2-batch32.kvp", "--cudagraph-reserve", "5 tokens"])
    assert r.exit_code == 2 and "--cudagraph-reserve" in r.stderr
