"""`kvplan import`: an engine deployment (vLLM / SGLang flags, TensorRT-LLM YAML) read back into a .kvp spec.

Every imported spec must check without errors (kvplan.lang.check_source) and already be in
`kvplan fmt`'s canonical layout; each pin must carry the engine's choice; removed and unknown
flags must be warnings on stderr and comments in the spec.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.app import importer
from kvplan.base.codes import Severity
from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plan
from tests.paths import ROOT
from tests.unit.app.test_import import ROUND_TRIP, checked, pins, vllm_fill_tokens

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
    assert sc.batch == 64 and sc.max_context == 32_000   # vLLM's lower-case k is 1000
    # 64 sequences of 32k do not fit 4 H100s, so the context is what the pool holds: vLLM's own sizing at its
    # default --gpu-memory-utilization 0.92 and --max-num-batched-tokens 8,192 (tighter than kvplan's 8%
    # reserve, 935.7k tokens), 13.4k per sequence, 13Ki rounded down
    assert sc.context == vllm_fill_tokens(0.92, 8192) // 64 // 1024 * 1024 == 13 * 1024
    assert pins(sc) == {"kv_dtype": "fp8", "block_size": 16, "prefix_caching": True, "devices": 4,
                        "tensor_parallel": 4, "pipeline_parallel": 1}


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
    # plus the two settings fill sizing writes explicitly (vLLM's defaults on an H100: docs/cli-emit.md)
    assert pins(again) == {**pins(first), "memory_fraction": 0.92, "max_batched_tokens": 8192}
    assert (again.batch, again.context) == (first.batch, first.context)


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
    assert pins(sc) == {"kv_dtype": "fp8", "block_size": 64, "prefix_caching": False, "tier": "host", "devices": 8,
                        "tensor_parallel": 8, "pipeline_parallel": 1}
    assert "kv_cache_config.colour: not a kv_cache_config field" in r.stderr  # unknown field: warned, by name
    assert "blue" not in r.stderr and "blue" not in r.stdout            # its value is not copied anywhere
    assert "print_iter_log" in r.stdout and "print_iter_log" not in r.stderr


# ------------------------------------------------------------------ models, devices, errors

def test_model_config_for_a_model_beside_the_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = "vllm serve Qwen/Qwen3-4B --max-num-seqs 8 --max-model-len 8k"
    r = run("import", "--from", "vllm", cmd, "--device", "h100-sxm")
    assert r.exit_code == 2 and "--model-config" in r.stderr
    # in the spec's folder: named relative to it, nothing copied
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text((HF / "Qwen--Qwen3-4B.json").read_text())
    spec = tmp_path / "qwen.kvp"
    r = run("import", "--from", "vllm", cmd, "--device", "h100-sxm", "--model-config",
            str(tmp_path / "cfg" / "config.json"), "-o", str(spec))
    assert r.exit_code == 0, r.output
    assert 'config = "cfg/config.json"' in spec.read_text() and not (tmp_path / "models").exists()
    result = check_source(spec.read_text(), str(spec))
    assert not [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert result.scenarios[0].model.n_layers == 36
    # on stdout, outside the working directory (the spec's folder then): the path as given, and what lint needs
    monkeypatch.chdir(tmp_path)
    r = run("import", "--from", "vllm", cmd, "--device", "h100-sxm", "--model-config", str(HF / "Qwen--Qwen3-4B.json"))
    assert r.exit_code == 0 and f'config = "{HF / "Qwen--Qwen3-4B.json"}"' in r.stdout
    assert "--allow-path" in r.stderr and "-o FILE.kvp" in r.stderr


@pytest.mark.parametrize("name", ["Qwen--Qwen3-4B", "openai--gpt-oss-120b"])
def test_an_absolute_model_config_from_elsewhere_is_copied_and_the_spec_lints_clean(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 19 item 5: the spec named the absolute path, and lint refused it (KV119, outside the spec's folder)
    monkeypatch.chdir(tmp_path)  # lint's default settings: no pyproject.toml above
    config = (HF / f"{name}.json").resolve()
    spec = tmp_path / "specs" / "imported.kvp"
    spec.parent.mkdir()
    cmd = f"vllm serve {name.replace('--', '/')} --max-model-len 16k --tensor-parallel-size 2"
    r = run("import", "--from", "vllm", cmd, "--device", "h100-sxm", "--model-config", str(config), "-o", str(spec))
    assert r.exit_code == 0, r.output
    text = spec.read_text()
    block = next(ln.split('"')[1] for ln in text.splitlines() if ln.strip().startswith("config ="))
    assert not block.startswith(("/", "..")) and (spec.parent / block).read_text() == config.read_text()
    lint = run("lint", str(spec))
    assert lint.exit_code == 0, lint.output
    assert "KV119" not in lint.output and " error" not in lint.stderr and " warning" not in lint.stderr
    # advise plans what import derived: the batch its pool holds, at the context, on the copied config's numbers
    written = check_source(text, str(spec)).scenarios[0]
    at_source = check_source(text.replace(f'"{block}"', f'"{config}"'), str(spec), [str(config.parent)]).scenarios[0]
    assert (written.batch, written.context) == (at_source.batch, at_source.context)
    advise = run("advise", "--format", "json", str(spec))
    assert advise.exit_code == 0, advise.output
    assert json.loads(advise.stdout)["plans"][0]["digest"] == plan(at_source).digest
    # again into the same folder: the same copy is fine; another file there is not replaced
    assert run("import", "--from", "vllm", cmd, "--device", "h100-sxm", "--model-config", str(config), "-o",
               str(spec)).exit_code == 0
    (spec.parent / block).write_text("{}")
    again = run("import", "--from", "vllm", cmd, "--device", "h100-sxm", "--model-config", str(config), "-o",
                str(spec))
    assert again.exit_code == 2 and "is not a copy of --model-config" in again.stderr
    assert (spec.parent / block).read_text() == "{}"


@pytest.mark.parametrize("args,message", [
    (["--from", "vllm", ROUND_TRIP], "--device"),
    (["--from", "vllm", ROUND_TRIP, "--device", "b200", "--context", "64k"], "longer than the longest sequence"),
    (["--from", "vllm", ROUND_TRIP + " --gpu-memory-utilization 1.5", "--device", "b200"],
     "--gpu-memory-utilization must be a fraction"),
    (["--from", "sglang", "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 3 "
      "--enable-dp-attention --max-running-requests 8", "--device", "h200"], "must divide the tensor-parallel size"),
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


# ------------------------------------------------------------------ a running deployment lints clean

# Catalog ids until the hub ids resolve (issue 11 build 1); then these two lines take the hub ids.
LLAMA_70B = "llama-3-70b"                         # meta-llama/Llama-3.1-70B-Instruct
CHECKPOINTS = ROOT / "tests" / "data" / "import"
DEEPSEEK_V3 = ["--model-config", str(CHECKPOINTS / "deepseek-ai--DeepSeek-V3.json")]  # [] with the hub id
DEPLOYMENTS = {
    "vllm": (f"vllm serve {LLAMA_70B} --tensor-parallel-size 4 --kv-cache-dtype fp8 --max-model-len 32768 "
             "--gpu-memory-utilization 0.9 --max-num-seqs 64", "h100-sxm", []),
    "sglang": ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 8 "
               "--enable-dp-attention --mem-fraction-static 0.85 --context-length 32768", "h200", DEEPSEEK_V3),
}


def imported(engine: str, tmp_path: Path, source: str | None = None) -> Path:
    cmd, device, extra = DEPLOYMENTS[engine]
    spec = tmp_path / f"{engine}-{'again' if source else 'first'}.kvp"
    r = run("import", "--from", engine, source or cmd, "--device", device, *extra, "-o", str(spec))
    assert r.exit_code == 0, r.output
    return spec


def meaning(spec: Path) -> tuple[Any, ...]:
    sc = check_source(spec.read_text(), str(spec), allow_paths=[str(CHECKPOINTS)]).scenarios[0]
    return (sc.model.id, sc.weights.id, sc.batch, sc.context, sc.max_context, sc.budget, pins(sc))


@pytest.mark.parametrize("engine", sorted(DEPLOYMENTS))
def test_an_imported_deployment_lints_with_no_finding_of_its_own_choices(engine: str, tmp_path: Path) -> None:
    spec = imported(engine, tmp_path)
    r = run("lint", "--allow-path", str(CHECKPOINTS), str(spec))
    assert r.exit_code == 0, r.output
    assert " error" not in r.output and " warning" not in r.output, r.output


def test_the_imported_deployments_state_what_the_engines_run(tmp_path: Path) -> None:
    v = meaning(imported("vllm", tmp_path))
    assert v[1:3] == ("bf16", 64) and v[4:6] == (32_768, "near-lossless")
    assert v[6]["memory_fraction"] == 0.9 and v[3] < 32_768
    s = meaning(imported("sglang", tmp_path))
    # the checkpoint's fp8, 8 attention groups on 8 GPUs (not 64), every sequence at the bound
    assert s[1] == "fp8" and s[6]["attention_dp"] == 8 and s[6]["devices"] == 8 and s[6]["memory_fraction"] == 0.85
    assert s[3] == 32_768 and s[4] is None
    # without DP attention the latent would be on all 8 ranks: 8 times fewer sequences fit
    alone = DEPLOYMENTS["sglang"][0].replace(" --dp 8 --enable-dp-attention", "")
    r = run("import", "--from", "sglang", alone, "--device", "h200", *DEEPSEEK_V3)
    assert r.exit_code == 0, r.output
    batch = check_source(r.stdout, "x.kvp", allow_paths=[str(CHECKPOINTS)]).scenarios[0].batch
    # SGLang sizes its pool from --mem-fraction-static 0.85 of the memory free at start-up (141 GB less kvplan's
    # 1 GiB runtime reserve, 139.93 GB), less 84.13 GB of fp8 weights (the checkpoint's 673.0 GB, scales included,
    # over 8): 34.81 GB per GPU, 495.4k tokens of 70,272 B. Each of 8 groups keeps its own: 8 × 495.4k / 32,768 =
    # 120 sequences; one group of 8 ranks: 15. (kvplan's memory model, 0.85 × 141 GB, would hold 124: not
    # SGLang's pool.)
    pool = 0.85 * (141e9 - 2**30) - 84.13e9
    assert pool == pytest.approx(34.81e9, rel=1e-3)
    assert (s[2], batch) == (int(8 * pool / 70_272 / 32_768), 15) == (120, 15)


@pytest.mark.parametrize("engine", sorted(DEPLOYMENTS))
def test_import_emit_import_is_stable(engine: str, tmp_path: Path) -> None:
    first = imported(engine, tmp_path)
    out = tmp_path / "out"
    e = run("emit", "--allow-path", str(CHECKPOINTS), str(first), "--target", engine, "-o", str(out))
    assert e.exit_code == 0, e.output
    again = imported(engine, tmp_path, str(next(out.rglob("*.sh"))))
    a, f = meaning(again), meaning(first)
    # vLLM's fill sizing writes --max-num-batched-tokens explicitly (its default on an H100, 8,192), which
    # the second import reads as a pin; everything else comes back as it was
    if engine == "vllm" and "max_batched_tokens" not in f[-1]:
        assert a[-1].pop("max_batched_tokens") == 8192
    assert a == f


def test_a_pipelined_split_survives_import_lint_emit_import(tmp_path: Path) -> None:
    # unpinned, 4 H100s would be planned as tp 4 × pp 1 (the faster split); the deployment runs tp 2 × pp 2
    cmd = DEPLOYMENTS["vllm"][0].replace("--tensor-parallel-size 4", "--tensor-parallel-size 2 "
                                         "--pipeline-parallel-size 2")
    spec = tmp_path / "pp.kvp"
    r = run("import", "--from", "vllm", cmd, "--device", "h100-sxm", "-o", str(spec))
    assert r.exit_code == 0, r.output
    first = meaning(spec)
    assert {k: first[-1][k] for k in ("devices", "tensor_parallel", "pipeline_parallel")} == {
        "devices": 4, "tensor_parallel": 2, "pipeline_parallel": 2}
    lint = run("lint", "--allow-path", str(CHECKPOINTS), str(spec))
    assert lint.exit_code == 0 and " error" not in lint.output and " warning" not in lint.output, lint.output
    out = tmp_path / "out"
    e = run("emit", "--allow-path", str(CHECKPOINTS), str(spec), "--target", "vllm", "-o", str(out))
    assert e.exit_code == 0, e.output
    script = next(out.rglob("*.sh"))
    assert "--tensor-parallel-size 2" in script.read_text() and "--pipeline-parallel-size 2" in script.read_text()
    again = tmp_path / "again.kvp"
    r = run("import", "--from", "vllm", str(script), "--device", "h100-sxm", "-o", str(again))
    assert r.exit_code == 0, r.output
    second = meaning(again)
    assert second[-1].pop("max_batched_tokens", 8192) == 8192  # fill sizing writes vLLM's default explicitly
    first[-1].pop("max_batched_tokens", None)
    assert second == first
