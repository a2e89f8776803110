"""The plan digest covers every input that changes the plan, and nothing that does not.

`lint --check-digest` (KV401) compares the digest in each emitted file's header with the digest of
the plan the spec gives now, so a digest that misses an input passes stale configs, and one that
sees more than the plan reports stale configs that are not.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from kvplan.lang import check_source
from kvplan.planner import plans_for
from tests.paths import ROOT

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
    # The files of the spec's plan stay current. A target written from another engine's own plan
    # (`# planned for`, kvplan/engines/replan.py) may not: the pins now bind that plan too (SGLang's
    # default 1-token pages become the pinned 16), so emit would write it anew.
    stale = re.findall(r"KV401 (\S+) ", r.stdout)
    assert all("# planned for " in Path(f).read_text() for f in stale), r.stdout


def test_emit_overrides_are_in_the_header_and_checked_with_the_same_overrides(tmp_path: Path) -> None:
    spec = emit_then(tmp_path, PREFIX_SPEC, "--runtime-reserve", "4GiB")
    (script,) = (tmp_path / "s.kvplan").rglob("vllm.sh")
    assert re.search(r"· overrides runtime_reserve=4294967296 · vLLM", script.read_text())
    assert "KV401" not in check_digest(spec).stdout  # planned again with the header's reserve
    plain = plans_for(check_source(PREFIX_SPEC, str(spec)))[0]
    assert plain.digest not in script.read_text()  # the reserve is an input of the plan
    spec.write_text(PREFIX_SPEC.replace("batch   = 32", "batch   = 16"))
    assert "KV401" in check_digest(spec).stdout


def test_check_digest_plans_without_searching_suggestions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A digest covers what is unmet, not the changes that would meet it: lint --check-digest planned every
    scenario (and each engine's plan of a stale one) with its full suggestion search, outside lint's budget."""
    import kvplan.planner as planner
    from kvplan.engines.digest import check_digests
    from tests.unit.planner.test_suggestions import _unfit_list

    spec = tmp_path / "unfit.kvp"
    spec.write_text(_unfit_list(3, 4))
    result = check_source(spec.read_text(), str(spec))
    first = result.scenarios[0].name
    (tmp_path / "unfit.kvplan").mkdir()
    (tmp_path / "unfit.kvplan" / "vllm.sh").write_text(
        f"# kvplan 0.1 · spec unfit.kvp · scenario {first} · plan sha256:0123456789abcdef · vllm\n")
    searched: list[str] = []
    real = planner._replan  # what plans a changed scenario to verify a suggestion

    def counted(sc: Any, *args: Any) -> Any:
        searched.append(sc.name)
        return real(sc, *args)

    monkeypatch.setattr(planner, "_replan", counted)
    (stale,) = check_digests(result)
    assert stale.code == "KV401" and not searched
