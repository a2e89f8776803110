"""Untrusted input files: the unit tests that need the lang layer.

Split by layer from the tests of the same subject in tests/acceptance/test_security.py;
tests/acceptance/test_security.py says what they check.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

from kvplan.lang import syntax
from tests.paths import ROOT, load_tool

#: The environment less PYTHONHASHSEED, for the tests here and in tests/acceptance that run kvplan as a user does.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED",)}


def test_the_parser_is_the_shipped_standalone_one_and_loads_no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the parser loaded a pickle")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    syntax.parser.cache_clear()
    try:
        p = syntax.parser()
        assert type(p).__module__ == "kvplan.grammar.kvp_parser"
        assert p.parse('deployment "x" {\n  batch = 1\n}\n').data == "start"
    finally:
        syntax.parser.cache_clear()


def _shape(parser: object) -> tuple[object, ...]:
    """What a parser is made of, read through lark's public attributes: its options, rules, terminals and the
    terminals it ignores (the LALR tables follow from these), as plain values whatever copy of lark made it."""
    p: Any = parser
    rules = sorted((r.origin.name, tuple(s.name for s in r.expansion), r.alias, r.order, r.options.keep_all_tokens,
                    r.options.expand1, r.options.priority, tuple(r.options.empty_indices)) for r in p.rules)
    terminals = sorted((t.name, t.pattern.type, t.pattern.value, tuple(t.pattern.flags), t.priority)
                       for t in p.terminals)
    options = (p.options.parser, p.options.lexer, p.options.propagate_positions, tuple(p.options.start))
    return options, tuple(rules), tuple(terminals), tuple(sorted(p.lexer_conf.ignore))


def test_the_shipped_parser_is_made_from_the_grammar_as_it_is() -> None:
    # kvp.lark edited without `python tools/build_parser.py`: its rules or terminals differ from the module's.
    from lark import Lark

    options: dict[str, Any] = {"parser": "lalr", "lexer": "contextual", "propagate_positions": True}
    built = Lark(syntax.grammar_text(), **options)
    assert _shape(syntax.parser()) == _shape(built), "kvp.lark changed: run python tools/build_parser.py"
    edited = syntax.grammar_text().replace('version: "kvplan" NUMBER', 'version: "kvplan" NUMBER NUMBER?')
    assert _shape(Lark(edited, **options)) != _shape(built)  # the comparison sees a rule changed


def test_the_generator_writes_a_working_parser_of_the_grammar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = load_tool("build_parser")
    monkeypatch.setattr(tool, "OUTPUT", tmp_path / "kvp_parser.py")
    assert tool.main() == 0
    spec = importlib.util.spec_from_file_location("generated_kvp_parser", tool.OUTPUT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    made = module.Lark_StandAlone()
    assert _shape(made) == _shape(syntax.parser())
    tree = made.parse('deployment "x" {\n  batch = 1\n}\n')
    # Transformer_NonRecursive calls typing.cast, which lark's generator does not import (the preamble does)
    assert module.Transformer_NonRecursive().transform(tree) == tree


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


def test_a_kvp_syntax_error_is_not_taken_for_json_or_yaml() -> None:
    from kvplan.lang import check_source

    for text in ('deployment: "x" {\n}\n', 'deployment "x" {\n  batch: 1\n}\n', "}\n"):
        codes = [d.code for d in check_source(text, "x.kvp").diagnostics]
        assert codes and "KV018" not in codes, (text, codes)
