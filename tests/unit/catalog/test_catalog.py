"""The shipped catalogs: every entry loads, references resolve, anchors hold, the listing follows the contract."""

from __future__ import annotations

import math
import sys
from importlib import resources
from typing import Any

import pytest

from kvplan import catalog
from kvplan.base.errors import CatalogError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEVICE_KEYS = {"name", "aliases", "fp4", "memory", "bandwidth", "compute", "compute_fp8", "compute_fp4", "partitions",
               "fabric", "sm_count", "host_link", "scaleup_link", "node", "scaleout_link", "host", "confidence",
               "source", "note", "price_per_hour", "price_source", "price_date"}
MODEL_KEYS = {"name", "aliases", "hf_id", "hf_ids", "layers", "q_heads", "kv_heads", "head_dim", "params",
              "params_active", "params_routed", "experts", "experts_per_token", "kv_kind", "mla_kv_rank",
              "mla_rope_dim", "v_head_dim", "hidden_size", "window", "layer_windows", "soft_cap", "max_context",
              "source", "confidence", "note", "weight_bytes", "architecture"}
LINK_KEYS = {"name", "bandwidth", "source", "note", "aliases"}
CONFIDENCE = {"V", "S", "U"}


def raw(name: str) -> dict[str, Any]:
    with resources.files("kvplan.catalog").joinpath(name).open("rb") as fh:
        return tomllib.load(fh)


# ------------------------------------------------------------ loading

@pytest.mark.parametrize("name, keys", [("devices.toml", DEVICE_KEYS), ("models.toml", MODEL_KEYS),
                                        ("links.toml", LINK_KEYS)])
def test_entries_use_only_known_keys(name: str, keys: set[str]) -> None:
    # A misspelt key ('compute_fp9') would load silently and be ignored.
    for eid, entry in raw(name).items():
        assert set(entry) <= keys, (eid, set(entry) - keys)
        assert entry["source"].strip(), eid


def test_every_device_loads_with_sane_values() -> None:
    devs = catalog.devices()
    assert len(devs) >= 15
    for d in devs.values():
        assert d.memory > 0 and d.bandwidth > 0 and d.compute > 0 and d.partitions >= 1
        assert d.compute_fp8 is None or d.compute_fp8 >= d.compute  # FP8 never slower than BF16
        assert set(d.confidence.split("/")) <= CONFIDENCE
        # Fabric only where the package has partitions to join.
        assert d.fabric is None or d.partitions > 1
        assert math.isclose(d.partition_bandwidth * d.partitions, d.bandwidth)


def test_every_model_loads_with_consistent_geometry() -> None:
    ms = catalog.models()
    assert len(ms) >= 16
    for m in ms.values():
        assert len(m.windows) == m.n_layers
        assert m.n_q % m.n_kv == 0, m.id  # GQA groups divide the query heads
        assert m.params_active <= m.params
        assert set(m.confidence.split("/")) <= CONFIDENCE
        assert m.kv_kind in ("gqa", "mla")
        if m.kv_kind == "mla":
            assert m.mla_kv_rank > 0 and m.mla_rope_dim > 0
        assert m.hidden_size > 0, m.id  # every shipped model states its residual width (models.toml header)


def test_every_link_loads() -> None:
    ls = catalog.links()
    for link in ls.values():
        assert link.bandwidth > 0 and link.source
    # SPEC §7: host DRAM over PCIe Gen5 x16 at ~64 GB/s per direction; each generation doubles.
    assert ls["pcie5-x16"].bandwidth == pytest.approx(64e9)
    assert ls["pcie6-x16"].bandwidth == pytest.approx(2 * ls["pcie5-x16"].bandwidth)
    assert ls["pcie5-x16"].bandwidth == pytest.approx(2 * ls["pcie4-x16"].bandwidth)


def test_link_ids_referenced_by_devices_exist() -> None:
    ls = catalog.links()
    for d in catalog.devices().values():
        for lid in (d.host_link, d.scaleup_link, d.scaleout_link):
            assert lid is None or lid in ls, (d.id, lid)


# ------------------------------------------------------------ anchors

def test_h100_ridge_is_the_papers_anchor() -> None:
    # SPEC §2: H100 SXM ridge 295 FLOP/B; devices.md: 989.4 / 3.35 = 295.3.
    assert catalog.get_device("h100-sxm").ridge == pytest.approx(295.3, abs=0.1)


@pytest.mark.parametrize("did, per_partition", [("b200", 4.0e12), ("mi300x", 0.6625e12)])
def test_per_partition_bandwidth(did: str, per_partition: float) -> None:
    # SPEC §6: B200 two dies at 4.0 TB/s; MI300X eight stacks at ~0.66 TB/s.
    assert catalog.get_device(did).partition_bandwidth == pytest.approx(per_partition)


def test_b200_striping_recovers_full_bandwidth_only_where_fabric_is_published() -> None:
    # SPEC §6: striped β_eff = min(β, β_link·n/(n−1)); NV-HBI 10 TB/s outruns one 4 TB/s die.
    d = catalog.get_device("b200")
    n = d.partitions
    assert d.fabric is not None and min(d.bandwidth, d.fabric * n / (n - 1)) == d.bandwidth
    assert catalog.get_device("mi300x").fabric is None


def test_mha_models_store_one_kv_head_per_query_head() -> None:
    for mid in ("llama-2-13b", "phi-3-mini"):
        m = catalog.get_model(mid)
        assert m.n_kv == m.n_q and m.g == 1


def test_layer_window_patterns_follow_the_configs() -> None:
    # transformers: Gemma 2 layer i is sliding when i is even; Gemma 3 global when (i + 1) % 6 == 0;
    # gpt-oss layer_types alternate sliding / full from layer 0; Mistral-7B-v0.1 slides everywhere.
    g2 = catalog.get_model("gemma-2-9b").windows
    assert all(w == (4096 if i % 2 == 0 else None) for i, w in enumerate(g2))
    g3 = catalog.get_model("gemma-3-27b").windows
    assert all(w == (None if (i + 1) % 6 == 0 else 1024) for i, w in enumerate(g3))
    assert sum(w is None for w in g3) == 10
    oss = catalog.get_model("gpt-oss-120b").windows
    assert all(w == (128 if i % 2 == 0 else None) for i, w in enumerate(oss))
    assert set(catalog.get_model("mistral-7b").windows) == {4096}


def test_moe_entries_read_fewer_params_than_they_hold() -> None:
    moe = [m for m in catalog.models().values() if m.is_moe]
    assert {m.id for m in moe} >= {"mixtral-8x7b", "deepseek-v2", "deepseek-v3", "gpt-oss-120b"}
    for m in moe:
        assert 0 < m.experts_per_token < m.n_experts
        assert 0 < m.params_routed < m.params
        assert m.params_active < m.params
        # Active = the non-routed weights (less the embedding lookup) + k/E of the routed ones.
        share = m.params_routed * m.experts_per_token / m.n_experts
        assert share < m.params_active <= m.params - m.params_routed + share


def test_publisher_totals_are_matched_by_the_counts() -> None:
    # DeepSeek: 671B total / 36.6B activated; OpenAI: 116.8B / 5.1B (model cards cited in `source`).
    v3, oss = catalog.get_model("deepseek-v3"), catalog.get_model("gpt-oss-120b")
    assert round(v3.params / 1e9) == 671 and round(v3.params_active / 1e8) == 366
    assert round(oss.params / 1e8) == 1168 and round(oss.params_active / 1e8) == 51


# ------------------------------------------------------------ lookup

@pytest.mark.parametrize("kind, alias, target", [
    ("device", "h100", "h100-sxm"), ("device", "H100", "h100-sxm"), ("device", "MI300", "mi300x"),
    ("model", "llama-3.1-70b", "llama-3-70b"), ("model", "Llama-3.1-8B", "llama-3-8b"),
    ("model", "QWEN2.5-7B", "qwen2.5-7b"),
])
def test_aliases_and_case_resolve(kind: str, alias: str, target: str) -> None:
    get = {"device": catalog.get_device, "model": catalog.get_model}[kind]
    assert get(alias) is get(target)


@pytest.mark.parametrize("kind, table", [("device", catalog.devices), ("model", catalog.models),
                                         ("link", catalog.links)])
def test_aliases_are_unambiguous(kind: str, table: Any) -> None:
    ids = set(table())
    entries = raw({"device": "devices.toml", "model": "models.toml", "link": "links.toml"}[kind])
    seen: list[str] = [a.lower() for e in entries.values() for a in e.get("aliases", ())]
    assert len(seen) == len(set(seen))  # no alias names two entries
    assert not set(seen) & ids  # no alias shadows an id
    assert all(i == i.lower() for i in ids)  # lower-case ids make lookups case-insensitive


@pytest.mark.parametrize("getter, typo, nearest", [
    (catalog.get_device, "h100-sx", "h100-sxm"), (catalog.get_model, "mistral-7", "mistral-7b"),
    (catalog.get_device, "trilium", "trillium"), (catalog.get_link, "nvlink-5", "nvlink5"),
])
def test_unknown_id_suggests_the_nearest(getter: Any, typo: str, nearest: str) -> None:
    with pytest.raises(CatalogError) as err:
        getter(typo)
    assert f"did you mean '{nearest}'" in str(err.value)


def test_a_catalog_models_weight_bytes_are_what_its_checkpoints_config_gives() -> None:
    # [id.weight_bytes] is kvplan.catalog.weight_bytes run on the served checkpoint's config.json: recomputed here,
    # and its copied quantization table is the config's own
    from kvplan.catalog import hf_config
    from kvplan.catalog import weight_bytes as wb
    from tests.paths import DATA

    entries = {mid: e for mid, e in raw("models.toml").items() if "weight_bytes" in e}
    assert set(entries) == {"deepseek-v3", "gpt-oss-120b"}
    for mid, e in entries.items():
        path = DATA / "hf" / (e["hf_id"].replace("/", "--") + ".json")
        config = hf_config.load_config_data(path)
        assert e["weight_bytes"]["quantization"] == config["quantization_config"], mid
        got = wb.from_config(config, str(path), f"config.json of {e['hf_id']}")
        have = catalog.get_model(mid)
        assert got is not None and have.weight_bytes is not None
        assert (have.weight_bytes.method, have.weight_bytes.evidence) == (got.method, "derived")
        assert have.weight_bytes.source.startswith(f"quantization_config in config.json of {e['hf_id']} (")
        for field in ("held", "routed", "checkpoint"):  # whole bytes in the TOML
            assert abs(getattr(have.weight_bytes, field) - getattr(got, field)) < 1, (mid, field)
        assert have.params == hf_config.count_params(config)[0]  # the parameters the entry states


def test_a_weight_bytes_table_of_the_wrong_shape_is_one_catalog_error() -> None:
    from kvplan.base.errors import CatalogError

    entry = {"name": "m", "layers": 1, "q_heads": 1, "head_dim": 8, "params": 10}
    with pytest.raises(CatalogError, match=r"m.weight_bytes is 5: expected a table"):
        catalog.model_from_entry("m", {**entry, "weight_bytes": 5})
    with pytest.raises(CatalogError, match=r"m.weight_bytes.source"):
        catalog.model_from_entry("m", {**entry, "weight_bytes": {"held": 1, "routed": 0, "checkpoint": 1,
                                                                 "evidence": "derived", "source": 3}})


#: Devices one host holds, as the sources named in each entry's note give them (docs/catalog.md, "Hosts"): an
#: HGX/DGX or 8-OAM server 8, a GB200 NVL72 compute tray 4 (2 superchips of 2 GPUs); None where no source read
#: gives one (PCIe cards, h20, TPUs).
HOSTS = {"a100-80g": 8, "h100-sxm": 8, "h200": 8, "b200": 8, "b200-hgx": 8, "b300": 8, "gb200": 2 * 2, "mi300x": 8,
         "mi325x": 8, "mi355x": 8, "gaudi3": 8}


def test_each_devices_host_size_is_the_sourced_one_and_its_note_cites_it() -> None:
    for did, d in catalog.devices().items():
        assert d.host == HOSTS.get(did), did
        if d.host is not None:
            assert f"host = {d.host}: " in d.note, did
            assert d.node is None or d.node % d.host == 0 or d.host % d.node == 0, did


_DEVICE = {"name": "d", "memory": "80 GB", "bandwidth": "3 TB/s", "compute": "900 TFLOPS"}


@pytest.mark.parametrize("host, node, says", [
    (0, None, "d.host is 0: expected a whole number of devices one host holds, 1 or more"),
    (True, None, "d.host is True: expected a whole number"),
    (2.5, None, "d.host is 2.5: expected a whole number"),
    ("8", None, "d.host is '8': expected a whole number"),
    (5, 72, "d.host is 5 and d.node is 72: neither divides the other"),
    (3, 8, "d.host is 3 and d.node is 8: neither divides the other"),
])
def test_a_host_size_that_is_not_a_whole_number_or_does_not_fit_the_node_is_refused(
        host: object, node: object, says: str) -> None:
    entry = {**_DEVICE, "host": host, **({} if node is None else {"node": node, "scaleout_link": "ib-ndr"})}
    with pytest.raises(CatalogError) as err:
        catalog.device_from_entry("d", entry)  # type: ignore[arg-type]
    assert says in str(err.value)


@pytest.mark.parametrize("host, node", [(4, 72), (8, 8), (16, 8), (1, 8), (8, None)])
def test_a_host_that_divides_the_node_or_is_a_multiple_of_it_is_kept(host: int, node: object) -> None:
    entry = {**_DEVICE, "host": host, **({} if node is None else {"node": node, "scaleout_link": "ib-ndr"})}
    assert catalog.device_from_entry("d", entry).host == host  # type: ignore[arg-type]


@pytest.mark.parametrize("mid", ["qwen2.5-72b", "gemma-3-27b"])
def test_hidden_size_without_a_fixture_is_the_one_its_source_quotes(mid: str) -> None:
    # No config.json copy in tests/data/hf (test_hf_config.py pairs the others with theirs): the entry's source
    # quotes the file's hidden size, and hidden_size is that number.
    m = catalog.get_model(mid)
    assert f"hidden {m.hidden_size}," in m.source
