"""The lexers' shared terminal expressions (kvplan.lang.syntax._TerminalRegexps): the matches of lark's unions."""

from __future__ import annotations

import re

import pytest

from kvplan.lang import syntax
from tests.paths import DATA, ROOT

TEXTS = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples").glob("*.kvp"))] + [
    p.read_text(encoding="utf-8", errors="replace") for p in sorted((DATA / "invalid").glob("*.kvp"))][:40] + [
    'x = 128k\nmodels "a" {\n  regime == kv-bound\n  rate = 20/s # c\n  l = [1, "s", -2.5e3 GB]\n}\n']


def _lexers() -> list[object]:
    lexer = syntax.parser().parser.lexer
    return [*{id(x): x for x in lexer.lexers.values()}.values(), lexer.root_lexer]


def _lark_union(terminals: list[object]) -> str:
    """The union lark's Scanner compiles for a state's terminals (lark/lexer.py, Scanner._build_mres)."""
    return "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terminals)  # type: ignore[attr-defined]


def test_every_lexer_of_the_parser_shares_one_table() -> None:
    shared = {id(x.re) for x in _lexers()}  # type: ignore[attr-defined]
    assert len(shared) == 1
    assert isinstance(_lexers()[0].re, syntax._TerminalRegexps)  # type: ignore[attr-defined]


def test_each_state_matches_as_the_union_lark_writes() -> None:
    # Every state's scanner, at every position of every text: the same token text and terminal name as
    # Python's own compile of the union, and fullmatch of every token the union matches alike.
    for lexer in _lexers():
        terminals = list(lexer.terminals)  # type: ignore[attr-defined]
        union = _lark_union(terminals)
        shared = lexer.re.compile(union)  # type: ignore[attr-defined]
        assert isinstance(shared, syntax._Alternatives)
        expected = re.compile(union)
        for text in TEXTS:
            for pos in range(len(text)):
                want, got = expected.match(text, pos, len(text)), shared.match(text, pos, len(text))
                assert (want and (want.group(0), want.lastgroup)) == (got and (got.group(0), got.lastgroup))
                if want:
                    token = want.group(0)
                    assert expected.fullmatch(token).lastgroup == shared.fullmatch(token).lastgroup  # type: ignore[union-attr]


def test_each_terminal_is_compiled_once() -> None:
    table = syntax.parser().parser.lexer.root_lexer.re
    for text in TEXTS:
        try:
            syntax.parse(text, "t.kvp")
        except syntax.KvpSyntaxError:
            pass
    names = [name for name, _ in table._compiled]
    assert len(names) == len(set(names)) <= len(syntax.parser().terminals)


@pytest.mark.parametrize("pattern", ["(?P<NAME>[a-z]+)|(?P<NOPE>x)", "(?P<NAME>[a-z]", "[a-z]+", "(?P<NAME>a)"])
def test_a_pattern_that_is_not_a_union_of_known_terminals_goes_to_re(pattern: str) -> None:
    table = syntax._TerminalRegexps({"NAME": "[A-Za-z]+"})
    compiled = table.compile(pattern) if pattern != "(?P<NAME>[a-z]" else None
    if compiled is None:
        with pytest.raises(re.error):
            table.compile(pattern)
    else:
        assert isinstance(compiled, re.Pattern) and compiled.pattern == pattern
