"""--calibration on a spec with `engine = any` (issue 22, item 4): each engine's line takes that engine's fit
and says so; a profile that matches nothing in the spec stops the command (exit 2) with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import DATA

GOOD = DATA / "profiles" / "h100-vllm.toml"  # one fit: h100-sxm/vllm, t_fixed 1.2 ms

SPEC = """deployment "d" {{
    model   = llama-3-8b
    device  = {device}
    devices = 1

    workload {{
        batch   = 8
        context = 4k
    }}
}}
"""


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _spec(tmp_path: Path, device: str) -> str:
    path = tmp_path / "d.kvp"
    path.write_text(SPEC.format(device=device), encoding="utf-8")
    return str(path)


def test_engine_any_gives_each_engine_its_own_fit(tmp_path: Path) -> None:
    r = run("advise", _spec(tmp_path, "h100"), "--format", "json", "--calibration", str(GOOD))
    assert r.exit_code in (0, 1), r.output
    (p,) = json.loads(r.stdout)["plans"]
    engines = {q["engine"]: q for q in p["engines"]}
    vllm = engines["vllm"]["metrics"]["step_time_expected"]["source"]
    assert "calibration h100-vllm [fit h100-sxm/vllm]" in vllm
    assert "t_fixed = 1.2 ms derived" in vllm
    for name in set(engines) - {"vllm"}:  # no fit of theirs: the defaults, and no calibration named
        assert "calibration" not in engines[name]["metrics"]["step_time_expected"]["source"], name
    # the spec's own line (engine any) has no fit of its own and says whose the profile holds
    assert "its fits vllm calibrate those engines' lines" in p["expected_factors"]["t_fixed"]["source"]


def test_a_profile_that_matches_nothing_in_the_spec_is_exit_2(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "b200")
    for cmd in ("advise", "lint"):
        r = run(cmd, spec, "--calibration", str(GOOD))
        assert r.exit_code == 2, (cmd, r.output)
        err = r.stderr.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in r.output
        assert "holds h100-sxm/vllm" in err and "asks for b200 (engine any)" in err, err


def test_the_text_says_which_fit_each_engines_line_used(tmp_path: Path) -> None:
    r = run("advise", _spec(tmp_path, "h100"), "--calibration", str(GOOD))
    assert r.exit_code in (0, 1), r.output
    lines = " ".join(r.stdout.split())  # the text wraps
    assert "(derived, calibration h100-vllm [fit h100-sxm/vllm])" in lines
    assert f"(derived, no fit in {GOOD} for h100-sxm (engine sglang): kvplan's default factors)" in lines


def test_a_sweep_takes_the_fit_of_its_engine_or_stops(tmp_path: Path) -> None:
    """A sweep's rows are one engine's: from flags (engine any) the vllm-only profile matches nothing, exit 2;
    a spec whose deployment names vllm takes its fit."""
    r = run("sweep", "--model", "llama-3-8b", "--device", "h100-sxm", "--calibration", str(GOOD))
    assert r.exit_code == 2 and "holds h100-sxm/vllm" in r.stderr and "h100-sxm (engine any)" in r.stderr, r.output
    spec = tmp_path / "v.kvp"
    spec.write_text(SPEC.format(device="h100").replace("devices = 1", "devices = 1\n    engine  = vllm"),
                    encoding="utf-8")
    r = run("sweep", str(spec), "--calibration", str(GOOD))
    assert r.exit_code == 0, r.output
