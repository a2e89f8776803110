"""kvplan lint: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/lang/test_lint.py;
tests/unit/lang/test_lint.py says what they check.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT
from tests.unit.lang.test_lint import PROJECT, write

GOLDEN = ROOT / "tests" / "data" / "golden" / "lint"


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, ["lint", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from the repository root so that paths in the output are the relative ones users see."""
    monkeypatch.chdir(ROOT)
    return ROOT


@pytest.mark.parametrize("fmt, suffix", [("concise", "txt"), ("full", "txt"), ("json", "json"),
                                         ("github", "txt"), ("sarif", "sarif")])
def test_golden_outputs(at_root: Path, golden: Any, fmt: str, suffix: str) -> None:
    r = run(PROJECT, "--output-format", fmt)
    assert r.exit_code == 1
    assert r.stderr == "3 errors, 3 warnings in 4 files (2 suppressed)\n"
    golden(GOLDEN / f"project.{fmt}.{suffix}", _stable(fmt, r.stdout))


def _stable(fmt: str, out: str) -> str:
    """SARIF lists every registered rule; the golden keeps the results, which this project decides.
    (The rules and each result's ruleIndex are checked against the registry in test_render_diagnostics.)"""
    if fmt != "sarif":
        return out
    log = json.loads(out)
    driver = log["runs"][0]["tool"]["driver"]
    assert [r["id"] for r in driver["rules"]] == sorted(r["id"] for r in driver["rules"])
    driver["rules"] = "(every registered code)"
    for res in log["runs"][0]["results"]:
        del res["ruleIndex"]
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


INVALID_SAMPLE = ["tests/data/invalid/unknown-model.kvp", "tests/data/invalid/unclosed-string.kvp",
                  "tests/data/invalid/not-utf8.kvp"]


@pytest.mark.parametrize("fmt, suffix", [("concise", "txt"), ("full", "txt"), ("json", "json"),
                                         ("github", "txt"), ("sarif", "sarif")])
def test_golden_outputs_of_invalid_fixtures(at_root: Path, golden: Any, fmt: str, suffix: str) -> None:
    r = run(*INVALID_SAMPLE, "--output-format", fmt)
    assert r.exit_code == 1 and r.stderr == "3 errors in 3 files\n"
    golden(GOLDEN / f"invalid.{fmt}.{suffix}", _stable(fmt, r.stdout))


def test_every_format_reports_the_same_findings(at_root: Path) -> None:
    concise = [ln.split(" ")[:2] for ln in run(PROJECT).stdout.splitlines()]
    doc = json.loads(run(PROJECT, "--output-format", "json").stdout)
    as_json = [[f"{d['path']}:{d['range']['start']['line']}:{d['range']['start']['column']}:", d["code"]]
               for d in doc["diagnostics"]]
    log = json.loads(run(PROJECT, "--output-format", "sarif").stdout)
    as_sarif = [[f"{r['locations'][0]['physicalLocation']['artifactLocation']['uri']}:"
                 f"{r['locations'][0]['physicalLocation']['region']['startLine']}:"
                 f"{r['locations'][0]['physicalLocation']['region']['startColumn']}:", r["ruleId"]]
                for r in log["runs"][0]["results"]]
    github = run(PROJECT, "--output-format", "github").stdout.splitlines()
    full = [ln for ln in run(PROJECT, "--output-format", "full").stdout.splitlines()
            if re.match(r"\S+:\d+:\d+: KV\d{3} \[", ln)]
    assert concise == as_json == as_sarif
    assert len(github) == len(full) == len(concise) == doc["summary"]["errors"] + doc["summary"]["warnings"]


def test_sarif_of_the_project_validates(at_root: Path) -> None:
    import jsonschema

    schema = json.loads((ROOT / "tests" / "data" / "schemas" / "sarif-schema-2.1.0.json").read_text("utf-8"))
    log = json.loads(run(PROJECT, "--output-format", "sarif").stdout)
    jsonschema.Draft4Validator(schema).validate(log)
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"KV006", "KV111", "KV106", "KV901", "KV902", "KV903"}
    assert all(not r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("/")
               for r in results)


def test_exit_codes_and_streams(at_root: Path, tmp_path: Path) -> None:
    clean = run(f"{PROJECT}/clean.kvp")
    assert (clean.exit_code, clean.stdout, clean.stderr) == (0, "", "no findings in 1 file\n")
    warned = run(f"{PROJECT}/suppressed.kvp")
    assert warned.exit_code == 0 and len(warned.stdout.splitlines()) == 3   # warnings pass by default
    assert run(f"{PROJECT}/suppressed.kvp", "--fail-on", "warning").exit_code == 1
    info_only = tmp_path / "info.kvp"   # the clean spec without its `expect`: KV201, an info
    info_only.write_text(re.sub(r"    expect \{[^}]*\}\n", "", (ROOT / PROJECT / "clean.kvp").read_text("utf-8")))
    r = run(str(info_only))
    assert r.exit_code == 0 and [ln.split(" ")[1] for ln in r.stdout.splitlines()] == ["KV201"]
    assert run(str(info_only), "--fail-on", "info").exit_code == 1
    for args, message in [((), "no paths given"), (("missing.kvp",), "missing.kvp: no such file"),
                          ((PROJECT, "--select", "KV99"), "--select: no diagnostic code starts with 'KV99'"),
                          ((PROJECT, "--config", "missing.toml"), "missing.toml: no such file")]:
        r = run(*args)
        assert r.exit_code == 2 and r.stdout == "", args
        assert r.stderr.startswith(f"kvplan: error: {message}") and len(r.stderr.splitlines()) == 1, r.stderr


def test_select_and_ignore_flags(at_root: Path) -> None:
    codes_of = lambda r: sorted({ln.split(" ")[1] for ln in r.stdout.splitlines()})  # noqa: E731
    assert codes_of(run(PROJECT, "--select", "KV1")) == ["KV006", "KV106", "KV111"]   # syntax stays
    assert codes_of(run(PROJECT, "--ignore", "KV9,KV106")) == ["KV006", "KV111"]
    assert codes_of(run(PROJECT, "--select", "KV9", "--ignore", "KV90", "--select", "KV901")) == ["KV006", "KV901"]


def test_pyproject_settings_and_flags_over_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / PROJECT, tmp_path / "specs")
    write(tmp_path / "pyproject.toml", '[tool.kvplan]\nignore = ["KV9"]\nfail-on = "error"\n')
    monkeypatch.chdir(tmp_path / "specs")           # settings are found walking upward
    r = run("suppressed.kvp")
    assert (r.exit_code, r.stdout) == (0, "")       # only KV9xx findings there, all ignored
    r = run("suppressed.kvp", "--fail-on", "warning", "--select", "KV9")
    assert r.exit_code == 1 and len(r.stdout.splitlines()) == 3
    write(tmp_path / "bad.toml", "[tool.kvplan]\nselect = 3\n")
    r = run(".", "--config", str(tmp_path / "bad.toml"))
    assert r.exit_code == 2 and "select must be a list" in r.stderr


def test_a_broken_file_does_not_stop_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("broken.kvp", "meaning.kvp"):
        shutil.copy(ROOT / PROJECT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    r = run(".")
    assert r.exit_code == 1
    assert [ln.split(":")[0] for ln in r.stdout.splitlines()] == ["broken.kvp", "meaning.kvp", "meaning.kvp"]
    assert r.stderr.endswith("in 2 files\n")


# --------------------------------------------------------------------------- robustness

# The mutation fuzz of every shipped and test spec lives in tests/acceptance/test_fuzz.py.


def _lint_bytes(data: bytes, directory: Path) -> None:
    path = directory / "m.kvp"
    path.write_bytes(data)
    r = CliRunner().invoke(main, ["lint", str(path)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1, 2)
    if r.exit_code == 1:
        assert r.stdout.strip(), "exit 1 without a diagnostic"
    if r.exit_code == 2:
        assert r.stderr.startswith("kvplan: error:")


def test_a_10_mb_file_is_refused_with_a_diagnostic(tmp_path: Path) -> None:
    line = 'deployment "d" { model = llama-3-8b }\n'
    data = (line * (10_000_000 // len(line) + 1)).encode()
    _lint_bytes(data, tmp_path)
    r = CliRunner().invoke(main, ["lint", str(tmp_path / "m.kvp")])
    assert r.exit_code == 1 and r.stdout.split(" ")[1] == "KV015"
