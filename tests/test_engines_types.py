"""Types at the engines, render, model and cli seams (issue 10, build 2), and what typing them fixed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kvplan.engines import trtllm
from kvplan.engines.flagparse import DeploymentReadError

PACKAGE = Path(__file__).resolve().parent.parent / "kvplan"
#: The layers whose own types carry no `Any` on a parameter or a field.
TYPED = ("engines", "render", "model", "cli.py")


def _mentions_any(node: ast.expr | None) -> bool:
    if node is None:
        return False
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id == "Any" or isinstance(n, ast.Attribute) and n.attr == "Any":
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and "Any" in n.value:
            return True  # a quoted annotation
    return False


def _any_annotations(text: str, name: str) -> list[str]:
    """`name:line: parameter x` / `field y` for each annotation of a parameter or a class field that says Any."""
    found = []
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]:
                if _mentions_any(arg.annotation):
                    found.append(f"{name}:{arg.lineno}: parameter {arg.arg}")
        elif isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and _mentions_any(st.annotation):
                    found.append(f"{name}:{st.lineno}: field {ast.unparse(st.target)}")
    return found


def test_no_parameter_or_field_is_typed_any() -> None:
    paths = [p for name in TYPED for p in ([PACKAGE / name] if name.endswith(".py")
                                           else sorted((PACKAGE / name).rglob("*.py")))]
    assert len(paths) > 20
    found = [hit for p in paths
             for hit in _any_annotations(p.read_text(encoding="utf-8"), str(p.relative_to(PACKAGE.parent)))]
    assert found == [], "annotations that say Any:\n" + "\n".join(found)


def test_the_check_sees_parameters_and_fields_typed_any() -> None:
    src = ("class A:\n    x: Any\n    y: int\n\n"
           "def f(a: 'dict[str, Any]', b: int, *c: typing.Any, **d: object) -> Any:\n    z: Any = 1\n")
    assert _any_annotations(src, "probe.py") == ["probe.py:2: field x", "probe.py:5: parameter a",
                                                 "probe.py:5: parameter c"]


# ------------------------------------------------------------------ TensorRT-LLM YAML keys

def test_a_quant_config_with_keys_of_mixed_types_is_read() -> None:
    """YAML keys need not be strings: `1:` is an int. The weight-quantization keys are named in the
    order of their text; before, sorting an int key with string keys raised a TypeError."""
    r = trtllm.read("quant_config:\n  quant_algo: FP8\n  1: x\n  kv_cache_quant_algo: FP8\n", where="t.yaml")
    assert r.kv_dtype == ("fp8", "quant_config.kv_cache_quant_algo: FP8")
    quant = [n for n in r.notes if n.startswith("quant_config.")]
    assert quant == ["quant_config.1: x: weight quantization; set `weights` by hand if it applies",
                     "quant_config.quant_algo: FP8: weight quantization; set `weights` by hand if it applies"]


@pytest.mark.parametrize("value,written", [("[1, 2]", "[1, 2]"), ("{a: 1}", "{'a': 1}"),
                                           ("2024-01-01", "2024-01-01"), ("null", "None"), ("-1", "-1")])
def test_a_host_cache_size_that_is_no_number_says_so(value: str, written: str) -> None:
    """What number() says of each kind of YAML value that is not a number of at least 0 (as before typing it)."""
    with pytest.raises(DeploymentReadError) as err:
        trtllm.read(f"kv_cache_config:\n  host_cache_size: {value}\n", where="t.yaml")
    what = "a finite number of at least 0" if value == "-1" else "a number"
    assert err.value.message == f"kv_cache_config.host_cache_size: {written} takes {what}, got '{written}'"


# ------------------------------------------------------------------ long functions (issue 10 build 3)

#: A function this long needs a comment saying why (on its `def` line or the line above it).
MAX_LINES = 60


def _long_functions(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            said = "#" in lines[node.lineno - 1] or lines[node.lineno - 2].lstrip().startswith("#")
            if length > MAX_LINES and not said:
                found.append(f"{name}:{node.lineno}: {node.name} is {length} lines")
    return found


def test_no_long_function_without_a_reason() -> None:
    paths = [p for name in TYPED for p in ([PACKAGE / name] if name.endswith(".py")
                                           else sorted((PACKAGE / name).rglob("*.py")))]
    found = [hit for p in paths
             for hit in _long_functions(p.read_text(encoding="utf-8"), str(p.relative_to(PACKAGE.parent)))]
    assert found == [], f"functions over {MAX_LINES} lines with no comment saying why:\n" + "\n".join(found)


def test_the_length_check_counts_lines_and_sees_the_reason() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    assert _long_functions(f"\n\ndef f() -> None:\n{body}", "p.py") == [f"p.py:3: f is {MAX_LINES + 1} lines"]
    assert _long_functions(f"\n# a flat table\ndef f() -> None:\n{body}", "p.py") == []
    assert _long_functions(f"\n\ndef f() -> None:\n{body[:-len('    x59 = 59')-1]}", "p.py") == []
