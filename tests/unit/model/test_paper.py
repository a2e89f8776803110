"""The paper's tables (kvplan.model.paper) against figures computed here from the paper's inputs.

Every expected number is worked from the raw inputs in this file — Llama-3-70B's 80 layers, 8 KV heads
of 128, P = 70e9, B200's 192 GB and 8 TB/s, H100's 3.35 TB/s, PCIe Gen5 x16 at 64 GB/s, NVLink at
900 GB/s — never by calling the model code that built the table.
"""

from __future__ import annotations

import pytest

from kvplan.base.evidence import Evidence, Value
from kvplan.model import paper
from kvplan.model.paper import Cell, Table

KAPPA_PER_WIDTH = 2 * 80 * 8 * 128  # bytes per token per byte of KV width: 2·L·n_kv·d_h
W = 70e9 * 2  # the paper's BF16 weights
BETA = 8.0e12  # B200, striped pages recover the full 8 TB/s
C_B200 = 192e9
C_HGX = 180e9
WIDTHS = {"bf16": 2.0, "int8": 1.0, "int4": 0.5, "int2": 0.25}


def _kv(tokens: float, width: float = 2.0) -> float:
    return tokens * KAPPA_PER_WIDTH * width


def _value(c: Cell) -> Value:
    assert isinstance(c, Value), c
    return c


def _fewest(nbytes: float, memory: float) -> int:
    n = 1
    while n * memory < nbytes:
        n += 1
    return n


def _one_class_per_cell(t: Table) -> None:
    for row in t.rows:
        assert len(row) == len(t.columns), (t.id, row)
        for c in row:
            assert isinstance(c, str) or c.evidence in (Evidence.DERIVED, Evidence.REPORTED, Evidence.ASSUMED)


# ------------------------------------------------------------------ Table 5: two blocks


def _t5() -> dict[tuple[str, str], tuple[Value, ...]]:
    t = paper.table5()
    _one_class_per_cell(t)
    out = {}
    for row in t.rows:
        assert isinstance(row[0], str) and isinstance(row[1], str)
        out[row[0], row[1]] = tuple(_value(c) for c in row[2:])
    return out


def test_table5_has_the_128k_and_512k_blocks_per_kv_width() -> None:
    rows = _t5()
    assert list(rows) == [(ctx, d) for ctx in ("128k", "512k") for d in ("bf16", "int8", "int4", "int2")]


@pytest.mark.parametrize("ctx,tokens", [("128k", 128_000), ("512k", 512_000)])
@pytest.mark.parametrize("dtype", list(WIDTHS))
def test_table5_cells_match_the_paper_arithmetic(ctx: str, tokens: int, dtype: str) -> None:
    kv, total, t_step, speedup, devices = _t5()[ctx, dtype]
    k = _kv(tokens, WIDTHS[dtype])
    assert kv.value == pytest.approx(k) and kv.unit == "B"
    assert total.value == pytest.approx(W + k) and total.unit == "B"
    assert t_step.value == pytest.approx((W + k) / BETA) and t_step.unit == "s"
    assert speedup.value == pytest.approx((W + _kv(tokens)) / (W + k)) and speedup.unit == "x"
    assert devices.value == _fewest(W + k, C_B200)
    assert "192 GB" in devices.source  # names the memory figure it divides by
    assert all(v.evidence is Evidence.DERIVED for v in (kv, total, t_step, speedup, devices))


def test_table5_worked_figures() -> None:
    rows = _t5()
    # 128k bf16: 140 + 41.94 GB over 8 TB/s = 22.74 ms; 2-bit at 128k buys the paper's 1.25x
    assert round(rows["128k", "bf16"][2].value * 1e3, 2) == 22.74
    assert round(rows["128k", "int2"][3].value, 2) == 1.25
    # SPEC: one B200 holds every 128k row; at 512k bf16 (307.8 GB) and int8 (223.9 GB) need two
    assert [rows["128k", d][4].value for d in WIDTHS] == [1, 1, 1, 1]
    assert [rows["512k", d][4].value for d in WIDTHS] == [2, 2, 1, 1]


def test_table5_block_properties() -> None:
    rows = _t5()
    for d in WIDTHS:
        assert rows["512k", d][2].value > rows["128k", d][2].value  # more context, longer step
        assert rows["512k", d][3].value >= rows["128k", d][3].value  # and compression buys more
        for ctx in ("128k", "512k"):
            total, n = rows[ctx, d][1].value, int(rows[ctx, d][4].value)
            assert n >= 1 and n * C_B200 >= total and (n - 1) * C_B200 < total  # the fewest that hold it
    for ctx in ("128k", "512k"):
        assert rows[ctx, "bf16"][3].value == 1.0
        gains = [rows[ctx, d][3].value for d in WIDTHS]
        assert gains == sorted(gains)  # narrower KV, never slower


def test_table5_notes_name_the_memory_figure_and_the_hgx_rows() -> None:
    t = paper.table5()
    notes = " ".join(t.notes)
    assert "192 GB" in notes and "memory reserve" in notes
    tighter = [f"{ctx} {d}" for ctx, tokens in (("128k", 128_000), ("512k", 512_000)) for d, w in WIDTHS.items()
               if _fewest(W + _kv(tokens, w), C_HGX) > _fewest(W + _kv(tokens, w), C_B200)]
    assert tighter == ["128k bf16", "512k int4"]  # 181.9 GB each: over 180 GB, under 192 GB
    assert "180 GB" in notes and ", ".join(tighter) in notes


# ------------------------------------------------------------------ Table 7: W3 beside the unshared total


def test_table7_prefix_row_shows_w3_stored_beside_unshared() -> None:
    t = paper.table7()
    _one_class_per_cell(t)
    col = {name: i for i, name in enumerate(t.columns)}
    prefix = next(r for r in t.rows if r[0] == "prefix caching")
    stored, unshared = _value(prefix[col["footprint"]]), _value(prefix[col["without the domain"]])
    assert stored.value == pytest.approx(_kv(96_000 + 8 * (128_000 - 96_000)))  # 352k tokens: 115.3 GB
    assert unshared.value == pytest.approx(_kv(8 * 128_000))  # 1,024k tokens: 335.5 GB
    assert unshared.value / stored.value == pytest.approx(8 * 128_000 / (96_000 + 8 * 32_000))  # σ = 2.91


def test_table7_every_domain_shrinks_its_footprint() -> None:
    t = paper.table7()
    col = {name: i for i, name in enumerate(t.columns)}
    for r in t.rows:
        with_it, without = _value(r[col["footprint"]]), _value(r[col["without the domain"]])
        assert 0 < with_it.value <= without.value, r[0]
    by = {r[0]: r for r in t.rows}
    assert _value(by["quantization"][col["without the domain"]]).value == pytest.approx(_kv(128_000))
    assert _value(by["paging"][col["without the domain"]]).value == pytest.approx(_kv(131_072))


# ------------------------------------------------------------------ §4.6: the combination point


def test_combination_point() -> None:
    t = paper.combination()
    _one_class_per_cell(t)
    cells = {str(r[0]): _value(r[1]) for r in t.rows}
    assert cells["combined byte factor"].value == 16.0
    w2_kv = 32 * _kv(128_000)  # 1.342 TB
    s16 = (W + w2_kv) / (W + w2_kv / 16)
    assert cells["decode-traffic speedup at W2 (b = 32, 128k)"].value == pytest.approx(s16)
    assert round(s16, 2) == 6.62
    sigma = 8 * 128_000 / (96_000 + 8 * 32_000)
    assert cells["capacity factor with W3's σ"].value == pytest.approx(8 * 2 * sigma)  # 46.5x
    # the speedup stays under the byte factor (weights are still read) and above 2-bit alone at W2
    assert (W + w2_kv) / (W + w2_kv / 8) < s16 < 16
    assert all(v.evidence is Evidence.DERIVED for v in cells.values())


# ------------------------------------------------------------------ §2.5/§4.5: the ratios


def test_link_ratios_and_w4_range() -> None:
    t = paper.link_ratios()
    _one_class_per_cell(t)
    rows = {str(r[0]): tuple(_value(c) for c in r[1:]) for r in t.rows}
    hbm_pcie = rows["H100 HBM / PCIe Gen5 x16"]
    assert hbm_pcie[0].evidence is Evidence.REPORTED and hbm_pcie[1].evidence is Evidence.ASSUMED
    assert hbm_pcie[2].value == pytest.approx(3.35e12 / 64e9)  # 52.3x: "PCIe is ~50x below HBM"
    assert rows["H100 HBM / NVLink"][2].value == pytest.approx(3.35e12 / 900e9)  # 3.72x
    assert f"HBM is {3.35e12 / 450e9:.3g}x faster" in " ".join(t.notes)  # NVLink 4 per direction: 7.44x
    prefill = (2 * 70e9 * 128_000 + 2 * 80 * 64 * 128 * 128_000 ** 2) / (0.7 * 2250e12)  # 25.01 s
    lowest = rows["W4 recompute / fetch, lowest: PCIe Gen5 x16"]
    highest = rows["W4 recompute / fetch, highest: NVLink + 4× codec"]
    assert lowest[0].value == pytest.approx(prefill) and highest[0].value == pytest.approx(prefill)
    assert lowest[2].value == pytest.approx(prefill / (_kv(128_000) / 64e9))  # 38.2x
    assert highest[2].value == pytest.approx(prefill / (_kv(128_000) / (900e9 * 4)))  # 2147x
    # the range spans every path of Table W4
    w4 = [_value(r[3]).value for r in paper.w4_economics().rows[1:]]
    assert lowest[2].value == pytest.approx(min(w4)) and highest[2].value == pytest.approx(max(w4))


def test_all_tables_carry_the_new_parts_and_the_paper_inputs() -> None:
    ids = [t.id for t in paper.all_tables()]
    assert {"5", "7", "§4.6", "W4", "§2.5"} <= set(ids) and len(ids) == len(set(ids))
    inputs = dict(paper.paper_inputs())
    assert inputs["h100_bandwidth"].value == 3.35e12 and inputs["combined_retention"].value == 0.5
    assert inputs["b200_memory"].value == C_B200 and inputs["b200_bandwidth"].value == BETA
