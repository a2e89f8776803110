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

import shlex

import pytest

from kvplan.app import importer
from kvplan.app.replan import emit
from kvplan.catalog import devices, get_model
from kvplan.catalog.engines import ENGINES, Engine, Flags, concrete, engine_ids, kv_refusal
from kvplan.engines import TARGETS, common, default_targets
from kvplan.engines.common import EmitRequest, Emitted, EmittedFile
from kvplan.engines.flagparse import Read, ReadFlag, bounded, model_flag, parse_flags, split_command, store
from kvplan.lang import check_source
from kvplan.planner import plans_for
from kvplan.planner.plan import Plan
from tests.unit.catalog.test_engine_records import ENGINE_IDS
from tests.unit.lang.test_engine_records import TOY_SPEC, spec

#: The file each engine target writes that `kvplan import --from` reads back.
CONFIG = {"vllm": "vllm.sh", "sglang": "sglang.sh", "trtllm": "trtllm.yaml"}


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


# ------------------------------------------------------------ round trip per engine

def _config_text(out: Emitted, engine: str) -> str:
    return {f.name: f.text for f in out.files}[CONFIG[engine]]


def _import(engine: str, text: str, device: str = "h100-sxm") -> importer.Imported:
    if engine != "trtllm":  # the script's last line is the engine's command
        words = shlex.split(text.replace("\\\n", " "), comments=True)
        text = shlex.join(words)
    return importer.import_deployment(engine, text, importer.Options(model="llama-3-8b", device=device,
                                                                     batch=16))


def _device(kv: str) -> str:
    """A device that stores `kv`: FP4 KV needs FP4 formats in hardware (kvplan.catalog.engines.kv_refusal)."""
    return "b200" if kv == "fp4" else "h100-sxm"


def _round_trip_cases() -> list[tuple[str, str, int, str]]:
    cases = []
    for engine in ENGINE_IDS:
        e = ENGINES[engine]
        for kv, name in e.kv_names.items():
            if name == "auto":  # the checkpoint's dtype: not the plan's name for it
                continue
            if kv_refusal(e, kv, devices()["h100-sxm"], get_model("llama-3-8b")):  # refused on an H100 (nvfp4)
                continue
            for block, prefix in ((32, "off"), (64, "on")):
                cases.append((engine, kv, block, prefix))
    return cases


@pytest.mark.parametrize("engine,kv,block,prefix", _round_trip_cases())
def test_emit_then_import_gives_back_the_plans_pins(engine: str, kv: str, block: int, prefix: str) -> None:
    p = one_plan(spec(engine, kv, block, prefix).replace("h100-sxm", _device(kv)))
    assert (p.kv_dtype.id, p.block_size, p.prefix_caching) == (kv, block, prefix == "on")
    out = emit(p, engine, spec="rt.kvp")
    assert not [f for f in out.findings if "→" in f], out.findings   # nothing was mapped to another setting
    pins = dict(_import(engine, _config_text(out, engine), _device(kv)).pins)
    assert pins["kv_dtype"] == p.kv_dtype.id
    assert pins["block_size"] == str(p.block_size)
    assert pins["prefix_caching"] == ("on" if p.prefix_caching else "off")
    assert pins["devices"] == str(p.n_devices)
    assert "tier" not in pins and p.tier.tier == "none"


# ------------------------------------------------------------ a toy engine: one record + one module

TOY = Engine("toy", "Toy", "0.1", "Toy 0.1", {"bf16": "b16", "int8": "i8"}, False, 48, (48,), True, False,
             "tests/unit/app/test_engine_records.py: a made-up engine", pipeline=False,
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


TOY_BACKEND = common.engine_backend(TOY, source="tests/unit/app/test_engine_records.py", build=toy_render,
                                    read=toy_read)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two hooks docs/architecture.md names: the catalog record and the target's module."""
    monkeypatch.setitem(ENGINES, TOY.id, TOY)
    monkeypatch.setitem(TARGETS, TOY_BACKEND.id, TOY_BACKEND)


def test_a_toy_engines_alias_is_suggested_by_meaning(toy: None) -> None:
    """`plaything` is nothing like `toy` in spelling: only the record's aliases can suggest it."""
    (d,) = check_source(TOY_SPEC.replace("engine = toy", "engine = plaything"), "toy.kvp").diagnostics
    assert (d.code, d.help) == ("KV110", "did you mean `toy`?")
