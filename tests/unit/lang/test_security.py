"""Untrusted input files: the unit tests that need the lang layer.

Split by layer from the tests of the same subject in tests/acceptance/test_security.py;
tests/acceptance/test_security.py says what they check.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from kvplan.lang import syntax
from tests.paths import ROOT

CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED",)}


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
    edited = syntax.grammar_text() + "\n// edited\n"
    monkeypatch.setattr(syntax, "grammar_text", lambda: edited)
    syntax.parser.cache_clear()
    try:
        syntax.parser()
        assert syntax.parser_origin() == "grammar"
    finally:
        syntax.parser.cache_clear()
        monkeypatch.undo()
        syntax.parser()


def test_a_kvp_syntax_error_is_not_taken_for_json_or_yaml() -> None:
    from kvplan.lang import check_source

    for text in ('deployment: "x" {\n}\n', 'deployment "x" {\n  batch: 1\n}\n', "}\n"):
        codes = [d.code for d in check_source(text, "x.kvp").diagnostics]
        assert codes and "KV018" not in codes, (text, codes)
