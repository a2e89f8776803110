"""Catalog text: the unit tests that need the render layer.

Split by layer from the tests of the same subject in tests/acceptance/test_render_catalog.py;
tests/acceptance/test_render_catalog.py says what they check.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import catalog
from kvplan.render.common import clip


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


def test_attention_kind_mqa() -> None:
    from attrs import evolve

    from kvplan.render.catalog_view import attention_kind

    m = catalog.get_model("llama-3-8b")
    assert attention_kind(evolve(m, n_kv=1)) == "MQA"
    assert attention_kind(evolve(m, n_kv=m.n_q)) == "MHA"
    assert attention_kind(m) == "GQA"
