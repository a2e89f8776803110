"""Models by Hugging Face repo id through a fake hub cache, offline (kvplan.catalog.hub, docs/hub.md).

The cache is laid out as huggingface_hub lays it out (models--org--name/refs/main, snapshots/<commit>/,
blobs/<sha256>), built in tmp_path from the config.json files in tests/data/hf; HF_HUB_OFFLINE is set and
every socket connection fails, so a test that reached the network would fail.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan import catalog
from kvplan.catalog import hub
from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plan
from tests.paths import DATA

HF = DATA / "hf"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def put(cache: Path, repo: str, files: dict[str, str], commit: str = COMMIT) -> Path:
    """One repo in the cache: each file a blob named by its hash, linked from snapshots/<commit>/."""
    org, name = repo.split("/")
    root = cache / f"models--{org}--{name}"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (root / "blobs").mkdir(exist_ok=True)
    for fname, text in files.items():
        digest = hashlib.sha256(text.encode()).hexdigest()
        (root / "blobs" / digest).write_text(text)
        (snap / fname).symlink_to(Path("..") / ".." / "blobs" / digest)
    return snap


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "hub"
    where.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(where))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HOME", raising=False)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return where


def config(name: str) -> str:
    return (HF / f"{name}.json").read_text()


def test_three_models_through_the_cache_offline_one_not_in_the_catalog(cache: Path) -> None:
    put(cache, "meta-llama/Meta-Llama-3.1-8B", {"config.json": config("meta-llama--Meta-Llama-3.1-8B")})
    put(cache, "openai/gpt-oss-120b", {"config.json": config("openai--gpt-oss-120b")})
    put(cache, "Qwen/Qwen3-4B", {"config.json": config("Qwen--Qwen3-4B")})
    with pytest.raises(catalog.CatalogError):
        catalog.get_model("Qwen/Qwen3-4B")  # not in the catalog

    llama = hub.resolve_repo("meta-llama/Meta-Llama-3.1-8B")
    oss = hub.resolve_repo("openai/gpt-oss-120b")
    qwen = hub.resolve("Qwen/Qwen3-4B")
    # the two catalog models' geometry and counts, read from the cached files, equal their catalog entries
    for got, entry in ((llama.model, "llama-3-8b"), (oss.model, "gpt-oss-120b")):
        want = catalog.get_model(entry)
        assert (got.n_layers, got.n_kv, got.head_dim, got.params, got.params_active, got.windows) == (
            want.n_layers, want.n_kv, want.head_dim, want.params, want.params_active, want.windows)
    # Qwen3-4B: 36 layers, 8 KV heads of 128 (its config.json), 40,960 positions
    q = qwen.model
    assert (q.id, q.hf_id, q.n_layers, q.n_kv, q.head_dim, q.max_context) == (
        "Qwen/Qwen3-4B", "Qwen/Qwen3-4B", 36, 8, 128, 40960)
    # each file read is recorded with the revision: the snapshot folder's commit hash
    for r in (llama, oss, qwen):
        (f,) = r.files
        assert (f.filename, f.revision) == ("config.json", COMMIT)
        assert COMMIT in r.model.source


def test_a_catalog_repo_id_reads_no_file(cache: Path) -> None:
    # every repo id a catalog entry lists names it, case-insensitively, with the cache empty
    for mid, m in catalog.models().items():
        for repo in m.hf_ids:
            r = hub.resolve(repo.upper())
            assert r.model.id == mid and r.files == ()
    assert catalog.get_model("meta-llama/Llama-3.1-70B-Instruct").id == "llama-3-70b"


def test_the_index_total_size_is_the_weight_bytes_and_the_plan_records_it(cache: Path, tmp_path: Path) -> None:
    index = json.dumps({"metadata": {"total_size": 8_044_982_272}, "weight_map": {}})
    put(cache, "Qwen/Qwen3-4B", {"config.json": config("Qwen--Qwen3-4B"), "model.safetensors.index.json": index})
    r = hub.resolve("Qwen/Qwen3-4B")
    wb = r.model.weight_bytes
    assert wb is not None and wb.evidence == "reported" and wb.held == wb.checkpoint == 8_044_982_272
    assert [f.filename for f in r.files] == ["config.json", "model.safetensors.index.json"]

    spec = ('kvplan 1\ndeployment "q" {\n    model = "Qwen/Qwen3-4B"\n    device = h100-sxm\n'
            "    workload {\n        batch = 8\n        context = 32k\n    }\n}\n")
    res = check_source(spec, str(tmp_path / "q.kvp"))
    assert res.ok, res.diagnostics
    (sc,) = res.scenarios
    p = plan(sc)
    # the plan's inputs name both files and the revision; its weight bytes are the index's, not P · 2 B
    cited = [a for a in p.assumptions if "metadata.total_size" in a.source]
    assert cited and cited[0].value == 8_044_982_272 and COMMIT in cited[0].source
    assert p.metrics.weight_bytes.value == pytest.approx(8_044_982_272)


def test_lint_and_map_name_a_repo_id(cache: Path, tmp_path: Path) -> None:
    put(cache, "Qwen/Qwen3-4B", {"config.json": config("Qwen--Qwen3-4B")})
    r = CliRunner().invoke(main, ["map", "--model", "Qwen/Qwen3-4B", "--device", "h100-sxm", "--batch", "1",
                                  "--context", "8192"])
    assert r.exit_code == 0, r.output
    assert "Qwen/Qwen3-4B" in r.output


def test_import_of_a_repo_outside_the_catalog_lints_clean(cache: Path, tmp_path: Path) -> None:
    put(cache, "Qwen/Qwen3-4B", {"config.json": config("Qwen--Qwen3-4B")})
    r = CliRunner().invoke(main, ["import", "--from", "vllm", "vllm serve Qwen/Qwen3-4B --max-model-len 32768 "
                                  "--max-num-seqs 16", "--device", "h100-sxm"])
    assert r.exit_code == 0, r.output
    assert re.search(r'model += "Qwen/Qwen3-4B"', r.stdout), r.stdout
    assert check_source(r.stdout, str(tmp_path / "i.kvp")).ok


# ------------------------------------------------------------------ bad input: one line, exit 2

def _one_line_exit_2(args: list[str], *words: str) -> str:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    first = r.stderr.splitlines()[0]
    assert first.startswith("kvplan: error: "), r.stderr
    assert "Traceback" not in r.output
    for w in words:
        assert w in r.stderr, r.stderr
    return r.stderr


def test_an_unknown_repo_id_offline(cache: Path) -> None:
    _one_line_exit_2(["map", "--model", "nobody/no-such-model", "--device", "h100-sxm", "--batch", "1",
                      "--context", "1k"], "nobody/no-such-model", "HF_HUB_OFFLINE")
    _one_line_exit_2(["import", "--from", "vllm", "vllm serve nobody/no-such-model", "--device", "h100-sxm",
                      "--batch", "1"], "nobody/no-such-model", "not in the catalog")


def test_a_config_without_the_needed_fields(cache: Path) -> None:
    data = json.loads(config("Qwen--Qwen3-4B"))
    del data["num_attention_heads"]
    put(cache, "org/headless", {"config.json": json.dumps(data)})
    _one_line_exit_2(["map", "--model", "org/headless", "--device", "h100-sxm", "--batch", "1",
                      "--context", "1k"], "num_attention_heads", "missing")


def test_a_quantization_method_kvplan_does_not_know(cache: Path) -> None:
    data = json.loads(config("Qwen--Qwen3-4B"))
    data["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    put(cache, "org/bnb", {"config.json": json.dumps(data)})
    _one_line_exit_2(["map", "--model", "org/bnb", "--device", "h100-sxm", "--batch", "1", "--context", "1k"],
                     "bitsandbytes", "not one kvplan knows")
    # the same in a spec: KV119 names the method
    spec = ('kvplan 1\ndeployment "b" {\n    model = "org/bnb"\n    device = h100-sxm\n'
            "    workload {\n        batch = 1\n        context = 1k\n    }\n}\n")
    (d,) = check_source(spec, "b.kvp").diagnostics
    assert d.code == "KV119" and "bitsandbytes" in d.message


# ------------------------------------------------------------------ checkpoint = ...

def _spec(extra: str, model: str = "llama-3-8b", context: str = "32k") -> str:
    return (f'kvplan 1\ndeployment "c" {{\n    model = {model}\n{extra}    device = h100-sxm\n'
            f"    workload {{\n        batch = 8\n        context = {context}\n    }}\n}}\n")


def test_checkpoint_is_what_emit_serves(cache: Path, tmp_path: Path) -> None:
    ref = "meta-llama/Llama-3.1-8B-Instruct"
    f = tmp_path / "c.kvp"
    f.write_text(_spec(f'    checkpoint = "{ref}"\n', context="8k"))
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["emit", str(f), "--target", "vllm,sglang,trtllm",
                                  "-o", str(out)])
    assert r.exit_code in (0, 1), r.output
    texts = {p.name: p.read_text() for p in out.rglob("*") if p.is_file()}
    assert any(f"vllm serve {ref}" in t for t in texts.values()), list(texts)
    assert any(f"--model-path {ref}" in t for t in texts.values())
    assert any(f"trtllm-serve {ref}" in t for n, t in texts.items() if n == "trtllm.yaml")
    assert not any("meta-llama/Meta-Llama-3.1-8B " in t or "serve MODEL" in t for t in texts.values())


def test_a_quantized_checkpoint_brings_its_weight_bytes(cache: Path, tmp_path: Path) -> None:
    data = json.loads(config("meta-llama--Meta-Llama-3.1-8B"))
    data["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    put(cache, "org/llama-8b-fp8", {"config.json": json.dumps(data)})
    res = check_source(_spec('    checkpoint = "org/llama-8b-fp8"\n'), str(tmp_path / "c.kvp"))
    assert res.ok, res.diagnostics
    (sc,) = res.scenarios
    wb = sc.model.weight_bytes
    assert wb is not None and wb.evidence == "derived" and sc.model.hf_id == "org/llama-8b-fp8"
    m = catalog.get_model("llama-3-8b")
    embed = 128256 * 4096  # the embedding and the untied LM head stay bf16
    assert wb.held == pytest.approx((m.params - 2 * embed) * (1 + 4 / 128**2) + 2 * embed * 2)


def test_a_checkpoint_of_another_architecture_is_refused(cache: Path, tmp_path: Path) -> None:
    put(cache, "Qwen/Qwen3-4B", {"config.json": config("Qwen--Qwen3-4B")})
    (d,) = check_source(_spec('    checkpoint = "Qwen/Qwen3-4B"\n'), str(tmp_path / "c.kvp")).diagnostics
    assert d.code == "KV119" and "layers 36" in d.message


def test_a_checkpoint_not_in_the_cache_is_an_assumption_not_an_error(cache: Path, tmp_path: Path) -> None:
    res = check_source(_spec('    checkpoint = "org/not-cached"\n'), str(tmp_path / "c.kvp"))
    assert res.ok, res.diagnostics
    (sc,) = res.scenarios
    assert sc.model.hf_id == "org/not-cached" and sc.model.weight_bytes is None
    assert any("checkpoint org/not-cached not read" in a.source for a in sc.assumptions)


def test_a_local_checkpoint_folder(tmp_path: Path) -> None:
    ck = tmp_path / "ckpt"
    ck.mkdir()
    (ck / "config.json").write_text(config("meta-llama--Meta-Llama-3.1-8B"))
    (ck / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}}))
    res = check_source(_spec('    checkpoint = "ckpt"\n'), str(tmp_path / "c.kvp"))
    assert res.ok, res.diagnostics
    (sc,) = res.scenarios
    assert sc.model.hf_id == "ckpt" and sc.model.weight_bytes is not None
    assert sc.model.weight_bytes.held == 16_060_522_496


# ------------------------------------------------------------------ the model's own context limit

def test_a_context_beyond_the_model_limit_is_an_error_with_the_limit() -> None:
    (d,) = check_source(_spec("", model="gemma-2-9b", context="1M"), "g.kvp").diagnostics
    assert d.code == "KV126" and d.severity.name == "ERROR"
    assert "8,192 positions" in d.message and "1,000,000" in d.message
    assert check_source(_spec("", model="gemma-2-9b", context="8192"), "g.kvp").ok


def test_rope_scaling_extends_the_limit_as_vllm_reads_it() -> None:
    from kvplan.catalog.hf_config import model_from_config

    base = json.loads(config("Qwen--Qwen2.5-7B-Instruct"))
    assert model_from_config(base, id="q").max_context == 32768
    yarn = dict(base, rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    assert model_from_config(yarn, id="q").max_context == 131072
    llama3 = json.loads(config("meta-llama--Meta-Llama-3.1-8B"))  # rope_type llama3: not multiplied
    assert model_from_config(llama3, id="l").max_context == 131072
    ds = json.loads(config("deepseek-ai--DeepSeek-V3"))  # yarn: 4,096 × 40
    assert model_from_config(ds, id="d").max_context == 163840


def test_a_catalog_model_served_from_its_cached_checkpoint_gets_its_exact_bytes(cache: Path, tmp_path: Path) -> None:
    # its cached FP8 checkpoint gives the same bytes as the catalog entry, cited with the files' revision
    put(cache, "deepseek-ai/DeepSeek-V3", {"config.json": config("deepseek-ai--DeepSeek-V3")})
    spec = _spec('    checkpoint = "deepseek-ai/DeepSeek-V3"\n', model="deepseek-v3").replace("h100-sxm", "mi300x")
    res = check_source(spec, str(tmp_path / "d.kvp"))
    assert res.ok, res.diagnostics
    (sc,) = res.scenarios
    wb = sc.model.weight_bytes
    assert wb is not None and wb.method == "fp8" and wb.held == pytest.approx(673_043_149_609, rel=1e-9)
    assert any(COMMIT in a.source for a in sc.assumptions)
    without = check_source(_spec("", model="deepseek-v3").replace("h100-sxm", "mi300x"), "d.kvp").scenarios[0]
    assert without.model.weight_bytes is not None  # the catalog's own copy of the checkpoint's figure
    assert without.model.weight_bytes.held == pytest.approx(wb.held, abs=1) and sc.weights.id == "fp8"
    declared = check_source(_spec('    weights = bf16\n    checkpoint = "deepseek-ai/DeepSeek-V3"\n',
                                  model="deepseek-v3").replace("h100-sxm", "mi300x"), "d.kvp").scenarios[0]
    assert declared.model.weight_bytes is None and declared.weights.id == "bf16"  # declared weights win


def test_a_catalog_model_named_by_another_of_its_repos_serves_that_repo(tmp_path: Path) -> None:
    ref = "meta-llama/Llama-3.1-70B-Instruct"
    res = check_source(_spec("", model=f'"{ref}"').replace("h100-sxm", "b200"), "r.kvp")
    assert res.ok, res.diagnostics
    (sc,) = res.scenarios
    assert (sc.model.id, sc.model.hf_id) == ("llama-3-70b", ref)
    f = tmp_path / "r.kvp"
    f.write_text(_spec("", model=f'"{ref}"').replace("h100-sxm", "b200"))
    r = CliRunner().invoke(main, ["emit", str(f), "--target", "vllm"])
    assert f"vllm serve {ref}" in r.stdout, r.output


def test_an_import_round_trip_keeps_the_repo_id() -> None:
    line = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --max-num-seqs 8"
    r = CliRunner().invoke(main, ["import", "--from", "vllm", line, "--device", "h100-sxm"])
    assert r.exit_code == 0, r.output
    assert re.search(r'model += "meta-llama/Llama-3.1-8B-Instruct" +# catalog llama-3-8b', r.stdout), r.stdout
    res = check_source(r.stdout, "i.kvp")
    assert res.ok and res.scenarios[0].model.hf_id == "meta-llama/Llama-3.1-8B-Instruct"


def test_a_spec_reads_no_file_outside_its_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(config("meta-llama--Meta-Llama-3.1-8B"))
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    # a checkpoint folder beyond the spec's folder is refused, as a model block's config is
    (d,) = check_source(_spec('    checkpoint = "../outside"\n'), str(spec_dir / "c.kvp")).diagnostics
    assert d.code == "KV119" and "outside the folder of the spec" in d.message
    # `model =` takes a catalog name or a repo id, never a path
    (d,) = check_source(_spec("", model=f'"{outside}"'), str(spec_dir / "m.kvp")).diagnostics
    assert d.code == "KV111"


def test_a_rope_scaling_factor_out_of_range_names_the_key() -> None:
    from kvplan.base.errors import ConfigError
    from kvplan.catalog.hf_config import model_from_config

    bad = dict(json.loads(config("Qwen--Qwen2.5-7B-Instruct")), rope_scaling={"type": "linear", "factor": -2})
    with pytest.raises(ConfigError, match="'rope_scaling' factor must be a positive number"):
        model_from_config(bad, id="q")


# ------------------------------------------------------------------ bounded: the network only when asked, once

def _five_unknown() -> str:
    return "kvplan 1\n" + "".join(
        f'deployment "d{i}" {{\n    model  = "nobody/no-such-model-{i}"\n    device = h100\n'
        "    workload {\n        batch   = 1\n        context = 1k\n    }\n}\n" for i in range(1, 6))


def _where(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of `needle` in `text` (computed from the text, not from kvplan)."""
    before = text[:text.index(needle)]
    return before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1


def _findings(args: list[str]) -> list[dict[str, Any]]:
    r = CliRunner().invoke(main, ["lint", "--output-format", "json", *args])
    assert r.exit_code == 1, r.output
    found: list[dict[str, Any]] = json.loads(r.stdout)["diagnostics"]
    return found


@pytest.fixture
def attempts(cache: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every connection kvplan tries, refused (the cache fixture's sockets, recorded instead of raising)."""
    tried: list[tuple[Any, ...]] = []

    def refuse(*args: Any, **kwargs: Any) -> None:
        tried.append(args)
        raise ConnectionRefusedError(111, "refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return tried


def test_five_unknown_repo_ids_are_five_located_findings_with_and_without_hf_hub_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempts: list[tuple[Any, ...]]) -> None:
    text = _five_unknown()
    spec = tmp_path / "five.kvp"
    spec.write_text(text)
    want = [_where(text, f'"nobody/no-such-model-{i}"') for i in range(1, 6)]
    offline = _findings([str(spec)])  # HF_HUB_OFFLINE=1 (the cache fixture)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    online_env = _findings([str(spec)])  # no HF_HUB_OFFLINE: lint still reads only the cache
    assert not attempts
    for found in (offline, online_env):
        assert [(d["code"], d["range"]["start"]["line"], d["range"]["start"]["column"]) for d in found] == [
            ("KV111", line, col) for line, col in want]
    assert all("HF_HUB_OFFLINE is set" in d["message"] for d in offline)
    # the same findings, each saying why the hub was not asked and how to ask it
    for d in online_env:
        assert "--online" in d["message"] and "--online" in d["help"]
        assert "HF_HUB_OFFLINE" not in d["message"] + d["help"]  # it is not set: nothing to unset


def test_online_lint_tries_the_hub_once_per_run_and_no_more_once_it_cannot_be_reached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempts: list[tuple[Any, ...]]) -> None:
    import huggingface_hub

    asked: list[tuple[str, Any]] = []

    def unreachable(url: str, **kwargs: Any) -> None:  # the one request an attempt makes, refused
        asked.append((url, kwargs.get("timeout")))
        raise ConnectionRefusedError(111, "refused by the test")

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", unreachable)
    spec = tmp_path / "five.kvp"
    spec.write_text(_five_unknown())
    monkeypatch.delenv("HF_HUB_OFFLINE")
    found = _findings(["--online", str(spec)])
    assert len(found) == 5 and {d["code"] for d in found} == {"KV111"}
    assert f"could not be reached in {hub.ATTEMPT_SECONDS:g} s" in found[0]["message"]
    assert all("could not be reached earlier in this run" in d["message"] for d in found[1:])
    assert len(asked) == 1 and "no-such-model-1" in asked[0][0] and asked[0][1] == hub.ATTEMPT_SECONDS
    # the next run tries again, once
    _findings(["--online", str(spec)])
    assert len(asked) == 2 and not attempts


def test_online_lint_with_no_network_at_all(tmp_path: Path) -> None:
    """The hub's endpoint is a closed loopback port: no network, and no HF_HUB_OFFLINE to say so."""
    import os
    import subprocess
    import sys

    spec = tmp_path / "five.kvp"
    spec.write_text(_five_unknown())
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_CACHE=str(tmp_path / "hub"))
    for extra in ([], ["--online"]):
        r = subprocess.run([sys.executable, "-m", "kvplan", "lint", "--output-format", "json", *extra, str(spec)],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 1, r.stderr
        found = json.loads(r.stdout)["diagnostics"]
        assert [d["code"] for d in found] == ["KV111"] * 5
        assert ("could not be reached" in found[0]["message"]) == bool(extra), found[0]["message"]


def test_a_cached_repo_without_the_optional_index_never_goes_online(
        monkeypatch: pytest.MonkeyPatch, cache: Path, attempts: list[tuple[Any, ...]]) -> None:
    put(cache, "Qwen/Qwen3-4B", {"config.json": config("Qwen--Qwen3-4B")})
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with hub.network(True):
        r = hub.resolve_repo("Qwen/Qwen3-4B")
    assert [f.filename for f in r.files] == ["config.json"] and not attempts


@pytest.mark.parametrize("ref", ["../", "..", "../../etc", "main", "0123", "not a hash\n"])
def test_a_cache_ref_that_is_not_a_commit_hash_is_a_clear_error(
        ref: str, monkeypatch: pytest.MonkeyPatch, cache: Path, attempts: list[tuple[Any, ...]]) -> None:
    put(cache, "org/broken", {"config.json": config("Qwen--Qwen3-4B")})
    (cache / "models--org--broken" / "refs" / "main").write_text(ref)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    err = _one_line_exit_2(["map", "--model", "org/broken", "--device", "h100-sxm", "--batch", "1",
                            "--context", "1k"], "refs/main", "commit hash", "org/broken")
    assert "internal error" not in err and "not a hash" not in err and "../../etc" not in err  # not echoed
    assert not attempts
    spec = ('kvplan 1\ndeployment "b" {\n    model = "org/broken"\n    device = h100-sxm\n'
            "    workload {\n        batch = 1\n        context = 1k\n    }\n}\n")
    (d,) = check_source(spec, "b.kvp").diagnostics
    assert d.code == "KV119" and "commit hash" in d.message and d.span is not None and d.span.line == 3


# ------------------------------------------------------------------ the advice works

def _installed_download() -> str:
    """The download command of the installed huggingface_hub, from its version (hf arrived in 0.34)."""
    from importlib.metadata import version

    major, minor = (int(x) for x in version("huggingface_hub").split(".")[:2])
    return "hf download" if (major, minor) >= (0, 34) else "huggingface-cli download"


def test_the_download_command_in_the_advice_is_the_installed_one(cache: Path) -> None:
    import os
    import sys

    err = _one_line_exit_2(["map", "--model", "nobody/no-such-model", "--device", "h100-sxm", "--batch", "1",
                            "--context", "1k"])
    command = _installed_download()
    assert f"`{command} nobody/no-such-model config.json" in err, err
    # the command is one this environment has (a console script beside the interpreter)
    assert os.path.exists(os.path.join(os.path.dirname(sys.executable), command.split()[0]))


def test_the_model_block_the_advice_shows_lints_when_applied(tmp_path: Path, cache: Path) -> None:
    (d,) = check_source(_spec("", model='"nobody/tiny-model"'), str(tmp_path / "x.kvp")).diagnostics
    assert d.code == "KV111" and d.help is not None
    block, named = re.findall(r"`(model [^`]*)`", d.help)
    folder = tmp_path / "models" / "tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(config("Qwen--Qwen3-4B"))
    fixed = _spec("", model=named.split(" = ")[1]).replace(
        "kvplan 1\n", "kvplan 1\n" + block.replace("path/config.json", "models/tiny/config.json") + "\n")
    res = check_source(fixed, str(tmp_path / "x.kvp"))
    assert res.ok and not res.diagnostics, (fixed, res.diagnostics)


def test_a_config_path_in_model_is_a_path_not_a_repo_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempts: list[tuple[Any, ...]]) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    folder = tmp_path / "models" / "my-7b"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(config("Qwen--Qwen3-4B"))
    for path in ("models/my-7b/config.json", "./models/my-7b", "dir/config.json"):
        text = _spec("", model=f'"{path}"')
        with hub.network(True):
            (d,) = check_source(text, str(tmp_path / "p.kvp")).diagnostics
        assert d.code == "KV111" and "is a path" in d.message and d.span is not None
        assert (d.span.line, d.span.column) == _where(text, f'"{path}"')
        assert d.help is not None
        block, named = re.findall(r"`(model [^`]*)`", d.help)
        if path != "dir/config.json":  # the advice applied lints clean where the config exists
            fixed = text.replace(f'model = "{path}"', named).replace("kvplan 1\n", f"kvplan 1\n{block}\n")
            res = check_source(fixed, str(tmp_path / "p.kvp"))
            assert res.ok and not res.diagnostics, (fixed, res.diagnostics)
    assert not attempts


def test_a_safetensors_index_nested_2000_deep_is_located(cache: Path) -> None:
    index = '{"metadata": {"total_size": 1}, "weight_map": ' + "[" * 2000 + "]" * 2000 + "}"
    snap = put(cache, "org/deep", {"config.json": config("Qwen--Qwen3-4B"), "model.safetensors.index.json": index})
    spec = ('kvplan 1\ndeployment "d" {\n    model = "org/deep"\n    device = h100-sxm\n'
            "    workload {\n        batch = 1\n        context = 1k\n    }\n}\n")
    (d,) = check_source(spec, "d.kvp").diagnostics
    assert d.code == "KV119" and "64 levels deep" in d.message and d.span is not None and d.span.line == 3
    err = _one_line_exit_2(["map", "--model", "org/deep", "--device", "h100-sxm", "--batch", "1", "--context", "1k"],
                           "64 levels deep")
    col = index.index("[") + 63 + 1  # the object is level 1: its 64th `[` opens level 65 (line 1)
    assert f"{snap / 'model.safetensors.index.json'}:1:{col}" in err, err
