"""The plan digest covers every input that changes the plan, and nothing that does not.

`lint --check-digest` (KV401) compares the digest in each emitted file's header with the digest of
the plan the spec gives now, so a digest that misses an input passes stale configs, and one that
sees more than the plan reports stale configs that are not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

import attrs
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plans_for
from kvplan.render.plan_view import json_text
from tests.paths import ROOT

# ------------------------------------------------------------------ a spec with every field written out

#: The base value of every spec field the planner reads, and values to change each to.
FIELDS: dict[str, tuple[str, ...]] = {
    "model": ("llama-3-70b", "llama-3-8b", "qwen3-8b", "gemma-2-9b", "mixtral-8x7b"),
    "device": ("b200", "h100-sxm", "h200", "mi300x", "b200-hgx"),
    "devices": ("auto", "1", "4", "8", "<= 8", "<= 35"),
    "placement": ("auto", "striped", "affinity"),
    "engine": ("any", "vllm", "sglang", "trtllm"),
    "weights": ("bf16", "fp8"),
    "batch": ("32", "1", "8", "102"),
    "context": ("32k", "8k", "128k", "1451618"),
    "prefix": ("1k", "0", "4k"),
    "fanout": ("4", "1", "16"),
    "reuse": ("0%", "30%", "60%"),
    "budget": ("near-lossless", "lossless", "moderate", "aggressive"),
    "eviction": ("forbidden", "allowed"),
    "min_retention": ("0.5", "0.75"),
    "step_time": ("none", "20 ms", "50 ms", "2 ms"),
    "throughput": ("none", "500 tok/s", "20000 tok/s"),
    "objective": ("fewest-devices", "fastest", "most-headroom"),
}
#: The planner's overrides (CLI options): each is an input of the plan too.
OVERRIDES: dict[str, tuple[Optional[float], ...]] = {
    "reserve": (None, 0.1, 0.3),
    "min_gain": (None, 1.3, 3.0),
    "eta": (None, 0.5),
    "activation_reserve": (None, 20e9),
    "runtime_reserve": (None, 4 * 2**30, 60e9),
}
BASE = {k: v[0] for k, v in FIELDS.items()}


def spec_text(f: dict[str, str], pins: str = "") -> str:
    slo = "".join(f"        {k} {op} {f[k]}\n" for k, op in (("step_time", "<="), ("throughput", ">="))
                  if f[k] != "none")
    return f"""kvplan 1

deployment "d" {{
    model     = {f['model']}
    weights   = {f['weights']}
    device    = {f['device']}
    devices   = {f['devices']}
    placement = {f['placement']}
    engine    = {f['engine']}

    workload {{
        batch   = {f['batch']}
        context = {f['context']}
        prefix  = {f['prefix']}
        fanout  = {f['fanout']}
        reuse   = {f['reuse']}
    }}

    quality {{
        budget        = {f['budget']}
        eviction      = {f['eviction']}
        min_retention = {f['min_retention']}
    }}
{('    slo {' + chr(10) + slo + '    }' + chr(10)) if slo else ''}
    objective = {f['objective']}
{pins}}}
"""


def plan_or_none(text: str, **overrides: Optional[float]) -> Any:
    r = check_source(text, "d.kvp")
    if any(d.severity.name == "ERROR" for d in r.diagnostics):
        return None
    (p,) = plans_for(r, None, **{k: v for k, v in overrides.items() if v is not None})
    return p


_PROSE = {"name", "source", "note", "confidence", "aliases"}


def what_the_plan_is(p: Any) -> Any:
    """The plan by its full JSON (`kvplan advise --format json`), less what explains a choice without
    being one: rationale text, options turned down, which choices were pinned, the candidate count,
    value sources (wording), and the spec's and scenario's names; plus the catalog records it was
    made from. Written here independently of Plan.canonical."""
    j = json.loads(json_text([p]))["plans"][0]

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            if {"value", "unit", "evidence", "source"} <= x.keys():
                return [x["value"], x["unit"], x["evidence"]]
            return {k: strip(v) for k, v in x.items()}
        if isinstance(x, list):
            return [strip(v) for v in x]
        if isinstance(x, float):
            return float(f"{x:.12g}")
        return x

    for k in ("digest", "candidates_evaluated", "scenario", "deployment"):
        j.pop(k)
    j["decisions"] = [{"domain": d["domain"], "choice": d["choice"], "numbers": d["numbers"],
                       "evidence": [[e["value"], e["unit"], e["source"]] for e in d["evidence"]],
                       "reported_text": d["reported_text"]} for d in j["decisions"]]
    j["unmet"] = [{"constraint": u["constraint"], "shortfall": u["shortfall"]} for u in j["unmet"]]
    sc = p.scenario
    records = {name: {k: v for k, v in attrs.asdict(rec, recurse=False).items() if k not in _PROSE}
               for name, rec in (("model", sc.model), ("device", sc.device))}
    return strip(j), repr(records)


def check_pair(a: dict[str, str], b: dict[str, str], oa: dict[str, Any], ob: dict[str, Any]) -> Optional[bool]:
    """Plan both; the digest differs exactly when the plan does. None when either spec is invalid."""
    pa, pb = plan_or_none(spec_text(a), **oa), plan_or_none(spec_text(b), **ob)
    if pa is None or pb is None:
        return None
    changed = bool(what_the_plan_is(pa) != what_the_plan_is(pb))
    assert (pa.digest != pb.digest) == changed, (a, b, oa, ob)
    return changed


#: Eviction matters only where the budget admits it and the cache is large enough to want it.
FIELD_BASES: dict[str, dict[str, str]] = {
    "eviction": {"budget": "moderate", "context": "128k", "batch": "102", "devices": "<= 8"},
    "min_retention": {"budget": "moderate", "context": "128k", "batch": "102", "devices": "<= 8",
                      "eviction": "allowed"},
}


@pytest.mark.parametrize("field", list(FIELDS))
def test_changing_each_spec_field_changes_the_digest_exactly_when_the_plan_changes(field: str) -> None:
    seen_change = False
    base = {**BASE, **FIELD_BASES.get(field, {})}
    for value in FIELDS[field]:
        changed = check_pair(base, {**base, field: value}, {}, {})
        seen_change = seen_change or bool(changed)
    # every field can change this plan, and then the digest does (the test cannot pass vacuously)
    assert seen_change, field


@pytest.mark.parametrize("name", list(OVERRIDES))
def test_each_override_changes_the_digest_exactly_when_the_plan_changes(name: str) -> None:
    base = {**BASE, "reuse": "60%", "devices": "<= 8", "budget": "aggressive", "eviction": "allowed"}
    seen_change = False
    for value in OVERRIDES[name][1:]:
        changed = check_pair(base, base, {}, {name: value})
        seen_change = seen_change or bool(changed)
    assert seen_change, name


field_values = st.fixed_dictionaries({k: st.sampled_from(v) for k, v in FIELDS.items()})


@settings(max_examples=100, deadline=None, derandomize=True)
@given(base=field_values, field=st.sampled_from(list(FIELDS)), data=st.data())
def test_digest_tracks_the_plan_from_any_base(base: dict[str, str], field: str, data: Any) -> None:
    value = data.draw(st.sampled_from(FIELDS[field]))
    over = data.draw(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in OVERRIDES.items()}))
    check_pair(base, {**base, field: value}, over, over)


def test_catalog_records_are_inputs_of_the_digest() -> None:
    """A catalog entry the plan uses (device, model, link) changing changes the digest."""
    p = plan_or_none(spec_text({**BASE, "reuse": "60%"}))
    assert p is not None and p.tier.link is not None
    sc = p.scenario
    from kvplan.planner import plan

    faster = attrs.evolve(sc, device=attrs.evolve(sc.device, sm_count=(sc.device.sm_count or 100) + 8))
    assert plan(faster).digest != p.digest  # FlashInfer's split sizes depend on it
    renamed = attrs.evolve(sc, device=attrs.evolve(sc.device, note="edited"), model=attrs.evolve(sc.model, source="x"))
    assert plan(renamed).digest == p.digest  # prose is not an input


# ------------------------------------------------------------------ lint --check-digest regressions

PREFIX_SPEC = """kvplan 1

deployment "chat" {
    model   = llama-3-70b
    device  = b200
    devices = 8
    engine  = vllm

    workload {
        batch   = 32
        context = 128k
        fanout  = 8
    }

    quality {
        budget = lossless
    }

    expect {
        regime == kv-bound
    }
}
"""


def emit_then(tmp_path: Path, text: str, *extra: str) -> Path:
    spec = tmp_path / "s.kvp"
    spec.write_text(text)
    r = CliRunner().invoke(main, ["emit", str(spec), "-o", str(tmp_path / "s.kvplan"), *extra])
    assert r.exit_code in (0, 1), r.output
    return spec


def check_digest(spec: Path) -> Any:
    return CliRunner().invoke(main, ["lint", "--check-digest", str(spec)])


def test_adding_a_prefix_makes_the_emitted_config_stale(tmp_path: Path) -> None:
    """The prefix changes σ and so the KV bytes the config is sized for, not the choices: a digest
    of the choices alone passed the stale vllm.sh."""
    spec = emit_then(tmp_path, PREFIX_SPEC)
    assert "KV401" not in check_digest(spec).stdout
    spec.write_text(PREFIX_SPEC.replace("fanout  = 8", "fanout  = 8\n        prefix  = 96k"))
    r = check_digest(spec)
    assert r.exit_code == 1 and "KV401" in r.stdout and "vllm.sh" in r.stdout


def advised_pins(p: Any) -> str:
    return ("    pin {\n" + "".join(f"        {x}\n" for x in (
        f"kv_dtype       = {p.kv_dtype.id}", f"retention      = {p.retention:g}", f"block_size     = {p.block_size}",
        f"prefix_caching = {'on' if p.prefix_caching else 'off'}", f"tier           = {p.tier.tier}",
        f"placement      = {p.placement}", f"devices        = {p.n_devices}")) + "    }\n")


SINGLE = ["examples/w1-batch1.kvp", "examples/w2-batch32.kvp", "examples/w3-shared-prefix.kvp",
          "examples/w4-reuse.kvp",
          *sorted(f"tests/data/emit/{f.name}" for f in (ROOT / "tests/data/emit").glob("*.kvp"))]


@pytest.mark.parametrize("example", SINGLE)
def test_pinning_every_advised_choice_keeps_the_digest(example: str, tmp_path: Path) -> None:
    """advise → pin every advised choice → the same digest, and no KV401 for the configs emitted
    before (a pinned `tier = none` gave tier bytes 0 where the plan had none)."""
    text = (ROOT / example).read_text()
    spec = emit_then(tmp_path, text)
    (p0,) = plans_for(check_source(text, str(spec)))
    text = re.sub(r"\n\s*pin \{[^}]*\}\n", "\n", text)
    i = text.rindex("}")
    pinned = text[:i] + advised_pins(p0) + text[i:]
    spec.write_text(pinned)
    after = plans_for(check_source(pinned, str(spec)))[0]
    assert after.digest == p0.digest
    r = check_digest(spec)
    assert "KV401" not in r.stdout, r.stdout


def test_emit_overrides_are_in_the_header_and_checked_with_the_same_overrides(tmp_path: Path) -> None:
    spec = emit_then(tmp_path, PREFIX_SPEC, "--runtime-reserve", "4GiB")
    (script,) = (tmp_path / "s.kvplan").rglob("vllm.sh")
    assert re.search(r"· overrides runtime_reserve=4294967296 · vLLM", script.read_text())
    assert "KV401" not in check_digest(spec).stdout  # planned again with the header's reserve
    plain = plans_for(check_source(PREFIX_SPEC, str(spec)))[0]
    assert plain.digest not in script.read_text()  # the reserve is an input of the plan
    spec.write_text(PREFIX_SPEC.replace("batch   = 32", "batch   = 16"))
    assert "KV401" in check_digest(spec).stdout
