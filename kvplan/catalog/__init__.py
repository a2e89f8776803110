"""Catalogs of devices, links, models and dtypes, shipped as TOML data in this package.

Each entry carries its source and a confidence mark (V vendor document,
S well-sourced secondary, U uncertain; see the entry's note). Values are
written with units in the TOML ("192 GB", "8.0 TB/s") and converted here,
once, to base units.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
from typing import Mapping, Optional, Sequence, TypeVar, Union

from kvplan.base.errors import CatalogError
from kvplan.base.json_types import ConfigValue
from kvplan.base.near import close_matches
from kvplan.base.records import record
from kvplan.base.units import Dim, parse_quantity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


# ------------------------------------------------------------------- dtypes

@record
class Dtype:
    """A storage dtype: `width` bytes per element (SPEC §1)."""

    id: str
    width: float
    bits: int
    lossy: bool
    note: str = ""


DTYPES: Mapping[str, Dtype] = {
    d.id: d
    for d in (
        Dtype("fp32", 4.0, 32, False),
        Dtype("bf16", 2.0, 16, False),
        Dtype("fp16", 2.0, 16, False),
        Dtype("fp8", 1.0, 8, True, "FP8 E4M3 with per-tensor or per-head scales"),
        Dtype("int8", 1.0, 8, True, "INT8 with per-token-head scales"),
        Dtype("int4", 0.5, 4, True, "INT4 with per-token-head or group scales"),
        Dtype("fp4", 0.5, 4, True, "NVFP4 (E2M1 with block scales)"),
        Dtype("int2", 0.25, 2, True,
              "2-bit with a structure-aware layout: per-channel keys, per-token values (KIVI)"),
    )
}

#: Lossiness order of KV dtypes: an ordering for tie-breaks, not arithmetic on quality.
DTYPE_ORDER = ("bf16", "fp16", "fp8", "int8", "int4", "fp4", "int2")

DTYPE_ALIASES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "2bit": "int2",
                 "2-bit": "int2", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "nvfp4": "fp4"}


def dtype(name: str) -> Dtype:
    key = DTYPE_ALIASES.get(name.lower(), name.lower())
    if key not in DTYPES:
        close = close_dtype(name)
        raise CatalogError(f"unknown dtype '{name}'",
                           help=f"did you mean '{close}'?" if close else "known: " + ", ".join(DTYPES))
    return DTYPES[key]


def close_dtype(name: str) -> Optional[str]:
    """The dtype `name` is a misspelling of, or None: only one with the same digits, since a
    match that changes the bit width changes the meaning (int3 is not int8, fp6 is not fp8)."""
    digits = sorted(ch for ch in name if ch.isdigit())
    close = [c for c in close_matches(name.lower(), list(DTYPES), n=3, cutoff=0.5)
             if sorted(ch for ch in c if ch.isdigit()) == digits]
    return close[0] if close else None


# ------------------------------------------------------------------- models

@record
class WeightBytes:
    """A checkpoint's weight bytes (kvplan.catalog.weight_bytes): `held` in device memory over the whole
    deployment, `routed` the part of it in routed experts (a step reads the experts the batch touches),
    `checkpoint` what its files hold; `evidence` is reported, derived or assumed, `source` says from what."""

    held: float
    routed: float
    checkpoint: float
    evidence: str
    source: str
    method: str = ""
    format: str = ""     # what `weights` shows for the checkpoint: the method, else its torch dtype (bf16)


@record
class Model:
    """A transformer as the KV model sees it (SPEC §2).

    `windows[i]` is layer i's sliding window in tokens, or None for full
    attention. For MLA (`kv_kind == "mla"`) a layer stores one latent of
    `mla_kv_rank + mla_rope_dim` values per token instead of K and V.
    `params` counts every parameter held in memory; `params_active` those read
    per token at batch 1; `params_routed` those in routed experts (all of them).
    `hidden_size` is the residual stream's width (config.json `hidden_size`): what the tensor-parallel
    all-reduces and the pipeline transfers move per token; 0 where not known.
    """

    id: str
    name: str
    n_layers: int
    n_q: int
    n_kv: int
    head_dim: int
    params: float
    params_active: float
    windows: tuple[Optional[int], ...]
    kv_kind: str = "gqa"
    mla_kv_rank: int = 0
    mla_rope_dim: int = 0
    v_head_dim: int = 0
    hidden_size: int = 0
    n_experts: int = 0
    experts_per_token: int = 0
    params_routed: float = 0.0
    soft_cap: Optional[float] = None
    max_context: Optional[int] = None
    hf_id: str = ""
    source: str = ""
    confidence: str = "V"
    note: str = ""
    hf_ids: tuple[str, ...] = ()                 # every Hugging Face repo id this entry stands for, hf_id first
    weight_bytes: Optional[WeightBytes] = None   # exact bytes of the checkpoint, when known
    #: the checkpoint's class (config.json `architectures[0]`, e.g. GptOssForCausalLM), when known: engines pick
    #: their pool layout by it (SGLang's hybrid sliding-window pool, kvplan.engines.sglang)
    architecture: str = ""

    @property
    def g(self) -> float:
        """GQA group factor n_q / n_kv."""
        return self.n_q / self.n_kv

    @property
    def kv_elems_per_layer(self) -> int:
        """KV elements one token stores in one layer: 2·n_kv·d_h, or d_c + d_r for MLA."""
        if self.kv_kind == "mla":
            return self.mla_kv_rank + self.mla_rope_dim
        return 2 * self.n_kv * self.head_dim

    @property
    def attn_dims(self) -> tuple[int, int]:
        """Per-head (QK, AV) widths of a decode kernel; MLA runs absorbed over the latent."""
        if self.kv_kind == "mla":
            return self.mla_kv_rank + self.mla_rope_dim, self.mla_kv_rank
        return self.head_dim, (self.v_head_dim or self.head_dim)

    @property
    def prefill_attn_dims(self) -> tuple[int, int]:
        """Per-head (QK, AV) widths of a prefill kernel. MLA prefills expanded, as multi-head attention over the
        up-projected keys and values: QK qk_nope + qk_rope (`head_dim`, 192 for DeepSeek-V3), AV v_head_dim (128);
        decode stays absorbed over the latent (attn_dims; the engine evidence is in the DeepSeek-V3 entry's note
        in models.toml). Other kinds prefill with the decode kernel's widths."""
        if self.kv_kind == "mla":
            return self.head_dim, (self.v_head_dim or self.head_dim)
        return self.attn_dims

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def window_groups(self) -> tuple[tuple[Optional[int], int], ...]:
        """(window, layer count) pairs, full attention (None) first, then windows ascending."""
        return _window_groups(self.windows)

    @property
    def all_full(self) -> bool:
        return all(w is None for w in self.windows)


@functools.lru_cache(maxsize=64)
def _window_groups(windows: tuple[Optional[int], ...]) -> tuple[tuple[Optional[int], int], ...]:
    """Model.window_groups, counted once per layer layout (a plan asks ~10 times)."""
    counts: dict[Optional[int], int] = {}
    for w in windows:
        counts[w] = counts.get(w, 0) + 1
    return tuple(sorted(counts.items(), key=lambda kv: -1 if kv[0] is None else kv[0]))


# ------------------------------------------------------------------ devices

@record
class Link:
    id: str
    name: str
    bandwidth: float  # B/s per direction
    source: str = ""
    note: str = ""


@record
class Device:
    """An accelerator package. `fabric` is the die-to-die bandwidth in B/s, or None
    where unpublished (striped placement is then an upper bound)."""

    id: str
    name: str
    memory: float            # B
    bandwidth: float         # B/s aggregate HBM
    compute: float           # dense BF16 FLOP/s
    compute_fp8: Optional[float]   # dense FP8 FLOP/s, None where the part has no FP8 tensor cores
    partitions: int          # dies or HBM stacks pages can be pinned to
    fabric: Optional[float]  # B/s die-to-die
    sm_count: Optional[int]
    host_link: Optional[str]
    scaleup_link: Optional[str]
    source: str = ""
    confidence: str = "V"
    note: str = ""
    fp4: bool = False        # FP4 formats in hardware (NVFP4 KV needs them)
    #: Dense FP4 tensor FLOP/s where the vendor publishes it (B200, B300, GB200); None elsewhere.
    compute_fp4: Optional[float] = None
    #: A public on-demand list price, USD per device-hour (docs/catalog.md, "Prices"), with the page it is
    #: cited from and the date it was read (YYYY-MM-DD); None where no price was cited: kvplan never invents one.
    price_per_hour: Optional[float] = None
    price_source: str = ""
    price_date: str = ""
    #: Devices per scale-up domain (an HGX board: 8, a GB200 NVL72 rack: 72) and the links.toml id of each
    #: device's own link out of it (SPEC §12, docs/catalog.md "Nodes and links"); None: no source read gives
    #: the domain, and any group is planned as if one domain held it.
    node: Optional[int] = None
    scaleout_link: Optional[str] = None
    #: Devices one host holds (one server, one OS image, one Kubernetes node: an HGX board 8, a GB200 NVL72 compute
    #: tray 4), as the entry's note cites it; None where no source read gives it. The launch-file writers split a
    #: layout into one file a host by it (kvplan.engines.launchers); the link model reads `node`, never this.
    host: Optional[int] = None

    @property
    def partition_bandwidth(self) -> float:
        return self.bandwidth / self.partitions

    @property
    def ridge(self) -> float:
        return self.compute / self.bandwidth


# ------------------------------------------------------------------ loading

def suggest(name: str, known: Mapping[str, object] | Sequence[str]) -> str:
    keys = list(known)
    close = close_matches(name.lower(), keys, n=1, cutoff=0.5)
    if close:
        return f"did you mean '{close[0]}'?"
    return "known: " + ", ".join(sorted(keys)[:12]) + (", ..." if len(keys) > 12 else "")


#: The folder of the shipped TOML files: this package's own. Read by path, not through
#: importlib.resources, whose import (zipfile, tempfile, pathlib) costs kvplan's cold start ~7 ms.
_HERE = os.path.dirname(os.path.abspath(__file__))

#: One entry of a catalog file: its table, as the TOML reader returns it.
CatalogEntry = Mapping[str, ConfigValue]


@functools.cache
def _load_toml(name: str) -> Mapping[str, CatalogEntry]:
    """The entries of one shipped catalog file, by id, parsed once per process (`aliases` reads the file its
    table was built from); each top-level value must be a table."""
    with open(os.path.join(_HERE, name), "rb") as fh:
        raw = fh.read()
    data = _parse(name, raw)
    out: dict[str, CatalogEntry] = {}
    for cid, entry in data.items():
        if not isinstance(entry, dict):
            raise CatalogError(f"{name}: `{cid}` is not a table", help=f"write it as `[{cid}]` with its keys")
        out[cid] = entry
    return out


def _parse(name: str, raw: bytes) -> dict[str, ConfigValue]:
    """The TOML file `name` (bytes `raw`) as tomllib reads it: from the JSON copy beside it
    (tools/build_catalog.py) when that copy was made from exactly these bytes, else from the TOML,
    so an edited catalog is never shadowed by a stale copy. json.loads of the four catalogs costs
    ~0.1 ms, tomllib ~3.5 ms of the cold start (bench/bench_coldstart.py)."""
    shipped = _shipped_json(name, hashlib.sha256(raw).hexdigest())
    if shipped is not None:
        return shipped
    parsed: dict[str, ConfigValue] = tomllib.loads(raw.decode("utf-8"))
    return parsed


def _shipped_json(name: str, sha256: str) -> Optional[dict[str, ConfigValue]]:
    """The data of `name`'s JSON copy if it records `sha256` as its source's hash, else None (no copy,
    a stale one, or one that is not the generator's format: the TOML is then read)."""
    try:
        with open(os.path.join(_HERE, os.path.splitext(name)[0] + ".json"), "rb") as fh:
            copy = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    if not isinstance(copy, dict) or copy.get("format") != 1 or copy.get("source_sha256") != sha256:
        return None
    data = copy.get("data")
    return data if isinstance(data, dict) else None


def _wrong(where: str, key: str, raw: ConfigValue, want: str) -> CatalogError:
    return CatalogError(f"{where}.{key} is {raw!r}: expected {want}", help="fix the shipped catalog entry")


def _text(entry: CatalogEntry, key: str, where: str, default: Optional[str] = None) -> str:
    """A string field; `default` where the key is absent (None: the key is required)."""
    raw = entry[key] if default is None else entry.get(key, default)
    if not isinstance(raw, str):
        raise _wrong(where, key, raw, "a string")
    return raw


def _opt_text(entry: CatalogEntry, key: str, where: str) -> Optional[str]:
    return _text(entry, key, where) if key in entry else None


def _texts(entry: CatalogEntry, key: str, where: str) -> tuple[str, ...]:
    """A list of strings, or () where the key is absent."""
    raw = entry.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise _wrong(where, key, raw, "a list of strings")
    return tuple(x for x in raw if isinstance(x, str))


def _int(entry: CatalogEntry, key: str, where: str, default: Optional[int] = None) -> int:
    """An integer field, read as int() reads it; `default` where the key is absent (None: required)."""
    raw = entry[key] if default is None else entry.get(key, default)
    if not isinstance(raw, (int, float, str)):
        raise _wrong(where, key, raw, "an integer")
    return int(raw)


def _float(entry: CatalogEntry, key: str, where: str) -> float:
    """A number field read as float() reads it (a string that is no number raises ValueError)."""
    raw = entry[key]
    if not isinstance(raw, (int, float, str)):
        raise _wrong(where, key, raw, "a number")
    return float(raw)


def _opt_number(entry: CatalogEntry, key: str, where: str) -> Optional[Union[int, float]]:
    """A number field as written (an integer stays one), or None where the key is absent."""
    raw = entry.get(key)
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, (int, float))):
        raise _wrong(where, key, raw, "a number")
    return raw


def _q(entry: CatalogEntry, key: str, dim: Dim, where: str) -> float:
    raw = entry[key]
    if isinstance(raw, (int, float)):
        return float(raw)
    return parse_quantity(str(raw), dim, what=f"{where}.{key}")


def _opt_q(entry: CatalogEntry, key: str, dim: Dim, where: str) -> Optional[float]:
    return _q(entry, key, dim, where) if key in entry else None


@functools.cache
def links() -> Mapping[str, Link]:
    out = {}
    for lid, e in _load_toml("links.toml").items():
        out[lid] = Link(id=lid, name=_text(e, "name", lid), bandwidth=_q(e, "bandwidth", Dim.BANDWIDTH, lid),
                        source=_text(e, "source", lid, ""), note=_text(e, "note", lid, ""))
    return out


@functools.cache
def devices() -> Mapping[str, Device]:
    return {did: device_from_entry(did, e) for did, e in _load_toml("devices.toml").items()}


def device_from_entry(did: str, e: CatalogEntry) -> Device:
    """One devices.toml entry as a Device, its fields checked (a bad one is a CatalogError naming it)."""
    price, price_source, price_date = _price(e, did)
    return Device(
        id=did, name=_text(e, "name", did),
        memory=_q(e, "memory", Dim.BYTES, did),
        bandwidth=_q(e, "bandwidth", Dim.BANDWIDTH, did),
        compute=_q(e, "compute", Dim.COMPUTE, did),
        compute_fp8=_opt_q(e, "compute_fp8", Dim.COMPUTE, did),
        partitions=_int(e, "partitions", did, 1),
        fabric=_opt_q(e, "fabric", Dim.BANDWIDTH, did),
        sm_count=_int(e, "sm_count", did) if "sm_count" in e else None,
        host_link=_opt_text(e, "host_link", did), scaleup_link=_opt_text(e, "scaleup_link", did),
        source=_text(e, "source", did, ""), confidence=_text(e, "confidence", did, "V"),
        note=_text(e, "note", did, ""),
        fp4=bool(e.get("fp4", False)), compute_fp4=_opt_q(e, "compute_fp4", Dim.COMPUTE, did),
        price_per_hour=price, price_source=price_source, price_date=price_date,
        node=_node(e, did), scaleout_link=_opt_text(e, "scaleout_link", did), host=_host(e, did),
    )


def _node(e: CatalogEntry, did: str) -> Optional[int]:
    """A device's `node` (devices per scale-up domain, a whole number from 1 on), or None where absent."""
    if "node" not in e:
        return None
    raw = e["node"]
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise _wrong(did, "node", raw, "a whole number of devices per scale-up domain, 1 or more")
    return raw


def _host(e: CatalogEntry, did: str) -> Optional[int]:
    """A device's `host` (devices one host holds, a whole number from 1 on), or None where absent; where `node` is
    given one of the two divides the other (a host of a domain, or a domain of hosts: an NVL72 rack of 4-GPU trays)."""
    if "host" not in e:
        return None
    raw = e["host"]
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise _wrong(did, "host", raw, "a whole number of devices one host holds, 1 or more")
    node = _node(e, did)
    if node is not None and node % raw and raw % node:
        raise CatalogError(f"{did}.host is {raw} and {did}.node is {node}: neither divides the other",
                           help="a host holds a whole scale-up domain or a whole fraction of one (an NVL72 rack of "
                                "72 is 18 trays of 4): fix the shipped catalog entry")
    return raw


#: The most a catalog or spec price may be, USD per device-hour: far above any list price, low enough that
#: every cost figure stays finite (kvplan's limit, docs/catalog.md).
MAX_PRICE_PER_HOUR = 1e4


def _price(e: CatalogEntry, did: str) -> tuple[Optional[float], str, str]:
    """A device's price fields: none, or all three (price_per_hour in USD per device-hour above 0, its source
    and its date as YYYY-MM-DD): a price without its citation is refused."""
    keys = ("price_per_hour", "price_source", "price_date")
    given = [k for k in keys if k in e]
    if not given:
        return None, "", ""
    if len(given) < len(keys):
        missing = ", ".join(k for k in keys if k not in e)
        raise CatalogError(f"{did}: a price needs price_per_hour, price_source and price_date; {missing} missing",
                           help="cite the page the price is from and the date it was read, or remove the price")
    price = _float(e, "price_per_hour", did)
    date = _text(e, "price_date", did)
    if not 0 < price <= MAX_PRICE_PER_HOUR:
        raise _wrong(did, "price_per_hour", e["price_per_hour"], f"USD per device-hour above 0, at most "
                                                                 f"{MAX_PRICE_PER_HOUR:,.0f}")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        raise _wrong(did, "price_date", date, "a date YYYY-MM-DD")
    return price, _text(e, "price_source", did), date


def model_from_entry(mid: str, e: CatalogEntry) -> Model:
    n_layers = _int(e, "layers", mid)
    windows: list[Optional[int]]
    if "layer_windows" in e:
        windows = [None if w == 0 else w for w in _int_list(e, "layer_windows", mid)]
    elif "window" in e:
        windows = [_int(e, "window", mid)] * n_layers
    else:
        windows = [None] * n_layers
    params = _q(e, "params", Dim.COUNT, mid)
    return Model(
        id=mid, name=_text(e, "name", mid), n_layers=n_layers, n_q=_int(e, "q_heads", mid),
        n_kv=_int(e, "kv_heads", mid) if "kv_heads" in e else _int(e, "q_heads", mid),
        head_dim=_int(e, "head_dim", mid),
        params=params, params_active=_opt_q(e, "params_active", Dim.COUNT, mid) or params,
        windows=tuple(windows), kv_kind=_text(e, "kv_kind", mid, "gqa"),
        mla_kv_rank=_int(e, "mla_kv_rank", mid, 0), mla_rope_dim=_int(e, "mla_rope_dim", mid, 0),
        v_head_dim=_int(e, "v_head_dim", mid, 0), hidden_size=_int(e, "hidden_size", mid, 0),
        n_experts=_int(e, "experts", mid, 0), experts_per_token=_int(e, "experts_per_token", mid, 0),
        params_routed=_opt_q(e, "params_routed", Dim.COUNT, mid) or 0.0,
        soft_cap=_opt_number(e, "soft_cap", mid), max_context=_opt_max_context(e, mid),
        hf_id=_text(e, "hf_id", mid, ""),
        source=_text(e, "source", mid, ""), confidence=_text(e, "confidence", mid, "V"),
        note=_text(e, "note", mid, ""),
        hf_ids=tuple(dict.fromkeys([*([_text(e, "hf_id", mid)] if e.get("hf_id") else []),
                                    *_texts(e, "hf_ids", mid)])),
        weight_bytes=_weight_bytes(mid, e),
        architecture=_text(e, "architecture", mid, ""),
    )


def _weight_bytes(mid: str, e: CatalogEntry) -> Optional[WeightBytes]:
    """The published checkpoint's weight bytes (`[id.weight_bytes]`: held, routed, checkpoint, with the method, its
    evidence and source), as kvplan.catalog.weight_bytes computes them from the checkpoint's config.json
    (tests/unit/catalog/test_catalog.py recomputes them; docs/weights.md); None where the entry has none."""
    raw = e.get("weight_bytes")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _wrong(mid, "weight_bytes", raw, "a table")
    where = f"{mid}.weight_bytes"
    method = _text(raw, "method", where, "")
    return WeightBytes(held=_float(raw, "held", where), routed=_float(raw, "routed", where),
                       checkpoint=_float(raw, "checkpoint", where), evidence=_text(raw, "evidence", where),
                       source=_text(raw, "source", where), method=method, format=_text(raw, "format", where, method))


def _int_list(entry: CatalogEntry, key: str, where: str) -> list[int]:
    raw = entry[key]
    if not isinstance(raw, list):
        raise _wrong(where, key, raw, "a list of integers")
    return [_int({key: w}, key, where) for w in raw]


def _opt_max_context(entry: CatalogEntry, where: str) -> Optional[int]:
    raw = _opt_number(entry, "max_context", where)
    if raw is not None and not isinstance(raw, int):
        raise _wrong(where, "max_context", raw, "an integer")
    return raw


def intervals() -> Mapping[str, CatalogEntry]:
    """The error-bar table (intervals.toml, docs/expected.md "Error bars") as read: kvplan.planner.intervals
    parses its cells."""
    return _load_toml("intervals.toml")


@functools.cache
def models() -> Mapping[str, Model]:
    return {mid: model_from_entry(mid, e) for mid, e in _load_toml("models.toml").items()}


_CATALOG_FILES = {"model": "models.toml", "device": "devices.toml", "link": "links.toml"}


@functools.cache
def aliases(kind: str) -> Mapping[str, str]:
    """Lower-case alias -> catalog id, from each entry's optional `aliases` list."""
    if kind not in _CATALOG_FILES:
        return {}
    return {str(a).lower(): cid for cid, e in _load_toml(_CATALOG_FILES[kind]).items()
            for a in _aliases_of(e, cid)}


def _aliases_of(entry: CatalogEntry, where: str) -> list[ConfigValue]:
    raw = entry.get("aliases", [])
    if not isinstance(raw, list):
        raise _wrong(where, "aliases", raw, "a list of names")
    return raw


_Entry = TypeVar("_Entry")


def _lookup(kind: str, name: str, table: Mapping[str, _Entry]) -> _Entry:
    if name in table:
        return table[name]
    low = name.lower()
    if low in table:
        return table[low]
    alias = aliases(kind).get(low)
    if alias is not None and alias in table:
        return table[alias]
    known = [*table, *aliases(kind)]
    raise CatalogError(f"unknown {kind} '{name}'", help=f"{suggest(name, known)}; `kvplan {kind}s` lists them")


@functools.cache
def by_repo_id() -> Mapping[str, Model]:
    """Lower-case Hugging Face repo id -> the catalog model that stands for it."""
    return {r.lower(): m for m in models().values() for r in m.hf_ids}


def get_model(name: str) -> Model:
    """A catalog model by id, alias or any of its Hugging Face repo ids (case-insensitive)."""
    found = by_repo_id().get(name.strip().lower())
    if found is not None:
        return found
    return _lookup("model", name, models())


def get_device(name: str) -> Device:
    return _lookup("device", name, devices())


def get_link(name: str) -> Link:
    return _lookup("link", name, links())
