"""The engines' facts are one catalog record each (kvplan.catalog.engines), and each engine module both
writes its configuration and reads it back.

- every list of engines (the checker's `engine = ...` words, `kvplan import --from`, emit's default
  targets, the importer's readers) is derived from the records, and the targets' capability tables are
  the records themselves;
- per engine: a plan emitted, then imported, gives back the plan's pins (emit -> import -> same pins);
- a toy engine registered as one record plus one module (the two documented hooks, docs/architecture.md)
  is accepted by `engine = toy`, the planner, `kvplan emit --target toy` and `kvplan import --from toy`.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvplan.catalog.engines import ENGINES, Engine, Flags, concrete, engine_ids
from kvplan.cli import main
from kvplan.engines import TARGETS, common, default_targets, emit, importer
from kvplan.engines.common import EmitRequest, Emitted, EmittedFile
from kvplan.engines.flagparse import Read, ReadFlag, bounded, model_flag, parse_flags, split_command, store
from kvplan.lang import check_source
from kvplan.planner import plans_for
from kvplan.planner.plan import Plan

ENGINE_IDS = ("vllm", "sglang", "trtllm")
#: The file each engine target writes that `kvplan import --from` reads back.
CONFIG = {"vllm": "vllm.sh", "sglang": "sglang.sh", "trtllm": "trtllm.yaml"}


def spec(engine: str, kv: str, block: int, prefix: str, devices: int = 2) -> str:
    return f"""kvplan 1

deployment "rt" {{
    model = llama-3-8b
    device = h100-sxm
    devices = {devices}
    engine = {engine}

    workload {{
        batch = 16
        context = 8k
    }}

    quality {{
        budget = aggressive
    }}

    pin {{
        kv_dtype = {kv}
        block_size = {block}
        prefix_caching = {prefix}
    }}
}}
"""


def one_plan(text: str) -> Plan:
    result = check_source(text, "rt.kvp")
    assert result.ok, [f"{d.code} {d.message}" for d in result.diagnostics]
    (p,) = plans_for(result)
    return p


# ------------------------------------------------------------ derived from the records

def test_every_list_of_engines_is_the_records() -> None:
    assert engine_ids() == tuple(ENGINES) == ("any", *ENGINE_IDS)
    assert concrete() == ENGINE_IDS
    assert tuple(importer.readers()) == ENGINE_IDS
    for e in ENGINE_IDS:
        assert default_targets(e) == (e,)
    assert default_targets("any") == tuple(t for t in TARGETS if t != "k8s")  # k8s only when named


@pytest.mark.parametrize("engine", ENGINE_IDS)
def test_the_target_capabilities_are_the_record(engine: str) -> None:
    b, e = TARGETS[engine], ENGINES[engine]
    assert b.kv_dtypes is e.kv_names
    assert (b.id, b.engine, b.version, b.block_sizes, b.default_block, b.tiers, b.eviction) == \
        (e.id, e.name, e.version, e.block_sizes, e.default_block, e.tiers, e.eviction)
    assert b.read is not None
    assert e.default_block in e.block_sizes


@pytest.mark.parametrize("engine", ENGINE_IDS)
def test_every_name_emit_writes_reads_back_as_the_same_dtype(engine: str) -> None:
    """kv_names (what emit writes) and kv_reads (what import reads) are one record: every written name is
    read back as the dtype it was written for, except `auto`, which is the checkpoint's dtype."""
    e = ENGINES[engine]
    for dtype, name in e.kv_names.items():
        assert name in e.kv_reads, (dtype, name)
        if name != "auto":
            assert e.kv_reads[name][0] == dtype, (dtype, name)


@pytest.mark.parametrize("word,engine", [("trt-llm", "trtllm"), ("tensorrt", "trtllm"), ("sg-lang", "sglang")])
def test_an_alias_in_the_record_is_suggested(word: str, engine: str) -> None:
    result = check_source(spec(word, "fp8", 32, "on"), "rt.kvp")
    (d,) = result.diagnostics
    assert (d.code, d.help) == ("KV110", f"did you mean `{engine}`?")
    assert [e.text for f in d.fixes for e in f.edits] == [engine]


# ------------------------------------------------------------ round trip per engine

def _config_text(out: Emitted, engine: str) -> str:
    return {f.name: f.text for f in out.files}[CONFIG[engine]]


def _import(engine: str, text: str) -> importer.Imported:
    if engine != "trtllm":  # the script's last line is the engine's command
        words = shlex.split(text.replace("\\\n", " "), comments=True)
        text = shlex.join(words)
    return importer.import_deployment(engine, text, importer.Options(model="llama-3-8b", device="h100-sxm",
                                                                     batch=16))


def _round_trip_cases() -> list[tuple[str, str, int, str]]:
    cases = []
    for engine in ENGINE_IDS:
        e = ENGINES[engine]
        for kv, name in e.kv_names.items():
            if name == "auto":  # the checkpoint's dtype: not the plan's name for it
                continue
            for block, prefix in ((32, "off"), (64, "on")):
                cases.append((engine, kv, block, prefix))
    return cases


@pytest.mark.parametrize("engine,kv,block,prefix", _round_trip_cases())
def test_emit_then_import_gives_back_the_plans_pins(engine: str, kv: str, block: int, prefix: str) -> None:
    p = one_plan(spec(engine, kv, block, prefix))
    assert (p.kv_dtype.id, p.block_size, p.prefix_caching) == (kv, block, prefix == "on")
    out = emit(p, engine, spec="rt.kvp")
    assert not [f for f in out.findings if "→" in f], out.findings   # nothing was mapped to another setting
    pins = dict(_import(engine, _config_text(out, engine)).pins)
    assert pins["kv_dtype"] == p.kv_dtype.id
    assert pins["block_size"] == str(p.block_size)
    assert pins["prefix_caching"] == ("on" if p.prefix_caching else "off")
    assert pins["devices"] == str(p.n_devices)
    assert "tier" not in pins and p.tier.tier == "none"


# ------------------------------------------------------------ a toy engine: one record + one module

TOY = Engine("toy", "Toy", "0.1", "Toy 0.1", {"bf16": "b16", "int8": "i8"}, False, 48, (48,), True, False,
             "tests/test_engine_records.py: a made-up engine", pipeline=False,
             kv_reads={"b16": ("bf16", ""), "i8": ("int8", "")},
             flags=Flags("--kv", "--page", "--seqs", "--ctx", "--tp", "--pp"), aliases=("plaything",))


def toy_render(req: EmitRequest) -> Emitted:
    """toy.sh: `toy serve MODEL --kv NAME --page N --seqs B --ctx C --tp T`."""
    p = req.plan
    mapped = common.map_choices(p, TOY_BACKEND)
    flags = [(TOY.flags.kv_dtype, mapped.dtype_name), (TOY.flags.block, str(mapped.block)),
             (TOY.flags.batch, str(p.scenario.batch)), (TOY.flags.context, str(p.scenario.context)),
             (TOY.flags.tp, str(p.tp))]
    text = "toy serve " + common.model_ref(p) + "".join(f" {k} {v}" for k, v in flags) + "\n"
    return Emitted(TOY_BACKEND.id, (EmittedFile("toy.sh", text),), ())


def toy_read(text: str, base_dir: str = ".", where: str = "config") -> Read:
    words = split_command(text)[2:]
    r = Read(TOY.id)
    table = [ReadFlag(("--model",), True, model_flag),
             ReadFlag((TOY.flags.kv_dtype,), True, lambda r, v, w: setattr(r, "kv_dtype", (TOY.kv_reads[v][0], w))),
             ReadFlag((TOY.flags.block,), True, store("block_size", bounded("block_size"))),
             ReadFlag((TOY.flags.batch,), True, store("batch", bounded("batch"))),
             ReadFlag((TOY.flags.context,), True, store("context", bounded("context"))),
             ReadFlag((TOY.flags.tp,), True, store("tp", bounded("tp")))]

    def positional(w: str) -> None:
        r.model_ref = w

    parse_flags(words, table, r, frozenset(), frozenset(), lambda f: f, positional)
    r.defaults("Toy shares prefixes by default", TOY.default_block, "Toy's default --page", "Toy's default")
    return r


TOY_BACKEND = common.engine_backend(TOY, flags=("--kv", "--page", "--seqs", "--ctx", "--tp"),
                                    source="tests/test_engine_records.py", build=toy_render, read=toy_read)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two hooks docs/architecture.md names: the catalog record and the target's module."""
    monkeypatch.setitem(ENGINES, TOY.id, TOY)
    monkeypatch.setitem(TARGETS, TOY_BACKEND.id, TOY_BACKEND)


TOY_SPEC = spec("toy", "int8", 48, "on", devices=1).replace("        block_size = 48\n", "")


def test_a_toy_engines_alias_is_suggested_by_meaning(toy: None) -> None:
    """`plaything` is nothing like `toy` in spelling: only the record's aliases can suggest it."""
    (d,) = check_source(TOY_SPEC.replace("engine = toy", "engine = plaything"), "toy.kvp").diagnostics
    assert (d.code, d.help) == ("KV110", "did you mean `toy`?")


def test_a_toy_engine_is_refused_before_it_is_registered() -> None:
    result = check_source(TOY_SPEC, "toy.kvp")
    assert not result.ok and any("toy" in d.message for d in result.diagnostics)


def test_a_toy_engine_is_one_record_and_one_module(toy: None, tmp_path: Path) -> None:
    # the language
    result = check_source(TOY_SPEC, "toy.kvp")
    assert result.ok, [f"{d.code} {d.message}" for d in result.diagnostics]
    assert result.scenarios[0].engine == "toy"
    # the planner: the record's only page size, its default, is what it plans with
    (p,) = plans_for(result)
    assert p.block_size == 48 and p.kv_dtype.id == "int8"
    # an unpinned dtype stays among the record's
    (q,) = plans_for(check_source(TOY_SPEC.replace("        kv_dtype = int8\n", ""), "toy.kvp"))
    assert q.kv_dtype.id in TOY.kv_dtypes
    # emit, by the spec's engine and by --target
    assert default_targets("toy") == ("toy",)
    spec_file = tmp_path / "toy.kvp"
    spec_file.write_text(TOY_SPEC, encoding="utf-8")
    for args in ([], ["--target", "toy"]):
        r = CliRunner().invoke(main, ["emit", str(spec_file), *args])
        assert r.exit_code == 0, r.output
        assert "toy serve meta-llama/" in r.output and "--kv i8 --page 48 --seqs 16 --ctx 8000 --tp 1" in r.output
    # and back: kvplan import --from toy
    out = emit(p, "toy", spec="toy.kvp")
    r = CliRunner().invoke(main, ["import", "--from", "toy", "--device", "h100-sxm", out.files[0].text])
    assert r.exit_code == 0, r.output
    assert re.search(r"engine += toy", r.output)
    imported = check_source(r.output, "imported.kvp")
    assert imported.ok, [f"{d.code} {d.message}" for d in imported.diagnostics]
    pins = {k: pin.value for k, pin in imported.scenarios[0].pins.items()}
    assert pins["kv_dtype"] == "int8" and pins["block_size"] == 48
