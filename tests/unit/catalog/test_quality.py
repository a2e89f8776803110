"""The reported-quality catalog against its reference table, for_choice, and the budget table.

The reference is a copy of shared/reference/quality.md kept in tests/data/reference/,
parsed here independently of the catalog: each entry must match its row cell by cell.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from importlib import resources
from types import ModuleType
from typing import Any, Optional

import attrs
import pytest

from kvplan.base.errors import CatalogError, KvplanError
from kvplan.base.evidence import Evidence
from kvplan.catalog import DTYPES, quality
from tests.paths import DATA, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REFERENCE = DATA / "reference" / "quality.md"
ENTRIES = quality.load()
BY_ID = {r.id: r for r in ENTRIES}


# ------------------------------------------------ the reference, parsed on its own

@attrs.frozen
class Row:
    raw: str                       # the line as written, bold included
    cells: tuple[str, ...]         # method, setting, model, benchmark, result, baseline, where read
    resolved: tuple[str, ...]      # the same with "same …" cells replaced by the cell above


def _plain(text: str) -> str:
    return text.replace("**", "").strip()


def _is_same(cell: str) -> bool:
    return cell.startswith("same")


def reference() -> tuple[list[Row], list[str]]:
    """The table rows (all three tables) and the items of the Gaps list."""
    rows: list[Row] = []
    bullets: list[str] = []
    in_gaps = False
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            in_gaps = line.startswith("## Gaps")
            rows_above: Optional[Row] = None
        if in_gaps and line.startswith("- "):
            bullets.append(_plain(line[2:]))
        if not line.startswith("| ") or line.startswith("| Method") or set(line) <= set("|-"):
            continue
        cells = tuple(_plain(c) for c in line.strip().strip("|").split("|"))
        assert len(cells) == 7, line
        resolved = tuple(
            rows_above.resolved[i] if rows_above is not None and i and _is_same(c) else c
            for i, c in enumerate(cells))
        rows_above = Row(line, cells, resolved)
        rows.append(rows_above)
    return rows, bullets


ROWS, BULLETS = reference()
RESULT, SETTING, MODEL, BENCHMARK, WHERE = 4, 1, 2, 3, 6


def row_of(r: quality.QualityResult) -> Optional[Row]:
    matches = [row for row in ROWS if row.cells[RESULT] == r.result]
    assert len(matches) <= 1, r.id
    return matches[0] if matches else None


def test_reference_copy_parses() -> None:
    # 16 quantization + 5 eviction + 1 transfer rows; 5 gap items
    assert (len(ROWS), len(BULLETS)) == (22, 5)


# ------------------------------------------------------------------ loading

def test_every_entry_loads_once_with_a_kebab_case_id() -> None:
    with resources.files("kvplan.catalog").joinpath("quality.toml").open("rb") as fh:
        raw: dict[str, Any] = tomllib.load(fh)
    assert [r.id for r in ENTRIES] == list(raw)
    for rid in raw:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rid), rid
    assert quality.load() is ENTRIES  # cached


@pytest.mark.parametrize("r", ENTRIES, ids=lambda r: r.id)
def test_entry_is_a_row_or_a_gap_item_cell_by_cell(r: quality.QualityResult) -> None:
    row = row_of(r)
    if row is None:
        assert r.gap and r.result in BULLETS, f"{r.id}: result is neither a table row nor a Gaps item"
        return
    cells = row.resolved
    assert r.method == cells[0].split(" (")[0] or r.method == cells[0]
    if r.arxiv:
        assert f"({r.arxiv})" in row.cells[0] or any(
            f"({r.arxiv})" in other.cells[0] for other in ROWS if other.cells[0].startswith(r.method.split()[0]))
    assert (r.setting, r.model, r.benchmark) == (cells[SETTING], cells[MODEL], cells[BENCHMARK])
    baseline = cells[5]
    if baseline == "FP16 row above":  # points at the FP16 baseline of the QServe rows
        baseline = next(x.cells[5] for x in ROWS if x.cells[5].startswith("FP16: "))
    assert r.baseline == baseline
    assert cells[WHERE].startswith(r.where_read.split(" (")[0]), r.id


@pytest.mark.parametrize("r", [r for r in ENTRIES if r.value is not None], ids=lambda r: r.id)
def test_value_is_written_in_its_row(r: quality.QualityResult) -> None:
    row = row_of(r)
    assert row is not None
    assert re.search(rf"(?<![\d.]){re.escape(r.value_text)}(?!\d)", row.raw), r.id
    assert r.value == float(r.value_text)
    if r.variant:  # "KIVI-2 38.30": the variant names the number that follows it
        assert f"{r.variant} {r.value_text}" in r.result


def test_every_row_and_gap_item_has_an_entry() -> None:
    results = {r.result for r in ENTRIES}
    for row in ROWS:
        assert row.cells[RESULT] in results, row.raw
    notes = {r.note.removeprefix("Gaps list: ") for r in ENTRIES if r.note.startswith("Gaps list: ")}
    for item in BULLETS:
        assert item in results or item in notes, item


@pytest.mark.parametrize("r", [r for r in ENTRIES if r.note], ids=lambda r: r.id)
def test_notes_come_from_the_reference_or_point_at_an_entry(r: quality.QualityResult) -> None:
    row = row_of(r)
    from_cell = row is not None and _plain(r.note) in row.cells[WHERE]
    from_gaps = r.note.startswith("Gaps list: ") and r.note.removeprefix("Gaps list: ") in BULLETS
    pointer = any(other in r.note for other in BY_ID if other != r.id)
    assert from_cell or from_gaps or pointer, r.id


@pytest.mark.parametrize("r", ENTRIES, ids=lambda r: r.id)
def test_unverified_and_gap_marks_follow_the_reference(r: quality.QualityResult) -> None:
    row = row_of(r)
    raw = row.raw if row is not None else ""
    assert r.verified == ("UNVERIFIED" not in raw and "**U**" not in raw)
    is_gap = row is None or r.result.startswith(("Gap.", "No number published"))
    assert r.gap == is_gap
    if r.gap:
        assert r.value is None and r.value_obj() is None


def test_gaps_and_unverified_entries_exist() -> None:
    assert {r.id for r in ENTRIES if not r.verified} == {
        "atom-w4a4-accuracy-secondary", "quest-topk-pages", "cachegen-kv-streaming"}
    # the reference's two "Gap"/"No number published" rows and the three Gaps items no row covers
    assert {r.id for r in ENTRIES if r.gap} == {
        "kvquant-per-bit-gap", "vllm-fp8-kv-accuracy-gap",
        "qserve-kv4-ablation-gap", "atom-own-tables-gap", "eviction-benchmarks-gap"}
    assert all(r.id.endswith("-gap") == r.gap for r in ENTRIES)


@pytest.mark.parametrize("r", ENTRIES, ids=lambda r: r.id)
def test_dtype_bits_and_retention_agree_with_the_text(r: quality.QualityResult) -> None:
    if r.kv_dtype is not None:
        assert r.bits == DTYPES[r.kv_dtype].bits
        text = f"{r.variant} {r.setting} {r.result}"
        assert (f"{r.bits}-bit" in text or f"KV{r.bits}" in text or f"-{r.bits}" in text
                or r.kv_dtype.upper() in text), r.id
    if r.retention is not None:
        assert f"{r.retention * 100:g}%" in r.setting


def test_kvquant_3bit_is_not_an_int2_result() -> None:
    r = BY_ID["kvquant-3bit-perplexity"]
    assert (r.kv_dtype, r.bits, r.value) == (None, 3, None)  # "< 0.1" is a bound, kept as text


# ------------------------------------------------------------ value objects

@pytest.mark.parametrize("r", ENTRIES, ids=lambda r: r.id)
def test_value_obj_is_reported_and_cites_its_source(r: quality.QualityResult) -> None:
    v = r.value_obj()
    if r.value is None:
        assert v is None
        return
    assert v is not None
    assert (v.value, v.unit, v.evidence) == (r.value, r.unit, Evidence.REPORTED)
    for part in (r.method, r.arxiv, r.model, r.benchmark, r.where_read, r.variant):
        assert part in v.source
    assert v.to_json()["evidence"] == "reported"


# ---------------------------------------------------------------- for_choice

def ids(rs: tuple[quality.QualityResult, ...]) -> list[str]:
    return [r.id for r in rs]


def test_for_choice_int2_returns_kivi_2_and_only_int2() -> None:
    got = quality.for_choice("quantization", "int2")
    assert {"kivi-2-longbench-mistral", "kivi-2-longbench-longchat", "kivi-2-abstract"} <= set(ids(got))
    assert all(r.kv_dtype == "int2" for r in got)
    assert "kvquant-3bit-perplexity" not in ids(got)


def test_for_choice_fp8_has_no_int2_entry() -> None:
    got = quality.for_choice("quantization", "fp8")
    assert got and all(r.kv_dtype == "fp8" for r in got)
    assert not set(ids(got)) & set(ids(quality.for_choice("quantization", "int2")))
    assert ids(quality.for_choice("quantization", "fp8_e4m3")) == ids(got)  # aliases resolve


def test_for_choice_int4_has_kivi_4_and_qserve() -> None:
    got = set(ids(quality.for_choice("quantization", "int4")))
    assert {"kivi-4-longbench-mistral", "kivi-4-longbench-longchat", "qserve-w4a8kv4-wikitext2"} <= got


def test_for_choice_lossless_dtype_and_full_retention_have_no_evidence() -> None:
    assert quality.for_choice("quantization", "bf16") == ()
    assert quality.for_choice("eviction", retention=1.0) == ()


def test_for_choice_eviction_returns_every_eviction_entry_below_full_retention() -> None:
    every = {r.id for r in ENTRIES if r.domain == "eviction"}
    assert set(ids(quality.for_choice("eviction", retention=0.5))) == every
    assert set(ids(quality.for_choice("eviction"))) == every
    assert "h2o-20pct-throughput-opt" in every


@pytest.mark.parametrize("domain, dt", [("quantization", None), ("quantization", "int4"),
                                        ("quantization", "fp8"), ("eviction", None), ("tiering", None)])
def test_for_choice_orders_verified_numbers_first_then_unverified_then_gaps(domain: str, dt: Optional[str]) -> None:
    got = quality.for_choice(domain, dt)
    tiers = [2 if r.gap else 1 if not r.verified else 0 for r in got]
    assert tiers == sorted(tiers)
    for a, b in zip(got, got[1:]):
        if (a.gap, a.verified) == (b.gap, b.verified):
            assert a.id < b.id


def test_for_choice_rejects_unknown_domain_and_dtype() -> None:
    with pytest.raises(ValueError):
        quality.for_choice("paging")
    with pytest.raises(CatalogError):
        quality.for_choice("quantization", "int3")


# ---------------------------------------------------------- the budget table

LOSSY_ORDER = ["lossless", "near-lossless", "moderate", "aggressive"]


def test_budget_names_are_the_language_s() -> None:
    assert list(quality.BUDGETS) == LOSSY_ORDER


def test_lossless_admits_only_16_bit_kv_and_no_eviction() -> None:
    a = quality.admissible("lossless", False)
    assert a.kv_dtypes and all(DTYPES[d].bits == 16 and not DTYPES[d].lossy for d in a.kv_dtypes)
    assert not a.eviction and a.min_retention == 1.0


def test_eviction_allowed_under_lossless_admits_nothing_lossy() -> None:
    a = quality.admissible("lossless", True)
    assert a == quality.admissible("lossless", False)
    assert not any(DTYPES[d].lossy for d in a.kv_dtypes) and not a.eviction


def test_near_lossless_admits_8_and_4_bit_but_not_2_bit() -> None:
    a = quality.admissible("near-lossless", False)
    assert {"fp8", "int8", "int4", "fp4"} <= set(a.kv_dtypes)
    assert "int2" not in a.kv_dtypes and not a.eviction


def test_moderate_adds_int2_and_aggressive_adds_eviction() -> None:
    moderate, aggressive = quality.admissible("moderate"), quality.admissible("aggressive")
    assert "int2" in moderate.kv_dtypes and not moderate.eviction
    assert aggressive.eviction and aggressive.min_retention == quality.MIN_RETENTION == 0.5
    assert set(aggressive.kv_dtypes) == set(moderate.kv_dtypes)


@pytest.mark.parametrize("budget", LOSSY_ORDER[1:3])
def test_eviction_allowed_admits_eviction_under_lossy_budgets(budget: str) -> None:
    a = quality.admissible(budget, True)
    assert a.eviction and a.min_retention == 0.5
    assert a.kv_dtypes == quality.admissible(budget, False).kv_dtypes


def test_budgets_only_ever_add() -> None:
    for lo, hi in zip(LOSSY_ORDER, LOSSY_ORDER[1:]):
        a, b = quality.BUDGETS[lo], quality.BUDGETS[hi]
        assert set(a.kv_dtypes) < set(b.kv_dtypes) or (set(a.kv_dtypes) == set(b.kv_dtypes) and b.eviction
                                                       and not a.eviction)
        assert all(d in DTYPES for d in b.kv_dtypes)


def test_unknown_budget_is_a_user_error() -> None:
    with pytest.raises(KvplanError, match="near-lossless"):
        quality.admissible("nearly-lossless")


# ------------------------------------------------------------ lossiness rank

def test_lossiness_rank_is_zero_for_16_bit_and_falls_with_bits() -> None:
    assert quality.lossiness_rank("bf16") == quality.lossiness_rank("fp16") == 0
    for a in DTYPES.values():
        for b in DTYPES.values():
            if a.bits > b.bits and b.bits < 16:
                assert quality.lossiness_rank(a.id) < quality.lossiness_rank(b.id), (a.id, b.id)
            if a.bits == b.bits:
                assert quality.lossiness_rank(a.id) == quality.lossiness_rank(b.id)


@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_eviction_adds_one_rank(dt: str) -> None:
    assert quality.lossiness_rank(dt, 0.5) == quality.lossiness_rank(dt, 1.0) + 1


def test_lossiness_rank_agrees_with_the_budgets() -> None:
    # every dtype a budget adds is lossier than every dtype the budget before it admits
    for lo, hi in zip(LOSSY_ORDER, LOSSY_ORDER[1:3]):
        added = set(quality.BUDGETS[hi].kv_dtypes) - set(quality.BUDGETS[lo].kv_dtypes)
        worst_before = max(quality.lossiness_rank(d) for d in quality.BUDGETS[lo].kv_dtypes)
        assert all(quality.lossiness_rank(d) > worst_before for d in added)


@pytest.mark.parametrize("r", [0.0, -0.1, 1.5])
def test_lossiness_rank_rejects_retention_out_of_range(r: float) -> None:
    with pytest.raises(ValueError):
        quality.lossiness_rank("fp8", r)


# ------------------------------------------------------------ broken entries

GOOD: dict[str, Any] = dict(method="M", domain="quantization", setting="s", model="m", benchmark="b",
                            result="r", baseline="x", where_read="w", verified=True, gap=False)


@pytest.mark.parametrize("change", [
    {"gap": True, "value": "1.0", "unit": "score"},   # a gap with a number
    {"value": "1.0"},                                  # a value without its unit
    {"kv_dtype": "int3"},                              # not a kvplan dtype
    {"kv_dtype": "int4", "bits": 2},                   # bits disagree with the dtype
    {"retention": 0.5},                                # retention outside eviction
    {"domain": "eviction", "retention": 1.5},          # retention out of range
    {"domain": "paging"},                              # not a lossy domain
    {"colour": "red"},                                 # unknown key
])
def test_broken_entries_are_catalog_errors(change: dict[str, Any]) -> None:
    with pytest.raises(CatalogError, match=r"quality\.toml \[bad\]"):
        quality._result("bad", {**GOOD, **change})


def test_missing_key_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="missing keys"):
        quality._result("bad", {k: v for k, v in GOOD.items() if k != "result"})


# ------------------------------------------------------------------ the doc

def _doc_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quality_doc", ROOT / "tools" / "quality_doc.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_doc_is_generated_from_the_catalog_and_lists_every_entry() -> None:
    doc = (ROOT / "docs" / "quality-evidence.md").read_text(encoding="utf-8")
    assert doc == _doc_tool().render(), "run python tools/quality_doc.py"
    for r in ENTRIES:
        assert f"#### `{r.id}`" in doc
    for budget, a in quality.BUDGETS.items():
        assert f"| `{budget}` | {', '.join(a.kv_dtypes)} |" in doc
