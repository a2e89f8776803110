"""kvplan lint: suppressions, select/ignore, pyproject settings, paths, exit codes, robustness."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvplan.base.codes import Severity
from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.errors import ConfigError, KvplanError, Span
from kvplan.cli import main
from kvplan.lang import lint
from tests.paths import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.kvp"))
INVALID = sorted((ROOT / "tests" / "data" / "invalid").glob("*.kvp"))


def at(line: int, col: int = 5, code: str = "KV202", path: str = "s.kvp") -> Diagnostic:
    return make(code, f"{code} here", Span(path, line, col, line, col + 3))


def codes(diags: list[Diagnostic]) -> list[tuple[str, int]]:
    return sorted((d.code, d.span.line if d.span else 0) for d in diags)


# --------------------------------------------------------------------------- comments

def test_comment_scanner_skips_hash_inside_strings() -> None:
    src = 'model "a#b" {  # real\n    config = "x\\"#y"  # second\n# own line\n    s = "#"\n}'
    got = [(c.line, c.column, c.text, c.trailing) for c in lint.scan_comments(src)]
    assert got == [(1, 16, "# real", True), (2, 23, "# second", True), (3, 1, "# own line", False)]


def test_suppression_targets_its_line_or_the_next_line_with_code() -> None:
    src = (
        "a {\n"                                          # 1
        "    x = 1  # kvplan: ignore[KV202] why\n"       # 2: trailing -> 2
        "    # kvplan: ignore[KV203, KV204] because\n"   # 3: own line -> 6 (skips blank and comment)
        "\n"                                             # 4
        "    # a plain comment\n"                        # 5
        "    y = 2\n"                                    # 6
        "}\n"                                            # 7
        "# kvplan: ignore[KV202] at the end\n"           # 8: nothing follows -> None
    )
    sups = lint.find_suppressions(src)
    assert [(s.comment.line, s.target, [c for c, _ in s.codes], s.reason) for s in sups] == [
        (2, 2, ["KV202"], "why"), (3, 6, ["KV203", "KV204"], "because"), (8, None, ["KV202"], "at the end")]
    # each code's column points at the code itself
    line3 = src.split("\n")[2]
    assert [line3[col - 1: col - 1 + len(c)] for c, col in sups[1].codes] == ["KV203", "KV204"]


SUPPRESSED = (
    "deployment \"x\" {\n"                                           # 1
    "    a = 1  # kvplan: ignore[KV202] measured on our kernel\n"   # 2
    "    # kvplan: ignore[KV203,KV205] - load test passed\n"        # 3
    "    b = 2\n"                                                   # 4
    "    c = 3  # kvplan: ignore[KV202]\n"                          # 5  no reason
    "    d = 4  # kvplan: ignore[KV999] typo\n"                     # 6  unknown code
    "    e = 5  # kvplan: ignore[KV204] nothing here\n"             # 7  unused
    "    f = 6  # kvplan: ignore nothing named\n"                   # 8  malformed
    "}\n"
)


def test_suppressions_apply_and_report_their_own_problems() -> None:
    diags = [at(2), at(4, code="KV203"), at(4, code="KV205"), at(5), at(6), at(7, code="KV202"), at(9)]
    kept, n = lint.apply_suppressions("s.kvp", SUPPRESSED, diags)
    assert n == 4  # lines 2, 4 (twice) and 5: a suppression without a reason still suppresses
    by = {(d.code, d.span.line): d for d in kept}
    assert len(by) == len(kept)
    assert set(by) == {("KV202", 6), ("KV202", 7), ("KV202", 9), ("KV901", 7), ("KV902", 5),
                       ("KV903", 6), ("KV903", 8)}
    line6 = SUPPRESSED.split("\n")[5]
    s = by[("KV903", 6)].span
    assert line6[s.column - 1: s.end_column - 1] == "KV999"
    assert "KV204" in by[("KV901", 7)].message and "line 7" in by[("KV901", 7)].message


def test_syntax_and_suppression_findings_cannot_be_suppressed() -> None:
    src = "a = 1  # kvplan: ignore[KV003, KV901] no\n"
    kept, n = lint.apply_suppressions("s.kvp", src, [at(1, code="KV003")])
    assert n == 0
    assert sorted(d.code for d in kept) == ["KV003", "KV901", "KV901"]


# --------------------------------------------------------------------------- settings

@pytest.mark.parametrize("select, ignore, code, wanted", [
    ((), (), "KV202", True),
    (("KV2",), (), "KV202", True),
    (("KV2",), (), "KV101", False),
    ((), ("KV2",), "KV202", False),
    (("KV2",), ("KV2",), "KV202", False),          # a tie goes to ignore
    (("KV202",), ("KV2",), "KV202", True),         # the more specific prefix wins
    (("KV202",), ("KV2",), "KV203", False),
    (("KV2",), ("KV202",), "KV203", True),
    (("KV1",), ("KV",), "KV003", True),            # syntax errors are always reported
])
def test_select_ignore_by_prefix(select: tuple[str, ...], ignore: tuple[str, ...], code: str,
                                 wanted: bool) -> None:
    assert lint.LintSettings(select=select, ignore=ignore).wants(code) is wanted


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_load_settings_from_the_nearest_pyproject_with_a_kvplan_table(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.kvplan]\nselect = ["KV1", "KV2"]\nignore = ["KV201"]\n'
                                       'fail-on = "error"\n')
    write(tmp_path / "sub" / "pyproject.toml", "[project]\nname = 'x'\n")   # no [tool.kvplan]: skipped
    deep = tmp_path / "sub" / "deeper"
    deep.mkdir()
    s = lint.load_settings(str(deep))
    assert (s.select, s.ignore, s.fail_on) == (("KV1", "KV2"), ("KV201",), Severity.ERROR)
    assert s.config_path is not None and s.config_path.endswith("pyproject.toml")
    # flags: --select replaces select and ignore, --ignore adds, --fail-on replaces
    t = s.with_overrides(select=["KV3"], ignore=["KV302"], fail_on="info")
    assert (t.select, t.ignore, t.fail_on) == (("KV3",), ("KV302",), Severity.INFO)
    u = s.with_overrides(ignore=["KV302"])
    assert (u.select, u.ignore, u.fail_on) == (("KV1", "KV2"), ("KV201", "KV302"), Severity.ERROR)
    assert lint.load_settings(str(tmp_path / "sub"), config=str(tmp_path / "sub" / "pyproject.toml")) \
        == lint.LintSettings(config_path=lint._display(str(tmp_path / "sub" / "pyproject.toml")))


@pytest.mark.parametrize("body, message", [
    ("[tool.kvplan]\nselect = \"KV1\"\n", "must be a list"),
    ("[tool.kvplan]\nignore = [\"KX1\"]\n", "no diagnostic code starts with 'KX1'"),
    ("[tool.kvplan]\nfail-on = \"fatal\"\n", "fail-on must be error, warning or info"),
    ("[tool.kvplan\n", "not valid TOML"),
])
def test_bad_pyproject_is_a_config_error(tmp_path: Path, body: str, message: str) -> None:
    write(tmp_path / "pyproject.toml", body)
    with pytest.raises(ConfigError, match=message):
        lint.load_settings(str(tmp_path), config=str(tmp_path / "pyproject.toml"))


def test_collect_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for rel in ["specs/b.kvp", "specs/a.kvp", "specs/deep/c.kvp", "specs/.hidden/d.kvp", "specs/notes.txt",
                "other.txt"]:
        write(tmp_path / rel, "")
    assert lint.collect_paths(["specs", "./specs/a.kvp", "other.txt"]) == (
        "other.txt", "specs/a.kvp", "specs/b.kvp", "specs/deep/c.kvp")
    assert lint.collect_paths([str(tmp_path / "specs" / "b.kvp")]) == ("specs/b.kvp",)
    with pytest.raises(KvplanError, match="no such file"):
        lint.collect_paths(["specs", "missing.kvp"])
    with pytest.raises(KvplanError, match="no paths"):
        lint.collect_paths([])
    (tmp_path / "empty").mkdir()
    with pytest.raises(KvplanError, match="no .kvp files"):
        lint.collect_paths(["empty"])


def test_report_exit_code_and_summary() -> None:
    def report(*sevs: Severity) -> lint.LintReport:
        diags = tuple(Diagnostic("KV202", s, "m", Span("a.kvp", 1, 1, 1, 2)) for s in sevs)
        return lint.LintReport((lint.FileReport("a.kvp", "", diags), lint.FileReport("b.kvp", "", ())))

    assert report().exit_code() == 0 and report().summary() == "no findings in 2 files"
    r = report(Severity.INFO, Severity.WARNING, Severity.ERROR, Severity.ERROR)
    assert r.summary() == "2 errors, 1 warning, 1 info in 2 files"
    assert [r.exit_code(s) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)] == [1, 1, 1]
    assert [report(Severity.INFO).exit_code(s) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)] \
        == [0, 0, 1]
    assert report(Severity.WARNING).exit_code() == 0     # default (issue #3): only errors fail
    assert report(Severity.ERROR).exit_code() == 1


# --------------------------------------------------------------------------- the command

PROJECT = "tests/data/lint/project"
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


def test_suppressions_of_checks_that_did_not_run_are_not_called_unused(tmp_path: Path) -> None:
    spec = tmp_path / "s.kvp"
    spec.write_text((ROOT / PROJECT / "suppressed.kvp").read_text("utf-8").replace(
        "batch = 1", "batch = 1.5          # kvplan: ignore[KV101] a front-end code, judged"))
    report = lint.lint_paths([str(spec)], lint.LintSettings(), checks=[lambda r: pytest.fail("planned")])
    found = sorted((d.code, d.span.line) for d in report.diagnostics)
    # KV109 (fractional batch) stops planning: the KV203 and KV202 suppressions cannot be judged,
    # the KV101 one can (the front end ran), and the unknown code and missing reason still count.
    assert found == [("KV109", 8), ("KV901", 8), ("KV902", 15), ("KV903", 16)]


def test_a_broken_file_does_not_stop_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("broken.kvp", "meaning.kvp"):
        shutil.copy(ROOT / PROJECT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    r = run(".")
    assert r.exit_code == 1
    assert [ln.split(":")[0] for ln in r.stdout.splitlines()] == ["broken.kvp", "meaning.kvp", "meaning.kvp"]
    assert r.stderr.endswith("in 2 files\n")


# --------------------------------------------------------------------------- robustness

# The mutation fuzz of every shipped and test spec lives in tests/test_fuzz.py.


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
