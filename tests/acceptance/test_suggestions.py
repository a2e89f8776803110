"""Every suggestion kvplan prints that names a concrete change works: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/lang/test_suggestions.py,
tests/unit/planner/test_suggestions.py; tests/unit/planner/test_suggestions.py says what they check.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.planner.test_suggestions import WL, _dep, _helps, _unfit_list, _verifying_plans


def test_a_dtype_suggestion_keeps_the_bit_width(tmp_path: Path) -> None:
    """On main `kvplan map --kv-dtype int3` said "did you mean 'int8'?"."""
    from click.testing import CliRunner

    from kvplan.cli import main

    for args in (["map", "--model", "llama-3-8b", "--device", "h100-sxm", "--kv-dtype", "int3"],
                 ["sweep", "--model", "llama-3-8b", "--device", "h100-sxm", "--kv-dtype", "bf16,fp9"],
                 ["map", "--model", "llama-3-8b", "--device", "h100-sxm", "--weights", "int3"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and "did you mean" not in r.stderr, r.stderr
        assert "known: fp32, bf16, fp16, fp8, int8, int4, fp4, int2" in r.stderr, r.stderr
    r = CliRunner().invoke(main, ["map", "--model", "llama-3-8b", "--device", "h100-sxm", "--kv-dtype", "imt8"])
    assert r.exit_code == 2 and "did you mean 'int8'?" in r.stderr, r.stderr
    text = _dep(WL.format(b=8, s="32k") + "\npin {\n    kv_dtype = int3\n}")
    (d,) = _helps(text, tmp_path, "KV110")
    assert "did you mean" not in (d.help or "") and not d.fixes, d.help


# ------------------------------------------------------------------ examples in help texts and docs



@pytest.mark.slow
def test_lint_of_many_unfit_scenarios_stays_within_its_budget_and_its_note_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On main lint verified every scenario's suggestions: 1,355 plans for these 150 (a file at the
    scenario cap of 1,000 took 88 s); now at most REPLANS_PER_FILE, and the rest say how to get them."""
    import json
    import shlex

    from click.testing import CliRunner

    from kvplan.cli import main
    from kvplan.planner import REPLANS_PER_FILE

    spec = tmp_path / "unfit.kvp"
    spec.write_text(_unfit_list(6, 25), encoding="utf-8")
    made = _verifying_plans(monkeypatch)
    r = CliRunner().invoke(main, ["lint", "--output-format", "json", str(spec)])
    assert r.exit_code == 1, r.output
    assert 0 < len(made) <= REPLANS_PER_FILE
    helps = [d["help"] for d in json.loads(r.stdout)["diagnostics"] if d["code"] == "KV301"]
    notes = [h for h in helps if h.startswith("no suggestion searched")]
    assert notes and len(notes) < len(helps)
    command = re.search(r"`(kvplan advise [^`]*)`", notes[-1])
    assert command is not None, notes[-1]
    out = CliRunner().invoke(main, [*shlex.split(command.group(1))[1:], str(spec)])
    assert out.exit_code == 1 and "devices = " in out.stdout, out.output
