"""`kvplan import` sizes what a deployment's flags leave open (its batch or its context) from the engine's own pool
at the setting the flags give (kvplan.model.pools, through kvplan.planner.batch.fits_at), without planning or
emitting per probe (issue 20, item 2: engines only write); and the spec it writes is the deployment the engine
runs: its plan fits, and the engine's file written from it holds it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import pytest

import kvplan.engines.common
import kvplan.planner.entry
from kvplan.app import importer
from kvplan.app.replan import emit
from kvplan.base import limits
from kvplan.catalog.engines import get_engine
from kvplan.lang import check_file, check_source
from kvplan.planner import for_engine, plan
from kvplan.planner.plan import Constraint, Plan
from tests.paths import DATA
from tests.unit.app.test_import import ROUND_TRIP

SGLANG = ("python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3.1-70B --tp 4 "
          "--mem-fraction-static 0.85 --context-length 32768")


@pytest.mark.parametrize(("engine", "command", "device"),
                         [("vllm", ROUND_TRIP, "h100-sxm"), ("sglang", SGLANG, "h200")])
def test_import_plans_a_bounded_number_of_times_and_never_emits(engine: str, command: str, device: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    planned: list[Any] = []
    real = kvplan.planner.entry.plan_batch

    def counting(*args: Any, **kwargs: Any) -> Plan:
        planned.append(args)
        return real(*args, **kwargs)

    def no_emit(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("kvplan import wrote an engine's file")

    monkeypatch.setattr(kvplan.planner.entry, "plan_batch", counting)
    monkeypatch.setattr(kvplan.engines.common, "finish", no_emit)  # every engine's writer ends in it
    out = importer.import_deployment(engine, command, importer.Options(device=device))
    assert "derived:" in out.text  # the flags left the context (vLLM) or the batch (SGLang) open
    assert len(planned) <= 1


def _fits(p: Plan) -> bool:
    return not any(u.constraint is Constraint.FITS for u in p.unmet)


def _holds(p: Plan, engine: str) -> bool:
    """kvplan's plan fits, and the engine's file written from it (at the deployment's own setting) holds it: no
    finding but TensorRT-LLM's over-nodes one, which says kvplan writes no MPI launcher, not what the pool holds."""
    return _fits(p) and not [f for f in emit(p, engine, raise_fill=False).findings if OVER_NODES not in f]


#: TensorRT-LLM's finding for a replica larger than a node (kvplan/engines/trtllm.py)
OVER_NODES = "runs across nodes under an MPI launcher"


FIXTURES = sorted((DATA / "engine-check").glob("*.kvp"))
ENGINES = ("vllm", "sglang", "trtllm")


def _without_batch(engine: str, text: str) -> str:
    """The engine's file without its batch limit (the engine record's flag), so that import derives the batch."""
    flag = get_engine(engine).flags.batch
    if flag.startswith("-"):
        out = re.sub(rf"[ \t]{re.escape(flag)}[ =]\d+", "", text)
    else:
        out = re.sub(rf"^[ \t]*{re.escape(flag)}:.*\n", "", text, flags=re.M)
    assert out != text, f"{flag} not in the {engine} file"
    return out


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_the_imported_spec_holds_what_the_emitted_config_holds(fixture: Path, engine: str, tmp_path: Path) -> None:
    """Each engine-check deployment written for `engine`, its batch limit removed, imported back: the batch import
    derives from the engine's pool is one whose plan fits and whose file (written from the imported spec, at the
    deployment's own memory setting) holds it, and one sequence more does not: what the old import probed plan
    and emit for, checked against what the pool functions answered."""
    for sc in check_file(str(fixture)).scenarios:
        p = for_engine(plan(sc, suggest=False), engine, suggest=False)
        written = emit(p, engine)
        assert not written.errors and _fits(p), (sc.name, written.errors)
        main = next(f for f in written.files if f.name.endswith((".sh", ".yaml")) and f.name != "lmcache.yaml")
        opts = importer.Options(model=sc.model.id, device=sc.device.id, source=main.name)
        got = importer.import_deployment(engine, _without_batch(engine, main.text), opts)
        result = check_source(got.text, str(tmp_path / "imported.kvp"))
        assert len(result.scenarios) == 1, [d.message for d in result.diagnostics]
        back = result.scenarios[0]
        assert "derived:" in got.text and back.batch >= 1
        assert _holds(plan(back, suggest=False), engine), (sc.name, back.batch, back.context)
        if back.batch < limits.MAX_BATCH:
            more = plan(attrs.evolve(back, batch=back.batch + 1), suggest=False)
            assert not _holds(more, engine), (sc.name, back.batch)


PINNED_SGLANG = """kvplan 1

deployment "pinned" {{
    model  = llama-3-70b
    device = h200
    engine = sglang

    workload {{
        batch   = {batch}
        context = 8k
    }}
    pin {{
        devices         = 4
        memory_fraction = 0.6
    }}
}}
"""


def _pinned(batch: int) -> Plan:
    return plan(check_source(PINNED_SGLANG.format(batch=batch), "pinned.kvp").scenarios[0], suggest=False)


def test_a_pinned_mem_fraction_static_means_the_same_in_plan_and_sglang_sh() -> None:
    """SGLang sizes its pool from --mem-fraction-static of the memory free at start-up: the largest batch the plan
    fits under pin memory_fraction = 0.6 is one sglang.sh (written at 0.6) holds, and one more is neither planned
    nor held. (The fit used to ignore the pin: the plan fitted batches the pinned pool did not hold.)"""
    lo, hi = 1, 4096
    assert _fits(_pinned(lo)) and not _fits(_pinned(hi))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _fits(_pinned(mid)) else (lo, mid)
    best = emit(_pinned(lo), "sglang")
    assert "--mem-fraction-static 0.6" in best.files[0].text
    assert not best.findings and float(dict(best.capacity)["kv_sequences"].value) >= lo
    over = emit(_pinned(hi), "sglang")
    assert over.findings and float(dict(over.capacity)["kv_sequences"].value) < hi
