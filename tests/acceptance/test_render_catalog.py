"""Catalog text: sources shortened only at word boundaries; `kvplan models` / `kvplan devices`
columns explained; attention kinds labelled by what each model's config says."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan import catalog
from kvplan.cli import main
from tests.paths import DATA, ROOT
from tests.unit.render.test_render_catalog import cut_at_word_boundary

MODELS = sorted(catalog.models())
DEVICES = sorted(catalog.devices())


def run(*args: str) -> Any:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code in (0, 1), res.output
    return res


def _map_args(model: str, device: str) -> list[str]:
    return ["map", "--model", model, "--device", device, "--batch", "1", "--context", "4k"]


@pytest.mark.parametrize("pair", [(m, "b200") for m in MODELS] + [("llama-3-8b", d) for d in DEVICES],
                         ids=lambda p: f"{p[0]}@{p[1]}")
def test_map_inputs_show_every_catalog_source_whole_or_cut_between_words(pair: tuple[str, str]) -> None:
    args = _map_args(*pair)
    text = run(*args).output
    sources = {k: v["source"] for k, v in json.loads(run(*args, "--format", "json").output)["inputs"].items()}
    # the inputs table: its indented rows (the notes after it are prose, wrapped by the terminal)
    inputs = [ln for ln in text.split("\ninputs:\n", 1)[1].splitlines() if ln.startswith("  ")]
    seen = 0
    for line in inputs:
        assert len(line) <= 100, line
        m = re.match(r"  (\w+) +.*?  (reported|derived|assumed) +(.*)$", line)
        if not m or m.group(1) not in sources:
            continue
        seen += 1
        assert cut_at_word_boundary(sources[m.group(1)], m.group(3)), (sources[m.group(1)], m.group(3))
    assert seen >= 8
    if "…" in "\n".join(inputs):
        assert "--format json` prints each in full" in text


# ------------------------------------------------------------------ legends and attention kinds

HF = DATA / "hf"
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def _columns(text: str) -> list[str]:
    return re.split(r" {2,}", text.splitlines()[0].strip())


def _rows(text: str) -> dict[str, list[str]]:
    lines = text.splitlines()
    out = {}
    for line in lines[2:]:
        if not line.strip():
            break
        cells = re.split(r" {2,}", line.strip())
        out[cells[0]] = cells
    return out


@pytest.mark.parametrize("command", ["models", "devices"])
def test_every_column_is_explained_under_the_table_and_in_the_docs(command: str) -> None:
    text = run(command).output
    legend = text.split("\ncolumns:\n", 1)[1]
    for col in _columns(text):
        assert re.search(rf"^  {re.escape(col)}  ", legend, re.M), f"{command}: column {col!r} not in the legend"
        assert f"| `{col}` |" in CLI_DOC, f"docs/cli.md does not explain {command}'s {col!r}"
    if command == "devices":
        letters = {c for row in _rows(text).values() for c in row[-1].split("/")}
        assert letters == {"V", "S", "U"}
        for c in letters:
            assert re.search(rf"\b{c} (vendor|well-sourced|uncertain)", legend), c
            assert f"**{c}**" in CLI_DOC


def _expected_attention(mid: str) -> str:
    """From the model's config.json where tests/data/hf has it, else from the heads its source
    states ("40 heads, 40 KV heads"), else from the catalog's own head counts."""
    m = catalog.get_model(mid)
    path = HF / f"{(m.hf_id or '').replace('/', '--')}.json"
    if path.exists():
        cfg = json.loads(path.read_text(encoding="utf-8"))
        cfg = cfg.get("text_config", cfg)
        if cfg.get("kv_lora_rank"):
            return "MLA"
        q = cfg["num_attention_heads"]
        kv = cfg.get("num_key_value_heads") or q
    else:
        stated = re.search(r"(\d+) heads, (\d+) KV heads", m.source or "")
        if "MLA" in (m.source or ""):
            return "MLA"
        q, kv = (int(stated.group(1)), int(stated.group(2))) if stated else (m.n_q, m.n_kv)
    return "MHA" if kv == q else "MQA" if kv == 1 else "GQA"


def test_models_labels_each_models_attention_as_its_config_says() -> None:
    rows = _rows(run("models").output)
    cols = _columns(run("models").output)
    body = {m["id"]: m for m in json.loads(run("models", "--format", "json").output)["models"]}
    labels = {}
    for mid in MODELS:
        want = _expected_attention(mid)
        labels[mid] = want
        assert rows[mid][cols.index("attn")] == want, mid
        assert body[mid]["attention"] == want, mid
    # the catalog has each kind it claims to tell apart: MHA (Llama-2-13B, Phi-3-mini), GQA, MLA
    assert labels["llama-2-13b"] == labels["phi-3-mini"] == "MHA"
    assert labels["deepseek-v3"] == "MLA" and labels["llama-3-70b"] == "GQA"
