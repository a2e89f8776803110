"""The grammar file: strict LALR, shipped inside the wheel, and the parser built once."""

from __future__ import annotations

import re

from lark import Lark, Tree

from kvplan.lang import syntax
from tests.paths import ROOT

# A copy of ../shared/LANGUAGE.md, so the tests run from any checkout; the test below notices a
# copy that has fallen behind whenever shared/ sits beside the repository (as in CI).
LANGUAGE_MD = ROOT / "tests" / "data" / "reference" / "LANGUAGE.md"
SHARED_LANGUAGE_MD = ROOT.parent / "shared" / "LANGUAGE.md"
EXAMPLE = ROOT / "examples" / "language-reference.kvp"


def test_grammar_is_strict_lalr() -> None:
    # strict=True refuses shift/reduce conflicts and regex collisions within a lexer state.
    parser = Lark(syntax.grammar_text(), parser="lalr", lexer="contextual", strict=True)
    assert parser.parse('deployment "d" {\n}\n').data == "start"


def test_top_level_grammar_folder_is_the_package_grammar() -> None:
    assert (ROOT / "grammar").resolve() == (ROOT / "kvplan" / "grammar").resolve()
    assert (ROOT / "grammar" / "kvp.lark").read_text(encoding="utf-8") == syntax.grammar_text()


def test_parser_is_built_once_per_process() -> None:
    assert syntax.parser() is syntax.parser()


def test_language_md_copy_is_current() -> None:
    if not SHARED_LANGUAGE_MD.exists():  # a checkout without shared/ beside it: the copy is the reference
        return
    assert LANGUAGE_MD.read_text(encoding="utf-8") == SHARED_LANGUAGE_MD.read_text(encoding="utf-8")


def test_language_reference_example_is_language_md_in_canonical_layout() -> None:
    """examples/language-reference.kvp is LANGUAGE.md's complete example run through `kvplan fmt`
    (so `kvplan fmt --check examples` passes), and both mean the same deployment."""
    import attrs

    from kvplan.lang import check_source
    from kvplan.lang.fmt import format_source

    text = LANGUAGE_MD.read_text(encoding="utf-8")
    block = re.search(r"## A complete file\n\n```\n(.*?)```", text, re.S)
    assert block is not None
    assert EXAMPLE.read_text(encoding="utf-8") == format_source(block.group(1), "language-reference.kvp")
    ours = check_source(EXAMPLE.read_text(encoding="utf-8"), str(EXAMPLE))
    theirs = check_source(block.group(1), str(EXAMPLE))
    assert ours.ok and theirs.ok
    strip = lambda sc: attrs.evolve(sc, spans={}, pins={k: p.value for k, p in sc.pins.items()},  # noqa: E731
                                    expects=tuple((e.metric, e.op, e.value) for e in sc.expects))
    assert [strip(s) for s in ours.scenarios] == [strip(s) for s in theirs.scenarios]
    assert sorted(c.text for c in ours.comments) == sorted(c.text for c in theirs.comments)


def _rules(tree: Tree[object], name: str) -> list[Tree[object]]:
    return list(tree.find_data(name))


def test_raw_grammar_reads_the_complete_example() -> None:
    tree = Lark(syntax.grammar_text(), parser="lalr").parse(EXAMPLE.read_text(encoding="utf-8"))
    assert [t.data for t in tree.children] == ["version", "deployment", "model_block", "device_block"]
    # 6 deployment settings + 5 workload + 3 quality + objective + 3 pin + 2 model + 6 device
    assert len(_rules(tree, "assignment")) == 26
    # slo: 2, expect: regime and speedup; `fits` stands alone
    assert len(_rules(tree, "constraint")) == 4
    assert [str(f.children[0]) for f in _rules(tree, "flag")] == ["fits"]
    units = sorted(str(q.children[1]) for q in _rules(tree, "quantity") if len(q.children) == 2)
    assert units == sorted(["k", "k", "%", "ms", "tok/s", "B", "GB", "TB/s", "TFLOPS", "GB/s", "GB/s"])


def test_keywords_need_a_word_boundary() -> None:
    # `models` must lex as one word (then fail as an unknown declaration), not as `model` + `s`.
    tree = Lark(syntax.grammar_text(), parser="lalr").parse('models "x" {\n}\n')
    assert tree.children[0].data == "unknown_declaration"


def test_comment_on_its_own_line_inside_a_list() -> None:
    from kvplan.lang import check_source

    text = ('deployment "x" {\n  model = llama-3-70b\n  device = b200\n  workload {\n'
            '    batch = [1,\n      # small batches first\n      8]\n    context = 8k\n  }\n}\n')
    res = check_source(text, "x.kvp")
    assert res.ok, [d.message for d in res.diagnostics]
    assert [sc.batch for sc in res.scenarios] == [1, 8]
    assert [c.text for c in res.comments] == ["# small batches first"]
