"""One YAML writer (issue 20, build 5): kvplan/engines/yamlout.py writes every YAML file the emit targets write
(trtllm.yaml, lmcache.yaml, k8s-<engine>.yaml, the ConfigMap's files inside it), and what it writes reads back,
under PyYAML (YAML 1.1, Kubernetes' and LMCache's reading), as the value it was given: every scalar kind, keys,
nested mappings and lists, literal blocks, and trailing notes that change no value."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.app.replan import emit
from kvplan.engines import DeployOptions, yamlout
from kvplan.lang import check_file
from kvplan.planner import plans_for
from tests.paths import ROOT

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_SCALARS = st.one_of(_TEXT, st.integers(-10**6, 10**6), st.booleans(), st.none(),
                     st.floats(allow_nan=False, allow_infinity=False))
_NODES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(st.one_of(_SCALARS, st.dictionaries(_TEXT, inner, min_size=1, max_size=3)), max_size=3),
    st.dictionaries(_TEXT, inner, max_size=3)), max_leaves=12)


def _same(a: Any, b: Any) -> bool:
    """Equal, a float read back from its repr counting as equal (repr round-trips every finite float)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=0)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


@given(doc=st.dictionaries(_TEXT, _NODES, max_size=4), note=_TEXT)
@settings(max_examples=300, deadline=None)
def test_one_document_with_notes_reads_back_as_written(doc: dict[str, Any], note: str) -> None:
    notes = {k: note for k in list(doc)[:2]}   # a trailing comment on the first keys, whatever it holds
    back = yaml.safe_load(yamlout.text(["# head", f"# {note}"], doc, notes))
    assert _same(back if doc else (back or {}), doc)


@pytest.mark.parametrize("ch", ["\ufffe", "\uffff", "\x85", "\u2028"], ids=["U+FFFE", "U+FFFF", "NEL", "LS"])
def test_a_character_yaml_refuses_is_escaped_in_comments_notes_and_values(ch: str) -> None:
    """PyYAML refuses a stream that holds U+FFFE or U+FFFF anywhere, a comment included (hypothesis found it in
    a note): the writer escapes them wherever text is placed, and the file reads back to what was written."""
    doc = {"name": f"a{ch}b"}
    text = yamlout.text([f"# model a{ch}b"], doc, {"name": f"note {ch}"})
    assert ch not in text
    assert yaml.safe_load(text) == doc


def test_a_float_is_a_number_and_none_is_null() -> None:
    # repr writes 1e-05 and 1e+20 without a point, which YAML 1.1 (PyYAML, Kubernetes) reads as strings
    doc = {"a": 0.9, "b": None, "c": 1e-05, "g": 1e20, "h": -2.5e-07, "d": "0.9", "e": "y", "f": "_x"}
    text = yamlout.text([], doc)
    assert "c: 1.0e-05\n" in text and "g: 1.0e+20\n" in text and "h: -2.5e-07\n" in text
    assert yaml.safe_load(text) == doc


def test_a_float_that_is_no_number_is_refused() -> None:
    for v in (math.inf, math.nan):
        with pytest.raises(ValueError, match="finite numbers"):
            yamlout.scalar(v)


def test_the_one_writer_refuses_what_it_cannot_write() -> None:
    with pytest.raises(TypeError, match="no empty mappings or nested lists"):
        yamlout.documents([], [{"a": [[1]]}])


# ------------------------------------------------------------------ every YAML target writes through it

#: (spec, target, deploy options): trtllm.yaml, lmcache.yaml, and k8s manifests of vLLM, SGLang over two nodes and
#: TensorRT-LLM with its YAML in a ConfigMap.
YAML_CASES = [
    ("tests/data/emit/host-tier.kvp", "trtllm", None),
    ("tests/data/emit/tier-ssd.kvp", "lmcache", None),
    ("tests/data/emit/host-tier.kvp", "k8s", None),
    ("tests/data/k8s/two-nodes.kvp", "k8s", None),
    ("tests/data/k8s/trtllm.kvp", "k8s", DeployOptions(image="nvcr.io/nvidia/tensorrt-llm/release:main")),
]


@pytest.mark.parametrize("spec,target,deploy", YAML_CASES, ids=[f"{Path(s).stem}:{t}" for s, t, _ in YAML_CASES])
def test_every_yaml_file_a_target_writes_comes_from_the_one_writer(spec: str, target: str,
                                                                   deploy: Optional[DeployOptions],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[str] = []

    def spy(function: Any) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> str:
            out = function(*args, **kwargs)
            written.append(out)
            return str(out)
        return recorded

    monkeypatch.setattr(yamlout, "text", spy(yamlout.text))
    monkeypatch.setattr(yamlout, "documents", spy(yamlout.documents))
    result = check_file(str(ROOT / spec))
    assert result.ok, result.diagnostics
    files = [f for p in plans_for(result) for f in emit(p, target, spec=spec, deploy=deploy).files]
    yamls = [f.text for f in files if f.name.endswith(".yaml")]
    assert yamls and all(text in written for text in yamls)
    for text in yamls:
        assert all(doc is None or isinstance(doc, dict) for doc in yaml.safe_load_all(text))
