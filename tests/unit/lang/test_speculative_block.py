"""The `speculative` block (SPEC §15, docs/language.md): what it lowers to, its defaults, and the located errors of
a method, a k, an acceptance or a draft out of its row's range; a file without the block has no speculation."""

from __future__ import annotations

import pytest

from kvplan.base import codes
from kvplan.lang import check_source
from kvplan.lang.fixes import apply
from kvplan.model.speculative import Speculation


def _spec(block: str) -> str:
    return ('kvplan 1\ndeployment "d" {\n  model = llama-3.1-8b\n  device = h100-sxm\n'
            f"  workload {{\n    batch = 1\n    context = 1k\n  }}\n{block}\n}}\n")


def _found(source: str, severity: str = "error") -> list:
    return [d for d in check_source(source, "t.kvp").diagnostics if d.severity.value == severity]


def test_without_the_block_there_is_no_speculation() -> None:
    (sc,) = check_source(_spec(""), "t.kvp").scenarios
    assert sc.speculative is None


def test_the_block_lowers_to_its_method_k_acceptance_and_draft() -> None:
    block = ('  speculative {\n    method = eagle3\n    draft_tokens = 3\n    acceptance = 70%\n'
             '    draft = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"\n  }')
    (sc,) = check_source(_spec(block), "t.kvp").scenarios
    sp = sc.speculative
    assert sp is not None
    assert (sp.method, sp.draft_tokens, sp.draft) == ("eagle3", 3, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert sp.acceptance == pytest.approx(0.7)
    assert sc.spans["speculative.draft_tokens"].line == 11


def test_auto_draft_tokens_is_the_planners_choice() -> None:
    (sc,) = check_source(_spec("  speculative {\n    method = mtp\n    draft_tokens = auto\n  }"), "t.kvp").scenarios
    assert sc.speculative == Speculation("mtp", None, None, None)


@pytest.mark.parametrize("line, code, column", [
    ("draft_tokens = 17", codes.OUT_OF_RANGE, 20), ("draft_tokens = 0", codes.OUT_OF_RANGE, 20),
    ("draft_tokens = 2.5", codes.NOT_AN_INTEGER, 20), ("acceptance = 1", codes.OUT_OF_RANGE, 18),
    ("acceptance = 0", codes.OUT_OF_RANGE, 18), ("acceptance = 100%", codes.OUT_OF_RANGE, 18),
    ('draft = "EAGLE3"', codes.UNKNOWN_VALUE, 13), ("drafts = 3", codes.UNKNOWN_KEY, 5)])
def test_a_value_out_of_its_rows_range_is_located(line: str, code: str, column: int) -> None:
    (d,) = _found(_spec(f"  speculative {{\n    method = eagle3\n    {line}\n  }}"))
    assert (d.code, d.span.line, d.span.column) == (code, 11, column)


def test_a_misspelt_method_and_block_suggest_the_word() -> None:
    source = _spec("  speculativ {\n    method = eagel3\n  }")
    (d,) = _found(source)
    assert d.code == codes.UNKNOWN_BLOCK and "did you mean `speculative`" in (d.help or "")
    (m,) = _found(_spec("  speculative {\n    method = eagel3\n  }"))
    assert m.code == codes.UNKNOWN_VALUE and "`eagle3`" in (m.help or "")
    assert check_source(apply(_spec("  speculative {\n    method = eagel3\n  }"), m.fixes[0].edits), "t.kvp").ok


def test_a_block_without_a_method_is_an_error_whose_fix_lets_the_planner_choose() -> None:
    source = _spec("  speculative {\n    draft_tokens = 2\n  }")
    (d,) = _found(source)
    assert (d.code, d.span.line) == (codes.MISSING_KEY, 9)
    fixed = check_source(apply(source, d.fixes[0].edits), "t.kvp")
    assert fixed.ok and fixed.scenarios[0].speculative == Speculation("auto", 2, None, None)


def test_keys_a_method_makes_moot_are_said() -> None:
    off = _found(_spec("  speculative {\n    method = off\n    draft_tokens = 2\n  }"), "warning")
    assert [d.code for d in off] == [codes.NO_EFFECT]
    ngram = _found(_spec('  speculative {\n    method = ngram\n    draft = "a/b"\n  }'), "warning")
    assert [d.code for d in ngram] == [codes.NO_EFFECT]
    auto = _found(_spec("  speculative {\n    method = auto\n    acceptance = 0.5\n  }"), "warning")
    assert [d.code for d in auto] == [codes.CONFLICTING_SETTINGS]
