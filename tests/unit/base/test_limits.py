"""The nesting scans (kvplan.base.limits): they find the first bracket past the limit, as the parsers nest."""

from __future__ import annotations

import json
import sys
from typing import Union

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.base import limits

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

Tree = Union[str, list["Tree"], dict[str, "Tree"]]

#: Strings that hold what the scans must skip: brackets, quotes, escapes and comment signs.
TEXTS = st.text(alphabet="ab[]{}#\"'\\ \n", max_size=8)


def trees(depth: int) -> st.SearchStrategy[Tree]:
    leaf: st.SearchStrategy[Tree] = TEXTS
    if depth == 0:
        return leaf
    inner = trees(depth - 1)
    return st.one_of(leaf, st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["k", "l"]), inner,
                                                                            max_size=2))


def nesting(t: Tree) -> int:
    if isinstance(t, list):
        return 1 + max((nesting(x) for x in t), default=0)
    if isinstance(t, dict):
        return 1 + max((nesting(x) for x in t.values()), default=0)
    return 0


def toml_value(t: Tree, literal: bool) -> str:
    """An inline TOML value: arrays, inline tables, and strings basic or literal, one-line or multi-line."""
    if isinstance(t, list):
        return "[" + ", ".join(toml_value(x, literal) for x in t) + "]"
    if isinstance(t, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v, literal)}" for k, v in t.items()) + "}"
    if literal and "'" not in t:
        return f"'''\n{t}'''" if "\n" in t else f"'{t}'"  # a newline right after the quotes is dropped
    body = t.replace("\\", "\\\\").replace('"', '\\"')
    return f'"""\n{body}"""' if "\n" in t else '"' + body.replace("\n", "\\n") + '"'


@settings(max_examples=300, deadline=None)
@given(trees(6), st.integers(2, 6), st.booleans())  # 2: a `[[table]]` header is two levels
def test_the_scans_see_the_depth_the_parsers_build(tree: Tree, limit: int, literal: bool) -> None:
    deep = nesting(tree)
    doc = json.dumps({"x": tree})  # the document's own object is one level
    assert (limits.json_too_deep(doc, limit) is None) == (deep + 1 <= limit)
    text = f"# a [[ comment\n[table]\nx = {toml_value(tree, literal)}  # ]]\n"
    assert tomllib.loads(text)["table"]["x"] == tree  # the text is the tree
    assert (limits.toml_too_deep(text, limit) is None) == (deep <= limit)


def test_the_first_bracket_past_the_limit_is_found_at_2000_levels() -> None:
    text = 'a = "[[[["\n[[fit]]\nb = ' + "[" * 2000 + "]" * 2000 + "\n"
    at = limits.toml_too_deep(text)
    assert at == text.index("b = ") + 4 + limits.MAX_JSON_DEPTH
    assert limits.line_col(text, at) == (3, 5 + limits.MAX_JSON_DEPTH)
    doc = '{"a": "{{{{", "b": ' + "[" * 2000 + "]" * 2000 + "}"
    assert limits.json_too_deep(doc) == doc.index("[") + limits.MAX_JSON_DEPTH - 1
