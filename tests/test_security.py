"""Untrusted input files: no code runs from the temp directory, only regular files of bounded size are read,
a spec reads nothing outside its folder, and values read from a file are not echoed back.

A spec is often untrusted input in CI (a pull request); so are the engine configs handed to `kvplan import`.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.lang import syntax

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "w2-batch32.kvp"
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED",)}


def _kvplan(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], cwd=cwd, env={**CLEAN_ENV, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)


# --- the parser: built in, no pickle ----------------------------------------------------------------------------

class _Planted:
    """Unpickling this runs code: it writes a marker file (what an attacker's planted cache would do)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (os.system, (f"touch {self.marker}",))


def test_lint_writes_no_parser_cache_to_the_temp_directory_and_runs_no_planted_one(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "w2.kvp").write_bytes(EXAMPLE.read_bytes())
    marker = tmp_path / "planted-code-ran"
    # The name lark's cache=True would use for kvplan's grammar: let lark write it, then swap in the payload.
    make_cache = ("from lark import Lark; from kvplan.lang import syntax; "
                  "Lark(syntax.grammar_text(), parser='lalr', lexer='contextual', propagate_positions=True, "
                  "cache=True)")
    subprocess.run([sys.executable, "-c", make_cache], env={**CLEAN_ENV, "TMPDIR": str(tmp)}, check=True, timeout=60)
    planted = sorted(tmp.glob(".lark_cache_*"))
    assert planted, "lark wrote no cache file to plant into"
    for p in planted:  # lark's cache file: a line with the grammar's hash, then pickles
        first_line = p.read_bytes().split(b"\n", 1)[0]
        p.write_bytes(first_line + b"\n" + pickle.dumps(_Planted(str(marker))))
    before = {p.name for p in tmp.iterdir()}

    out = _kvplan(["lint", "w2.kvp"], work, env={"TMPDIR": str(tmp)})
    assert out.returncode in (0, 1), out.stderr
    assert not marker.exists(), "kvplan lint unpickled a file planted in the temp directory"
    assert {p.name for p in tmp.iterdir()} == before, "kvplan lint wrote to the temp directory"


def test_the_parser_comes_from_the_shipped_tables_and_loads_no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the parser loaded a pickle")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    syntax.parser.cache_clear()
    try:
        p = syntax.parser()
        assert syntax.parser_origin() == "shipped"
        assert p.parse('deployment "x" {\n  batch = 1\n}\n').data == "start"
    finally:
        syntax.parser.cache_clear()


def test_the_shipped_tables_are_exactly_what_the_generator_writes_from_the_grammar() -> None:
    # Run under two hash seeds: lark numbers states in set order, the generator must not depend on it.
    for seed in ("0", "12345"):
        out = subprocess.run([sys.executable, str(ROOT / "tools" / "build_parser.py"), "--check"], cwd=ROOT,
                             env={**CLEAN_ENV, "PYTHONHASHSEED": seed}, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr


def test_the_shipped_parser_parses_like_one_built_from_the_grammar() -> None:
    from lark import Lark

    built = Lark(syntax.grammar_text(), parser="lalr", lexer="contextual", propagate_positions=True)
    shipped = syntax.parser()
    for path in sorted((ROOT / "examples").glob("*.kvp")) + sorted((ROOT / "tests" / "data").rglob("*.kvp")):
        text = path.read_text(encoding="utf-8", errors="replace")
        results = []
        for parser in (built, shipped):
            try:
                results.append(("tree", parser.parse(text)))
            except Exception as exc:  # noqa: BLE001 - the two must fail alike, whatever the error
                results.append(("error", (type(exc).__name__, getattr(exc, "line", None),
                                          getattr(exc, "column", None))))
        assert results[0] == results[1], path


def test_a_stale_table_file_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # kvp.lark edited without rerunning the generator: the grammar's hash differs, the grammar wins.
    monkeypatch.setattr(syntax, "grammar_text", lambda: syntax.resources.files("kvplan.grammar").joinpath(
        "kvp.lark").read_text(encoding="utf-8") + "\n// edited\n")
    syntax.parser.cache_clear()
    try:
        syntax.parser()
        assert syntax.parser_origin() == "grammar"
    finally:
        syntax.parser.cache_clear()
        monkeypatch.undo()
        syntax.parser()
