"""kvplan lint: suppressions, select/ignore, pyproject settings, paths, exit codes, robustness."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.base.codes import Severity
from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.errors import ConfigError, KvplanError, Span
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


def test_suppressions_of_checks_that_did_not_run_are_not_called_unused(tmp_path: Path) -> None:
    spec = tmp_path / "s.kvp"
    spec.write_text((ROOT / PROJECT / "suppressed.kvp").read_text("utf-8").replace(
        "batch = 1", "batch = 1.5          # kvplan: ignore[KV101] a front-end code, judged"))
    report = lint.lint_paths([str(spec)], lint.LintSettings(), checks=[lambda r: pytest.fail("planned")])
    found = sorted((d.code, d.span.line) for d in report.diagnostics)
    # KV109 (fractional batch) stops planning: the KV203 and KV202 suppressions cannot be judged,
    # the KV101 one can (the front end ran), and the unknown code and missing reason still count.
    assert found == [("KV109", 8), ("KV901", 8), ("KV902", 15), ("KV903", 16)]
