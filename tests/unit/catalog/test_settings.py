"""The one settings table (kvplan.catalog.settings): its rows are whole, and the docs' key tables are its own."""

from __future__ import annotations

import re

import pytest

from kvplan.base.units import UNITS
from kvplan.catalog import settings
from kvplan.catalog.engines import ENGINES
from kvplan.catalog.settings import SETTINGS, Takes, Write
from tests.paths import ROOT


def _generated(page: str, name: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    m = re.search(rf"<!-- BEGIN settings\.{name}\(\) -->\n(.*?)<!-- END settings\.{name}\(\) -->", text, re.S)
    assert m is not None, f"docs/{page} has no generated {name} table"
    return m.group(1)


@pytest.mark.parametrize(("page", "name"), [("language.md", "language_table"), ("engines.md", "engines_table")])
def test_the_docs_tables_are_what_the_table_generates(page: str, name: str) -> None:
    fresh = getattr(settings, name)()
    assert _generated(page, name) == fresh, f"docs/{page} is stale: run python tools/settings_docs.py"


def test_the_language_table_has_one_line_per_row_naming_its_path() -> None:
    body = _generated("language.md", "language_table").splitlines()[2:]
    assert [line.split("|")[1].strip().strip("`") for line in body] == [s.path for s in SETTINGS]


def test_paths_are_unique_and_every_place_is_known() -> None:
    paths = [s.path for s in SETTINGS]
    assert len(paths) == len(set(paths))
    assert {s.section for s in SETTINGS} == {"deployment", *settings.SECTIONS, "model", "device"}


def test_every_quantity_has_a_dimension_a_known_unit_table_and_an_ordered_range_with_reasons() -> None:
    for s in SETTINGS:
        if s.takes is not Takes.QUANTITY:
            continue
        assert s.dim is not None, s.path
        table = s.unit_table() if s.units else UNITS[s.dim]
        assert table, s.path
        lo, hi = s.range.lo, s.range.hi
        assert lo is not None and hi is not None and lo.value < hi.value, s.path
        assert lo.why and hi.why, s.path
        # the price's default is the catalog's, a figure per device; `auto` and `the catalog's` are words for a
        # figure the planner or a catalog supplies (speculative.draft_tokens, speculative.acceptance)
        if s.default is not None and s.path != "price" and s.default.value not in ("auto", "the catalog's"):
            assert lo.value <= float(s.default.value) <= hi.value, s.path


def test_every_word_lists_its_choices_and_every_default_names_its_source() -> None:
    for s in SETTINGS:
        if s.takes is Takes.WORD and s.path != "engine":  # the engines' words are their catalog records'
            assert s.choices, s.path
        if s.default is not None:
            assert s.default.value and s.default.source, s.path
        if s.default is not None and s.takes is Takes.WORD and s.choices:
            assert s.default.value in s.choices, s.path


def test_every_carrier_names_a_flag_or_says_why_not_and_engines_are_catalog_ones() -> None:
    for s in SETTINGS:
        for engine, c in s.engines.items():
            assert engine in ENGINES, (s.path, engine)
            if c.write is Write.NONE:
                assert c.why and not c.flag, (s.path, engine)
            else:
                assert settings.engine_flag(s, engine), (s.path, engine)


def test_the_replicas_flag_is_the_engine_records_data_parallel_flag() -> None:
    # the planner serves a rate with replicas only where the engine record names this flag (docs/service.md)
    for engine, c in settings.pin("replicas").engines.items():
        assert (c.flag or None) == ENGINES[engine].data_parallel, engine


def test_keys_follow_the_table_and_a_replaced_table_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.keys("pin")[:2] == ("kv_dtype", "retention")
    extra = settings.Setting("pin.toy", Takes.SWITCH, "a toy switch")
    monkeypatch.setattr(settings, "SETTINGS", (*SETTINGS, extra))
    assert settings.keys("pin")[-1] == "toy"
    assert settings.pin("toy") is extra


def test_a_range_in_words_names_each_end_and_its_reason() -> None:
    assert settings.range_text(settings.pin("replicas")) == (
        "1 to 4,096 (at least one; kvplan's limit, docs/language.md)")
    assert settings.range_text(settings.pin("memory_fraction")) == (
        "above 0, at most 1 (a share of nothing is no setting; all of it)")
    assert settings.range_text(settings.row("model.params")).startswith("1 to 10^15 ")
