"""Catalog text: sources shortened only at word boundaries; `kvplan models` / `kvplan devices`
columns explained; attention kinds labelled by what each model's config says."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import catalog
from kvplan.cli import main
from kvplan.render.common import clip

MODELS = sorted(catalog.models())
DEVICES = sorted(catalog.devices())


def run(*args: str) -> Any:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code in (0, 1), res.output
    return res


def _catalog_sources() -> list[str]:
    out = [m.source for m in catalog.models().values()] + [d.source for d in catalog.devices().values()]
    out += [lk.source for lk in catalog.links().values()]
    return [s for s in out if s]


def cut_at_word_boundary(full: str, shown: str) -> bool:
    """`shown` is `full`, or a prefix of it that ends where a word ends, then "…"."""
    if shown == full:
        return True
    if not shown.endswith("…"):
        return False
    head = shown[:-1]
    return (bool(head) and full.startswith(head) and not head[-1].isspace()
            and len(head) < len(full) and not full[len(head)].isalnum())


# ------------------------------------------------------------------ clip

@pytest.mark.parametrize("source", _catalog_sources())
def test_every_catalog_source_is_shortened_only_between_words(source: str) -> None:
    for width in range(12, 130, 7):
        shown = clip(source, width)
        assert cut_at_word_boundary(source, shown), (width, shown)
        first_word = source.split(" ", 1)[0]
        assert len(shown) <= max(width, len(first_word) + 1), (width, shown)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.text("abcxyz0129,;:.()", min_size=1, max_size=12), min_size=1, max_size=20), st.integers(2, 80))
def test_clip_never_cuts_a_word(words: list[str], width: int) -> None:
    text = " ".join(words)
    shown = clip(text, width)
    if shown == text:
        assert len(text) <= width or " " not in text
        return
    assert shown.endswith("…")
    head = shown[:-1]
    assert text.startswith(head)
    assert text[len(head)] in " ,;:", (text, shown)  # the next character ends the word


def test_clip_examples() -> None:
    assert clip("paper Tab. 3; TweakTown Blackwell announcement", 30) == "paper Tab. 3; TweakTown…"
    assert clip("short", 30) == "short"
    assert clip("config.json meta-llama/Meta-Llama-3.1-70B; params counted", 50) == \
        "config.json meta-llama/Meta-Llama-3.1-70B; params…"


def _map_args(model: str, device: str) -> list[str]:
    return ["map", "--model", model, "--device", device, "--batch", "1", "--context", "4k"]


@pytest.mark.parametrize("pair", [(m, "b200") for m in MODELS] + [("llama-3-8b", d) for d in DEVICES],
                         ids=lambda p: f"{p[0]}@{p[1]}")
def test_map_inputs_show_every_catalog_source_whole_or_cut_between_words(pair: tuple[str, str]) -> None:
    args = _map_args(*pair)
    text = run(*args).output
    sources = {k: v["source"] for k, v in json.loads(run(*args, "--format", "json").output)["inputs"].items()}
    inputs = text.split("\ninputs:\n", 1)[1].splitlines()
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
