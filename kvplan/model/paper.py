"""The paper's standard workloads W1–W4 (SPEC §9) and the derived parts of its tables.

The tables use the paper's inputs, not the catalog's more exact ones:
Llama-3-70B as P = 70e9 (140 GB of BF16 weights), B200 at 192 GB, 8.0 TB/s,
2,250 TFLOP/s dense BF16, NV-HBI 10 TB/s, the prefill efficiency η = 0.7 of
SPEC §7, PCIe Gen5 x16 at 64 GB/s per direction and NVLink at 900 GB/s as the
paper states it (900 GB/s is NVLink 4's bidirectional total; the link catalog
carries 450 GB/s per direction, and `kvplan map` uses the catalog).

The paper's table texts are not shipped with kvplan; the layout of each table
here is reconstructed from SPEC.md's description of what it holds, and every
cell is one evidence class. Beside the numbered tables: Table 5 in its two
blocks (128k and 512k), the §4.6 combination point (2-bit with r = 0.5) and
the §2.5/§4.5 ratios (the links against H100's HBM, the range of W4's fetch
advantage over recompute).
"""

from __future__ import annotations

import math
from typing import Union

import numpy as np

from kvplan import catalog
from kvplan.base.evidence import Value, assumed, derived, reported
from kvplan.base.records import record
from kvplan.catalog import Device
from kvplan.model import roofline as rf
from kvplan.model.footprint import KvFactors, fragmentation, kappa, kv_bytes_per_seq, sharing_factor
from kvplan.model.regime import paper_model
from kvplan.model.tiering import DEFAULT_PREFILL_EFFICIENCY, fetch_time, prefill_time

Cell = Union[Value, str]

CONTEXT = 128_000
PCIE5_PAPER = 64e9
NVLINK_PAPER = 900e9
CODEC_RATIO = 4.0
COMBINATION_RETENTION = 0.5


@record
class Workload:
    id: str
    title: str
    batch: int
    context: int
    prefix: int = 0
    fanout: int = 1
    reuse: bool = False


WORKLOADS = (
    Workload("W1", "batch 1 (the weight-bound side)", 1, CONTEXT),
    Workload("W2", "batch 32 (the KV-bound side)", 32, CONTEXT),
    Workload("W3", "8 requests sharing a 96k-token prefix", 8, CONTEXT, prefix=96_000, fanout=8),
    Workload("W4", "one 128k context reused across sessions", 1, CONTEXT, reuse=True),
)


@record
class Table:
    id: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    notes: tuple[str, ...] = ()


def paper_device(did: str) -> Device:
    """Tab. 3 values; B200 is the catalog's paper entry, H100 and MI300X match SPEC §2."""
    return catalog.get_device(did)


def paper_inputs() -> list[tuple[str, Value]]:
    b200 = paper_device("b200")
    return [
        ("llama_3_70b_params", assumed(70e9, "1", "paper input: P = 70e9")),
        ("weights_bytes", derived(140e9, "B", "P·w_p at BF16")),
        ("b200_memory", reported(b200.memory, "B", "paper Tab. 3")),
        ("b200_bandwidth", reported(b200.bandwidth, "B/s", "paper Tab. 3")),
        ("b200_compute", reported(b200.compute, "FLOP/s",
                                  "ml-engineering accelerator tables (docs/catalog.md): 2,250 TFLOP/s dense BF16")),
        ("b200_fabric", reported(b200.fabric or 0.0, "B/s", "NV-HBI, paper Tab. 3")),
        ("h100_bandwidth", reported(paper_device("h100-sxm").bandwidth, "B/s", "paper Tab. 3")),
        ("prefill_efficiency", assumed(DEFAULT_PREFILL_EFFICIENCY, "1", "docs/model.md §9 default η")),
        ("pcie5_bandwidth", assumed(PCIE5_PAPER, "B/s", "paper §2.5: PCIe Gen5 x16 ~64 GB/s")),
        ("nvlink_bandwidth", assumed(NVLINK_PAPER, "B/s", "paper §2.5: NVLink ~900 GB/s (bidirectional total)")),
        ("combined_retention", assumed(COMBINATION_RETENTION, "1", "paper §4.6: retention r = 0.5")),
        ("codec_ratio", reported(CODEC_RATIO, "x", "W4: 4× transport codec (CacheGen reports 3.5–4.3×, 2310.07240)")),
    ]


def _f(x: object) -> float:
    return float(np.asarray(x))


def table1() -> Table:
    """KV bytes per token and per 128k sequence, BF16, for catalog models."""
    ids = ["llama-3-8b", "llama-3-70b", "llama-3.1-405b", "llama-2-13b", "mistral-7b", "mixtral-8x7b",
           "qwen2.5-7b", "deepseek-v2", "deepseek-v3", "gemma-2-9b", "gpt-oss-120b"]
    rows = []
    for mid in ids:
        m = catalog.get_model(mid)
        rows.append((m.id, m.kv_kind.upper() if m.kv_kind == "mla" else ("MHA" if m.n_kv == m.n_q else "GQA"),
                     derived(kappa(m, 2.0), "B", "κ (docs/model.md §2), all layers"),
                     derived(_f(kv_bytes_per_seq(m, CONTEXT, 2.0)), "B", "B_kv(128k), windows applied")))
    return Table("1", "KV cache per token and per 128k-token sequence (BF16)",
                 ("model", "attention", "bytes/token", "bytes/128k sequence"), tuple(rows))


def table3() -> Table:
    """Device reference values with derived ridge, per-partition bandwidth and β_eff."""
    rows = []
    for did in ("h100-sxm", "b200", "mi300x"):
        d = paper_device(did)
        striped, upper = rf.beta_eff(d, "striped")
        rows.append((d.id, reported(d.memory, "B", d.source), reported(d.bandwidth, "B/s", d.source),
                     reported(d.compute, "FLOP/s", d.source), derived(d.ridge, "FLOP/B", "π/β"),
                     str(d.partitions), derived(d.partition_bandwidth, "B/s", "β/n_part"),
                     derived(_f(striped), "B/s",
                             "striped β_eff" + (", upper bound (fabric unpublished)" if upper else ""))))
    return Table("3", "Devices: capacity, bandwidth, compute, ridge and placement bandwidth",
                 ("device", "C", "β", "π (BF16 dense)", "ridge", "partitions", "β/n_part", "β_eff striped"),
                 tuple(rows), ("MI300X striped bandwidth is an upper bound: its fabric bandwidth is unpublished",))


def _cfg(w_kv: float = 2.0, factors: KvFactors = KvFactors(), placement: str = "striped") -> rf.Config:
    return rf.Config(paper_model(), paper_device("b200"), w_kv=w_kv, factors=factors, placement=placement)


def table4() -> Table:
    """Crossovers s*(b) and s_cap(b) for Llama-3-70B on one B200, by KV width."""
    rows = []
    for b in (1, 8, 32, 64):
        for name in ("bf16", "fp8", "int4", "int2"):
            c = _cfg(catalog.DTYPES[name].width)
            rows.append((str(b), name, derived(_f(rf.s_star(c, b)), "tokens", "s*(b) = P·w_p/(b·κ)"),
                         derived(_f(rf.s_cap(c, b)), "tokens", "s_cap(b) = (C − P·w_p)/(b·κ)"),
                         str(rf.regime(CONTEXT, rf.s_star(c, b), rf.s_cap(c, b)))))
    return Table("4", "Crossovers for Llama-3-70B on one B200 (regime at 128k)",
                 ("batch", "KV dtype", "s*", "s_cap", "regime at 128k"), tuple(rows))


TABLE5_CONTEXTS = (128_000, 512_000)
TABLE5_DTYPES = ("bf16", "int8", "int4", "int2")


def devices_to_hold(nbytes: float, memory: float) -> int:
    """The fewest devices of `memory` bytes whose whole capacity holds `nbytes` (at least 1)."""
    return max(1, math.ceil(nbytes / memory))


def table5() -> Table:
    """The worked bounds: Llama-3-70B on one B200 at batch 1, striped, at 128k and at 512k, per KV width."""
    m = paper_model()
    d = paper_device("b200")
    w = 140e9
    beta = _f(rf.beta_eff(d, "striped")[0])
    rows: list[tuple[Cell, ...]] = []
    hgx = paper_device("b200-hgx")
    tighter: list[str] = []  # the rows NVIDIA's smaller HGX memory figure would need one more device for
    for s in TABLE5_CONTEXTS:
        k16 = _f(kv_bytes_per_seq(m, s, 2.0))
        for name in TABLE5_DTYPES:
            k = _f(kv_bytes_per_seq(m, s, catalog.DTYPES[name].width))
            n = devices_to_hold(w + k, d.memory)
            if devices_to_hold(w + k, hgx.memory) > n:
                tighter.append(f"{s // 1000}k {name}")
            rows.append((f"{s // 1000}k", name, derived(k, "B", "B_kv(s) = κ·s at the KV width"),
                         derived(w + k, "B", "W + K, W = P·w_p = 140 GB"),
                         derived((w + k) / beta, "s",
                                 f"T_step = (W + K)/β, β = {beta / 1e12:g} TB/s (striped β_eff of one B200)"),
                         derived((w + k16) / (w + k), "x", "S = (W + K_bf16)/(W + K), same context"),
                         derived(n, "1", f"⌈(W + K)/C⌉, C = {d.memory / 1e9:g} GB per B200 (paper Tab. 3, "
                                         "whole capacity, no memory reserve)")))
    notes = [f"B200s: the fewest devices of {d.memory / 1e9:g} GB (the paper's Tab. 3 figure, the whole capacity "
             "without the planner's memory reserve, docs/model.md §10) that hold W + K; 1 = one B200 holds it",
             "T_step is the step's bytes over one B200's bandwidth, as the paper prints it; a row that needs N "
             "devices, sharded with no byte replicated, reads 1/N of them on each, and the speedup, a ratio of "
             "bytes, is unchanged (docs/model.md §6)"]
    if tighter:
        notes.append(f"at NVIDIA's HGX figure of {hgx.memory / 1e9:g} GB per GPU (device b200-hgx) these rows "
                     f"need one device more: {', '.join(tighter)}")
    return Table("5", "Worked bounds: Llama-3-70B on B200 at batch 1, striped pages, 128k and 512k",
                 ("context", "KV dtype", "KV bytes", "weights + KV", "T_step at β", "speedup vs bf16",
                  "B200s to hold it"), tuple(rows), tuple(notes))


def _speedups(c: float, affects_traffic: bool = True) -> list[Cell]:
    m = paper_model()
    cells: list[Cell] = []
    for wl in WORKLOADS[:3]:
        k = wl.batch * _f(kv_bytes_per_seq(m, wl.context, 2.0))
        if wl.fanout > 1:  # W3's baseline already shares nothing: its KV is n full sequences
            k = wl.fanout * _f(kv_bytes_per_seq(m, wl.context, 2.0))
        cells.append(derived(_f(rf.speedup(140e9, k, c if affects_traffic else 1.0)), "x", f"S(c) at {wl.id}"))
    return cells


def table7() -> Table:
    """One representative per mitigation domain on W1–W3, with reported quality beside it."""
    m = paper_model()
    seq = _f(kv_bytes_per_seq(m, CONTEXT, 2.0))
    w3 = WORKLOADS[2]
    sigma = _f(sharing_factor(w3.fanout, w3.context, w3.prefix))
    stored = _f(kv_bytes_per_seq(m, w3.prefix + w3.fanout * (w3.context - w3.prefix), 2.0))  # prefix once
    contiguous = _f(fragmentation(CONTEXT, None)) + (131_072 / CONTEXT - 1.0)
    paged = _f(fragmentation(CONTEXT, 16))
    page_factor = (1 + contiguous) / (1 + paged)
    rows: list[tuple[Cell, ...]] = [
        ("quantization", "KIVI-2 (2402.02750)", derived(8.0, "x", "16 bit / 2 bit"),
         derived(seq / 8, "B", "B_kv(128k)/8"), derived(seq, "B", "B_kv(128k) at BF16"), *_speedups(8.0),
         reported(42.43, "1", "KIVI-2 LongBench avg on Mistral-7B-Instruct-v0.2 vs 43.54 full "
                              "(jy-yuan/KIVI docs/long_bench.md)")),
        ("eviction", "H2O, 20% heavy hitters (2306.14048)", derived(5.0, "x", "1/r, r = 0.2"),
         derived(seq * 0.2, "B", "B_kv(128k)·r"), derived(seq, "B", "B_kv(128k), nothing evicted"),
         *_speedups(5.0),
         "gap: per-task quality numbers not retrieved (docs/quality-evidence.md)"),
        ("paging", "PagedAttention, 16-token blocks", derived(page_factor, "x",
         "contiguous reservation of 131,072 tokens vs 16-token blocks at 128k"),
         derived(seq * (1 + paged), "B", "B_kv(128k)·(1+φ), 16-token blocks"),
         derived(seq * (1 + contiguous), "B", "B_kv(128k)·(1+φ), contiguous reservation of 131,072 tokens"),
         *_speedups(1.0, affects_traffic=False), "lossless"),
        ("prefix caching", "shared 96k prefix, 8 requests (W3)", derived(sigma, "x", "σ = n·s/(p + n(s−p))"),
         derived(stored, "B", "W3 total stored across its 8 requests: (p + n·(s − p))·κ"),
         derived(w3.fanout * seq, "B", "W3 total without sharing: n·s·κ"),
         "n/a (no shared prefix)", "n/a (no shared prefix)",
         derived(_f(rf.speedup(140e9, w3.fanout * seq, sigma)), "x",
                 "S(σ) at W3, shared prefix read once per step (cascade kernel assumed)"), "lossless"),
        ("tiering", "host DRAM over PCIe Gen5 + 4× codec (CacheGen)", "n/a (bytes move between tiers)",
         derived(seq / CODEC_RATIO, "B", "B_kv(128k)/codec on the link"),
         derived(seq, "B", "B_kv(128k) on the link without the codec"), "1x: never read inside a step",
         "1x: never read inside a step", "1x: never read inside a step",
         reported(4.3, "x",
                  "CacheGen KV size reduction 3.5–4.3× with negligible quality impact (2310.07240 abstract)")),
    ]
    return Table("7", "Comparison matrix: one representative per domain (Llama-3-70B, B200, 128k)",
                 ("domain", "representative", "byte factor", "footprint", "without the domain", "S at W1",
                  "S at W2", "S at W3", "quality (as reported)"), tuple(rows),
                 ("footprint: bytes of one 128k sequence, except prefix caching: W3's total stored across its "
                  "8 requests; tiering: bytes on the link, with and without the codec",
                  "byte factors multiply; quality costs do not (docs/model.md §3) — "
                  "a combination must be validated jointly",
                  "reported values from different papers are not comparable"))


def _w4_paths() -> tuple[float, list[tuple[str, float, float]]]:
    """W4's recompute time and, per link path, (name, fetch time, bytes moved)."""
    m = paper_model()
    seq = _f(kv_bytes_per_seq(m, CONTEXT, 2.0))
    t_pre = _f(prefill_time(m, CONTEXT, paper_device("b200").compute))
    paths = [(name, _f(fetch_time(m, CONTEXT, 2.0, bw, codec)), seq / codec)
             for name, bw, codec in (("PCIe Gen5 x16", PCIE5_PAPER, 1.0),
                                     ("PCIe Gen5 x16 + 4× codec", PCIE5_PAPER, CODEC_RATIO),
                                     ("NVLink + 4× codec", NVLINK_PAPER, CODEC_RATIO))]
    return t_pre, paths


def w4_economics() -> Table:
    """W4: recompute a 128k context or fetch its KV over a link."""
    seq = _f(kv_bytes_per_seq(paper_model(), CONTEXT, 2.0))
    t_pre, paths = _w4_paths()
    rows: list[tuple[Cell, ...]] = [
        ("recompute (prefill)", derived(t_pre, "s", "(2·P·s + 2·L·n_q·d_h·s²)/(η·π) (docs/model.md §9)"), "—", "—"),
    ]
    for name, t, moved in paths:
        rows.append((name, derived(t, "s", "B_kv(s)/(link·codec) (docs/model.md §9)"),
                     derived(moved, "B", "bytes on the link"), derived(t_pre / t, "x", "recompute / fetch")))
    return Table("W4", "Reuse of one 128k context: recompute vs fetch (Llama-3-70B, B200)",
                 ("path", "time", "bytes moved", "fetch advantage"), tuple(rows),
                 (f"KV of the context: {seq / 1e9:.2f} GB (derived)",))



def combination() -> Table:
    """§4.6: 2-bit storage with retention r = 0.5, its decode-traffic speedup at W2 and, with W3's σ,
    its capacity factor."""
    m = paper_model()
    w2, w3 = WORKLOADS[1], WORKLOADS[2]
    quant = 2.0 / catalog.DTYPES["int2"].width
    evict = 1.0 / COMBINATION_RETENTION
    c = quant * evict
    k_w2 = w2.batch * _f(kv_bytes_per_seq(m, w2.context, 2.0))
    sigma = _f(sharing_factor(w3.fanout, w3.context, w3.prefix))
    rows: list[tuple[Cell, ...]] = [
        ("2-bit storage: byte factor", derived(quant, "x", "16 bit / 2 bit")),
        (f"retention r = {COMBINATION_RETENTION:g}: byte factor", derived(evict, "x", "1/r")),
        ("combined byte factor", derived(c, "x", "16/2 · 1/r")),
        ("decode-traffic speedup at W2 (b = 32, 128k)",
         derived(_f(rf.speedup(140e9, k_w2, c)), "x", "S(c) = (W + K)/(W + K/c), W = 140 GB, K = 32·B_kv(128k)")),
        ("W3 sharing factor σ", derived(sigma, "x", "σ = n·s/(p + n(s−p)), W3")),
        ("capacity factor with W3's σ", derived(c * sigma, "x", "8 × 2 × σ")),
    ]
    return Table("§4.6", f"The combination ceiling: 2-bit storage with retention r = {COMBINATION_RETENTION:g} "
                         "(Llama-3-70B, B200)",
                 ("quantity", "value"), tuple(rows),
                 ("the capacity factor multiplies bytes held; the speedup counts bytes read, where σ helps only "
                  "with a shared-prefix kernel (docs/model.md §3)",
                  "byte factors multiply; quality costs do not — a combination must be validated jointly"))


def link_ratios() -> Table:
    """§2.5, §4.5: the links against H100's HBM, and the range of W4's fetch advantage over recompute."""
    hbm = paper_device("h100-sxm").bandwidth
    t_pre, paths = _w4_paths()
    lo = min(paths, key=lambda p: t_pre / p[1])
    hi = max(paths, key=lambda p: t_pre / p[1])
    rows: list[tuple[Cell, ...]] = [
        (f"H100 HBM / {name}", reported(hbm, "B/s", "H100 SXM HBM3, paper Tab. 3"),
         assumed(bw, "B/s", f"paper §2.5: {name}"), derived(hbm / bw, "x", "β_HBM / link"))
        for name, bw in (("PCIe Gen5 x16", PCIE5_PAPER), ("NVLink", NVLINK_PAPER))
    ]
    for which, (name, t, _) in (("lowest", lo), ("highest", hi)):
        rows.append((f"W4 recompute / fetch, {which}: {name}", derived(t_pre, "s", "T_prefill (Table W4)"),
                     derived(t, "s", f"T_fetch over {name} (Table W4)"),
                     derived(t_pre / t, "x", "T_prefill / T_fetch")))
    nv4 = catalog.get_link("nvlink4").bandwidth
    return Table("§2.5", "Links against HBM, and W4's fetch advantage over recompute (§4.5), lowest and highest",
                 ("comparison", "numerator", "denominator", "ratio"), tuple(rows),
                 (f"NVLink is the paper's {NVLINK_PAPER / 1e9:g} GB/s, NVLink 4's bidirectional total; at the link "
                  f"catalog's {nv4 / 1e9:g} GB/s per direction (nvlink4) H100's HBM is {hbm / nv4:.3g}x "
                  "faster (derived)",
                  "a remote tier serves reuse between steps and sessions, never reads inside a decode step "
                  "(docs/model.md §9)"))


def all_tables() -> tuple[Table, ...]:
    return (table1(), table3(), table4(), table5(), table7(), combination(), w4_economics(), link_ratios())
