"""`kvplan import`: an engine deployment (vLLM / SGLang flags, TensorRT-LLM YAML) read back into a .kvp spec.

Every imported spec must check without errors (kvplan.lang.check_source) and already be in
`kvplan fmt`'s canonical layout; each pin must carry the engine's choice; removed and unknown
flags must be warnings on stderr and comments in the spec.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.base.codes import Severity
from kvplan.cli import main
from kvplan.engines import importer
from kvplan.lang import check_source
from tests.paths import ROOT
from tests.unit.engines.test_import import ROUND_TRIP, checked, pins

HF = ROOT / "tests" / "data" / "hf"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


# ------------------------------------------------------------------ vLLM

def test_vllm_import_pins_the_engine_choices() -> None:
    r = run("import", "--from", "vllm", ROUND_TRIP, "--device", "h100-sxm")
    assert r.exit_code == 0, r.output
    assert r.stderr == ""
    sc = checked(r.stdout)
    assert sc.model.id == "llama-3-70b" and sc.device.id == "h100-sxm" and sc.engine == "vllm"
    assert sc.batch == 64 and sc.context == 32_000       # vLLM's lower-case k is 1000
    assert pins(sc) == {"kv_dtype": "fp8", "block_size": 16, "prefix_caching": True, "devices": 4}


def test_round_trip_through_emit_gives_back_the_kv_flags(tmp_path: Path) -> None:
    spec = tmp_path / "imported.kvp"
    r = run("import", "--from", "vllm", ROUND_TRIP, "--device", "h100-sxm", "-o", str(spec))
    assert r.exit_code == 0, r.output
    out = tmp_path / "out"
    e = run("emit", str(spec), "--target", "vllm", "-o", str(out))
    assert e.exit_code in (0, 1), e.output        # 1: 64 × 32k on 4 H100 does not fit; the flags are still written
    script = next(out.rglob("*.sh")).read_text()
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    words = words[words.index("serve") + 1:]
    flags: dict[str, str | None] = {}
    for i, w in enumerate(words):
        if w.startswith("-"):
            nxt = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else None
            flags[w] = nxt
    assert words[0] == "meta-llama/Meta-Llama-3.1-70B"
    assert flags["--kv-cache-dtype"] in ("fp8", "fp8_e4m3")
    assert flags["--block-size"] == "16"
    assert "--enable-prefix-caching" in flags and "--no-enable-prefix-caching" not in flags
    assert (flags.get("--tensor-parallel-size") or flags.get("-tp")) == "4"
    assert importer.human_int(str(flags["--max-model-len"]), "x") == importer.human_int("32k", "x") == 32_000
    assert flags["--max-num-seqs"] == "64"
    # and importing the emitted script gives the same spec choices back
    back = run("import", "--from", "vllm", str(next(out.rglob("*.sh"))), "--device", "h100-sxm")
    again = checked(back.stdout)
    first = checked(spec.read_text())
    assert pins(again) == pins(first) and (again.batch, again.context) == (first.batch, first.context)


def test_removed_and_unknown_flags_are_warnings_and_comments() -> None:
    cmd = ROUND_TRIP + " --swap-space 4 --calculate-kv-scales --cpu-offload-gb 10 --frobnicate 3 --port 8000"
    r = run("import", "--from", "vllm", cmd, "--device", "h100-sxm")
    assert r.exit_code == 0, r.output
    for flag in ("--swap-space 4", "--calculate-kv-scales", "--cpu-offload-gb 10", "--frobnicate 3"):
        assert f"kvplan: warning: {flag}" in r.stderr
        assert f"# warning: {flag}" in r.stdout
    assert "removed in vLLM 0.33.0" in r.stderr and "weights" in r.stderr
    assert "--port 8000" in r.stdout and "--port" not in r.stderr        # listed, not warned about
    sc = checked(r.stdout)
    assert "tier" not in sc.pins                                          # weight offload is not a KV tier


def test_command_file_with_continuations(tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("#!/bin/sh\n# our production server\nVLLM_USE_V1=1 vllm serve meta-llama/Meta-Llama-3.1-70B \\\n"
                 "    --kv-cache-dtype fp8 \\\n    -tp 8 \\\n    --max-model-len 131072 --max-num-seqs 16\n")
    r = run("import", "--from", "vllm", str(f), "--device", "h200")
    assert r.exit_code == 0, r.output
    sc = checked(r.stdout)
    assert (sc.batch, sc.context, pins(sc)["devices"]) == (16, 131_072, 8)
    assert "# source: file serve.sh" in r.stdout


TRT_YAML = """\
max_batch_size: 32
max_seq_len: 131072
tensor_parallel_size: 8
kv_cache_config:
  free_gpu_memory_fraction: 0.9
  enable_block_reuse: false
  tokens_per_block: 64
  dtype: fp8
  host_cache_size: 100000000000
  colour: blue
print_iter_log: true
"""


def test_trtllm_yaml(tmp_path: Path) -> None:
    y = tmp_path / "config.yaml"
    y.write_text(TRT_YAML)
    r = run("import", "--from", "trtllm", str(y), "--model", "llama-3-70b", "--device", "b200")
    assert r.exit_code == 0, r.output
    sc = checked(r.stdout)
    assert (sc.batch, sc.context) == (32, 131_072)
    assert pins(sc) == {"kv_dtype": "fp8", "block_size": 64, "prefix_caching": False, "tier": "host", "devices": 8}
    assert "kv_cache_config.colour: not a kv_cache_config field" in r.stderr  # unknown field: warned, by name
    assert "blue" not in r.stderr and "blue" not in r.stdout            # its value is not copied anywhere
    assert "print_iter_log" in r.stdout and "print_iter_log" not in r.stderr


# ------------------------------------------------------------------ models, devices, errors

def test_model_config_for_a_model_beside_the_catalog(tmp_path: Path) -> None:
    cmd = "vllm serve Qwen/Qwen3-4B --max-num-seqs 8 --max-model-len 8k"
    r = run("import", "--from", "vllm", cmd, "--device", "h100-sxm")
    assert r.exit_code == 2 and "--model-config" in r.stderr
    spec = tmp_path / "specs" / "qwen.kvp"
    spec.parent.mkdir()
    r = run("import", "--from", "vllm", cmd, "--device", "h100-sxm", "--model-config",
            str(HF / "Qwen--Qwen3-4B.json"), "-o", str(spec))
    assert r.exit_code == 0, r.output
    text = spec.read_text()
    assert 'model "Qwen3-4B"' in text and "../" in text                  # relative to the spec's directory
    assert "outside the spec's folder" in r.stderr and "--allow-path" in r.stderr
    outside = check_source(text, str(spec))                              # a spec reads only its own folder ...
    assert [d.code for d in outside.diagnostics if d.severity is Severity.ERROR] == ["KV119"]
    result = check_source(text, str(spec), allow_paths=[str(HF)])        # ... unless the folder is allowed
    assert not [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert result.scenarios[0].model.n_layers == 36


@pytest.mark.parametrize("args,message", [
    (["--from", "vllm", ROUND_TRIP], "--device"),
    (["--from", "vllm", "vllm serve meta-llama/Meta-Llama-3.1-70B --max-model-len 32k", "--device", "b200"],
     "--max-num-seqs"),
    (["--from", "vllm", ROUND_TRIP + " --block-size sixteen", "--device", "b200"], "--block-size"),
    (["--from", "vllm", ROUND_TRIP + " --max-model-len lots", "--device", "b200"], "--max-model-len"),
    (["--from", "vllm", ROUND_TRIP, "--device", "h900"], "unknown device"),
    (["--from", "vllm", "vllm serve --max-num-seqs 2", "--device", "b200"], "names no model"),
    (["--from", "vllm", ROUND_TRIP + " --kv-transfer-config '{oops'", "--device", "b200"], "not JSON"),
    (["--from", "trtllm", "max_batch_size: [1,", "--model", "llama-3-8b", "--device", "b200"], "not valid YAML"),
    (["--from", "vllm", "missing.sh", "--device", "b200"], "does not exist"),
])
def test_errors_are_one_line_exit_2(args: list[str], message: str) -> None:
    r = run("import", *args)
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.startswith("kvplan: error:")
