"""What the settings table (kvplan.catalog.settings) derives, checked on the checker and on real emitted files:
the keys each place of a .kvp accepts, every engine's flag set, the "not written" warnings, and that adding a
pin is one row of the table: the checker takes it, the typed pins carry it, the engines write it and
`kvplan import` reads it back, with no other edit."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest
import yaml

from kvplan.app import importer
from kvplan.app.replan import emit
from kvplan.base.codes import Severity
from kvplan.catalog import settings
from kvplan.catalog.engines import ENGINES
from kvplan.catalog.settings import SETTINGS, Carrier, Read, Setting, Takes, Write
from kvplan.engines import sglang as sgl
from kvplan.engines import vllm as vll
from kvplan.lang import check_source
from kvplan.planner import plan

DEPLOYMENT = """kvplan 1
deployment "d" {{
    model = llama-3-70b
    device = h100-sxm
    {top}
    workload {{
        batch = 64
        context = 8k
    }}
    pin {{
        {pins}
    }}
}}
"""


def spec(pins: str, top: str = "engine = vllm") -> str:
    return DEPLOYMENT.format(pins=pins, top=top)


def scenario(text: str) -> Any:
    result = check_source(text, "d.kvp")
    errors = [f"{d.code} {d.message}" for d in result.diagnostics if d.severity is Severity.ERROR]
    assert not errors, errors
    return result.scenarios[0]


def _valid(row: Setting) -> str:
    """A value the row's own checks take (each pin alone: no cross-field rule applies)."""
    if row.takes is Takes.DTYPE:
        return "bf16"
    if row.takes is Takes.SWITCH:
        return "on"
    if row.takes is Takes.WORD:
        return row.choices[0]
    assert row.range.lo is not None
    return "1" if row.integer else "0.5"


@pytest.mark.parametrize("place", ["deployment", "workload", "quality", "slo", "pin", "model", "device"])
def test_each_place_accepts_exactly_the_tables_keys(place: str) -> None:
    inside = {"deployment": ("deployment \"d\" {", "}"), "model": ("model \"m\" {", "}"),
              "device": ("device \"g\" {", "}")}
    opening, closing = inside.get(place, ("deployment \"d\" {\n    " + place + " {", "}\n}"))
    text = f"kvplan 1\n{opening}\n    zzqx_wvkj = 1\n{closing}\n"
    unknown = [d for d in check_source(text, "d.kvp").diagnostics if "zzqx_wvkj" in d.message]
    assert unknown, text
    assert unknown[0].help is not None and unknown[0].help.endswith("known keys: " + ", ".join(settings.keys(place)))


def test_expect_knows_the_tables_metrics() -> None:
    text = spec("kv_dtype = bf16").replace("    pin {", "    expect {\n        zzqx_wvkj >= 1\n    }\n    pin {")
    unknown = [d for d in check_source(text, "d.kvp").diagnostics if "zzqx_wvkj" in d.message]
    assert unknown[0].help == "metrics: " + ", ".join(settings.keys("expect"))


@pytest.mark.parametrize("row", settings.rows("pin"), ids=lambda r: r.key)
def test_every_pin_row_is_taken_and_carried_typed(row: Setting) -> None:
    sc = scenario(spec(f"{row.key} = {_valid(row)}", top="devices = 4"))
    value = sc.pinned.value(row)
    assert value is not None and sc.pinned.text(row) == {"on": "on"}.get(_valid(row), _valid(row))
    if row.takes is Takes.QUANTITY:
        assert type(value) is (int if row.integer else float)
    # the record's own attribute says the same
    assert getattr(sc.pinned, row.key) == (value if row.key not in ("replicas", "attention_dp") else int(value))


def _flat(data: Any, prefix: str = "") -> set[str]:
    if not isinstance(data, dict):
        return set()
    out = set()
    for k, v in data.items():
        out.add(prefix + str(k))
        out |= _flat(v, f"{prefix}{k}.")
    return out


def _written(p: Any, engine: str) -> tuple[set[str], list[str]]:
    """The flag or config-key names the engine's emitted files hold, and its warnings."""
    got = emit(p, engine)
    names: set[str] = set()
    for f in got.files:
        if f.name.endswith((".yaml", ".yml")):
            names |= _flat(yaml.safe_load(f.text))
        names |= {w.split("=")[0] for w in f.text.split() if w.startswith("--")}
    return names, list(got.warnings)


ALL = """kv_dtype = fp8
        block_size = 16
        tensor_parallel = 4
        pipeline_parallel = 2
        memory_fraction = 0.9
        max_batched_tokens = 8192
        """


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_every_engine_writes_the_flags_the_table_gives_it(engine: str) -> None:
    # replicas and attention groups: one spec each; prefix caching on and off
    written: set[str] = set()
    warnings: list[str] = []
    # the devices are the total over the replicas: 2 replicas of tp 4 × pp 2 take 16
    for extra in ("devices = 16\n        replicas = 2\n        prefix_caching = on",
                  "devices = 8\n        attention_dp = 2\n        prefix_caching = off"):
        names, said = _written(plan(scenario(spec(ALL + extra, top=f"engine = {engine}"))), engine)
        written |= names
        warnings += said
    # a mixture of experts in attention groups with its experts split: the rows every engine writes for one
    moe = spec("devices = 8\n        attention_dp = 8\n        expert_parallel = 8",
               top=f"engine = {engine}").replace("llama-3-70b", "deepseek-v3").replace("h100-sxm", "h200")
    # and replicas that share one host (SGLang's --dp-size: one server of both; over hosts, one server a host)
    shared = spec("devices = 8\n        replicas = 2\n        tensor_parallel = 4", top=f"engine = {engine}")
    for text in (moe, shared):
        names, said = _written(plan(scenario(text)), engine)
        written |= names
        warnings += said
    # the tier's flags are written where the plan holds a tier (test_backends parses every emitted file for them)
    tier = {settings.engine_flag(settings.pin("tier"), engine), *settings.pin("tier").engines[engine].writes}
    # and the speculative flags where the plan adopts a draft (tests/unit/engines/test_speculative_flags.py)
    method = settings.row("speculative.method")
    tier |= {settings.engine_flag(method, engine), *method.engines[engine].writes}
    assert set(settings.flag_names(engine, ENGINES[engine].flags)) - tier <= written
    for row, c in settings.carried(engine):
        if c.write is Write.NONE:  # each pin it does not write is said, not dropped
            assert any(f"pin {row.key} = " in w and "is not written" in w for w in warnings), row.key


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_flag_the_table_reads_is_in_the_engines_reader(engine: str) -> None:
    table = {"vllm": vll._vllm_table, "sglang": sgl._sglang_table}[engine]()
    names = {n for f in table for n in f.names}
    for row in SETTINGS:
        c = row.engines.get(engine)
        if c is not None and c.read in (Read.WHOLE, Read.FRACTION):
            assert {settings.engine_flag(row, engine), *c.aliases} <= names, row.path


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_carrier_is_read_from_the_table_not_by_hand(engine: str) -> None:
    # each flag a row carries is read by the reader the row derives (flagparse.table_readers), none by a
    # handler of the engine module's own: no Read.OWN is left on vLLM or SGLang, and no flag is read twice
    from kvplan.engines.flagparse import table_readers

    derived = {n for f in table_readers(engine, lambda v, flag: (int(v), "")) for n in f.names}
    own = [n for f in {"vllm": vll._vllm_table, "sglang": sgl._sglang_table}[engine]() for n in f.names]
    assert len(own) == len(set(own)), sorted(n for n in own if own.count(n) > 1)
    for row in SETTINGS:
        c = row.engines.get(engine)
        if c is None or c.read is Read.NONE or (c.write is Write.NONE and not c.flag):
            continue
        names = set(c.switch) if c.read is Read.SWITCH else {settings.engine_flag(row, engine), *c.aliases}
        # only the tier's flags (a JSON connector config, a size in GiB) and the speculative ones (vLLM's JSON,
        # SGLang's flags read together) have own readers
        if c.read is Read.OWN:
            assert row.path in ("pin.tier", "speculative.method") and names <= set(own) - derived, row.path
        else:
            assert names <= derived, (row.path, names - derived)


def test_the_vllm_flag_set_is_the_tables() -> None:
    assert settings.flag_names("vllm", ENGINES["vllm"].flags) == (
        "--max-num-seqs", "--max-model-len", "--kv-cache-dtype", "--block-size", "--enable-prefix-caching",
        "--disable-prefix-caching", "--kv-offloading-size", "--kv-offloading-backend", "--kv-transfer-config",
        "--tensor-parallel-size", "--pipeline-parallel-size", "--gpu-memory-utilization",
        "--max-num-batched-tokens", "--data-parallel-size", "--enable-expert-parallel",
        "--speculative-config")


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_every_engine_flag_set_is_derived_from_the_table(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the backend's flag set is the table's carriers plus the record's own flags, nothing kept by hand: each
    # written carrier's flag, its switch and what it writes beside it, a YAML key path as its keys
    from kvplan.engines import TARGETS, common

    record = ENGINES[engine]
    f = record.flags
    expected: set[str] = {f.kv_dtype, f.block, f.batch, f.context, f.tp, f.pp, *f.own}
    for row in SETTINGS:
        c = row.engines.get(engine)
        if c is not None and c.write is not Write.NONE:
            expected |= {settings.engine_flag(row, engine), c.also, *c.writes} - {""}
    flat = {part for name in expected for part in (name.split(".") if not name.startswith("-") else [name])}
    assert set(TARGETS[engine].flags) == flat == set(common.flag_set(record))
    # and a row added to the table is in the flag set with no other edit
    monkeypatch.setattr(settings, "SETTINGS", (*SETTINGS, TOY))
    assert {"vllm": "--max-loras", "sglang": "--max-loras-per-batch"}.get(engine, "--max-loras") in \
        common.flag_set(record) or engine == "trtllm"


#: A pin kvplan does not have: LoRA adapters served at once (vLLM --max-loras, SGLang --max-loras-per-batch).
TOY = Setting("pin.max_loras", Takes.QUANTITY, "LoRA adapters in one batch", dim=settings.Dim.COUNT, units="count",
              integer=True, range=settings.Range(settings.Bound(1, "at least one"), settings.Bound(64, "a toy limit")),
              engines={"vllm": Carrier("--max-loras", Read.WHOLE, Write.PIN),
                       "sglang": Carrier("--max-loras-per-batch", Read.WHOLE, Write.PIN),
                       "trtllm": Carrier(write=Write.NONE, why="kvplan writes no TensorRT-LLM LoRA setting")})


def test_adding_a_pin_takes_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "SETTINGS", (*SETTINGS, TOY))
    sc = scenario(spec("max_loras = 4\n        devices = 8", top="devices = 8"))
    assert sc.pinned.value(TOY) == 4                                             # checked and typed
    bad = check_source(spec("max_loras = 100"), "d.kvp").diagnostics            # and range-checked
    assert [d.code for d in bad] == ["KV108"] and "between 1 and 64" in str(bad[0].help)
    p = plan(sc)
    vllm = emit(p, "vllm").files[0].text
    assert "--max-loras 4" in vllm                                               # written
    assert "--max-loras-per-batch 4" in emit(p, "sglang").files[0].text
    assert any(w.endswith(": pin max_loras = 4 is not written: kvplan writes no TensorRT-LLM LoRA setting")
               for w in emit(p, "trtllm").warnings)
    command = vllm[vllm.index("vllm serve"):].replace("\\\n", " ")
    back = importer.import_deployment("vllm", command, importer.Options(device="h100-sxm")).text
    sglang = emit(p, "sglang").files[0].text
    sglang = sglang[sglang.index("python"):].replace("\\\n", " ")
    read = importer.import_deployment("sglang", sglang, importer.Options(device="h100-sxm"))
    assert dict(read.pins)["max_loras"] == "4"
    assert scenario(back).pinned.value(TOY) == 4                                 # and read back


def test_without_the_row_the_pin_is_an_unknown_key() -> None:
    # the row is all it takes: the same spec fails on the table as shipped
    found = check_source(spec("max_loras = 4"), "d.kvp").diagnostics
    assert any(d.message == "unknown key `max_loras` in pin" for d in found)



def test_trtllm_says_it_does_not_write_the_memory_fraction_and_its_advice_holds_the_pin() -> None:
    # TensorRT-LLM's free_gpu_memory_fraction is of the memory free after the weights, not of total memory: the
    # row's carrier says it is not written (never dropped silently), and the way out it names, --sizing exact,
    # writes a pool that keeps weights + KV within the pinned share of the device
    p = plan(scenario(spec("memory_fraction = 0.8", top="engine = trtllm")))
    said = [w for w in emit(p, "trtllm").warnings if "pin memory_fraction = 0.8 is not written" in w]
    assert said and "--sizing exact" in said[0]
    exact = emit(p, "trtllm", sizing="exact")
    kv = yaml.safe_load(next(f.text for f in exact.files if f.name == "trtllm.yaml"))["kv_cache_config"]
    m = p.scenario.model
    assert kv["dtype"] == "auto" and m.n_kv % p.tp == 0 and "max_tokens" in kv   # bf16 KV, heads split evenly
    # K and V in 2 bytes, the most loaded stage's layers and this rank's KV heads; weights split over every GPU
    per_token = 2 * math.ceil(m.n_layers / p.pp) * (m.n_kv // p.tp) * m.head_dim * 2
    assert m.params * 2 / (p.tp * p.pp) + kv["max_tokens"] * per_token <= 0.8 * p.scenario.device.memory


def test_every_trtllm_carrier_is_read_from_the_table_not_by_hand() -> None:
    # TensorRT-LLM's config keys differ from its command-line names: each carrier's YAML key (and its aliases) is
    # read by the reader the row derives, and its command-line name (Carrier.cli) by the derived flag reader
    from kvplan.engines import trtllm as trt
    from kvplan.engines.flagparse import table_readers

    yaml_keys = set(trt._yaml_readers())
    cli = {n for f in table_readers("trtllm", trt.trtllm_tokens, cli=True) for n in f.names}
    for row in SETTINGS:
        c = row.engines.get("trtllm")
        if c is None or c.write is Write.NONE:
            continue
        # only the tier's host_cache_size (a byte size, not a count) and speculative_config (a mapping) have their
        # own readers
        if c.read is Read.OWN:
            assert row.path in ("pin.tier", "speculative.method"), row.path
            continue
        assert {settings.engine_flag(row, "trtllm"), *c.aliases} <= yaml_keys, row.path
        assert not c.cli or c.cli in cli, row.path
    assert cli == {"--max_batch_size", "--max_seq_len", "--tp_size", "--pp_size"}


def test_a_trtllm_yaml_key_added_as_a_row_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # a row whose TensorRT-LLM carrier names a config key is read from the YAML with no edit of trtllm.py
    from kvplan.engines import trtllm as trt

    batch = settings.row("workload.batch")
    moved = attrs.evolve(batch, engines={**batch.engines, "trtllm": attrs.evolve(
        batch.engines["trtllm"], record="", flag="scheduler_config.max_batch_size_toy", aliases=("toy_batch",))})
    monkeypatch.setattr(settings, "SETTINGS", tuple(moved if s is batch else s for s in SETTINGS))
    r = trt.read("toy_batch: 48\nmax_seq_len: 4096\n", ".", "t.yaml")
    assert r.batch == (48, "toy_batch: 48") and r.context == (4096, "max_seq_len: 4096")
