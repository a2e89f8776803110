"""`emit --target flashinfer` writes a self-contained benchmark (issue 12, build 7; issue 20, build 5).

The emitted flashinfer_decode.py must be valid Python that names nothing it does not define (the old template's
plan() call used `indptr`, `indices` and `last_page_len` and defined none of them), import without torch or kvplan,
and carry a pure page-table builder whose tables FlashInfer's plan() accepts: indptr from 0, non-decreasing, ending
at the page count; ceil(tokens / page) pages a sequence; last_page_len in [1, page]; unique page ids inside the
pool; and a pool whose bytes are the KV the plan states per rank. Without torch, FlashInfer or a GPU it exits 2
with one line naming what is missing. The expected figures below are computed from the model's shape, not from the
module. Since issue 20 the file is kvplan/engines/kernels/flashinfer_decode.py as the package ships it, with the
plan's settings as one JSON literal (tests/unit/app/test_flashinfer_module.py tests the module itself).
"""

from __future__ import annotations

import ast
import builtins
import csv
import importlib.util
import io
import itertools
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.catalog import DTYPES
from kvplan.engines import emit
from kvplan.engines.common import EmitRequest
from kvplan.engines.flashinfer import CSV_COLUMNS, benchmark_script
from kvplan.model.kernels.flashinfer import KV_TORCH, kernel_config
from kvplan.planner.plan import Plan
from tests.paths import ROOT
from tests.unit.app.test_backends import plans
from tests.unit.app.test_memory import plan_of

#: The columns issue 12 documents for `kvplan calibrate`'s CSV, in its order.
CALIBRATE_COLUMNS = ("model", "device", "devices", "tensor_parallel", "weights", "kv_dtype", "batch", "context",
                     "itl_ms")

#: Tokens kept that are no multiple of the page (retention 0.7 of 1,000 tokens: 700, in 44 16-token pages with
#: 12 in the last) and two pipeline stages (16 of the 32 layers on a rank).
ODD = """kvplan 1

deployment "odd" {
    model   = llama-3-8b
    device  = h100-sxm
    devices = 2
    workload {
        batch   = 3
        context = 1000
    }
    quality {
        budget        = aggressive
        eviction      = allowed
        min_retention = 0.5
    }
    pin {
        block_size        = 16
        kv_dtype          = bf16
        retention         = 0.7
        tensor_parallel   = 1
        pipeline_parallel = 2
    }
}
"""

SPECS = ("examples/llama-3.1-8b-h100-custom.kvp", "examples/deepseek-v3-mi300x.kvp", "tests/data/emit/windowed.kvp",
         "tests/data/emit/evict.kvp")


def _all_plans() -> list[tuple[str, Plan]]:
    out = [(f"{Path(spec).stem}:{p.scenario.name}", p) for spec in SPECS for p in plans(spec)]
    return out + [("odd", plan_of(ODD))]


PLANS = _all_plans()
IDS = [name for name, _ in PLANS]


def _script(plan: Plan) -> str:
    out = emit(plan, "flashinfer")
    (text,) = [f.text for f in out.files if f.name == "flashinfer_decode.py"]
    return text


def _load(text: str, where: Path) -> ModuleType:
    """The emitted file imported as a module (not run: its main() waits for `__main__`)."""
    path = where / "flashinfer_decode.py"
    path.write_text(text, encoding="utf-8")
    name = f"emitted_flashinfer_decode_{next(_LOADED)}"   # dataclasses look their module up in sys.modules
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_LOADED = itertools.count()


def _expected(plan: Plan) -> dict[str, float]:
    """What one rank stores and reads, from the model's shape: KV heads per rank (split up to n_kv, then one
    each), the width the kernel reads (fp8 for a dtype FlashInfer does not take), ⌈layers / pp⌉ layers of each
    window group, ⌈min(context, window) · r⌉ tokens a sequence keeps, in ⌈kept / page⌉ pages."""
    m, tp, pp = plan.scenario.model, plan.tp, plan.pp
    width = plan.kv_dtype.width if plan.kv_dtype.id in KV_TORCH else DTYPES["fp8"].width
    if m.kv_kind == "mla":
        per_token = (m.mla_kv_rank + m.mla_rope_dim) * width
    else:
        kv_heads = -(-m.n_kv // tp) if tp <= m.n_kv else 1
        per_token = kv_heads * (m.head_dim + (m.v_head_dim or m.head_dim)) * width
    b, s, page = int(plan.scenario.batch), int(plan.scenario.context), plan.block_size
    read = pool = 0.0
    for window, layers in m.window_groups:
        kept = max(1, math.ceil(round(min(s, window or s) * plan.retention, 6)))
        on_rank = -(-layers // pp)
        read += on_rank * b * kept * per_token
        pool += on_rank * b * -(-kept // page) * page * per_token
    return {"read": read, "pool": pool, "per_token": per_token}


# ------------------------------------------------------------------ the file as Python

def undefined_names(source: str) -> set[str]:
    """Names read somewhere in `source` that nothing in it binds and that are not builtins. Not scope-exact (a
    name bound in one function passes in another); ruff's F821 below is, where ruff is installed."""
    tree = ast.parse(source)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def test_the_undefined_name_check_finds_the_old_templates_names() -> None:
    old = ("import flashinfer\nimport torch\nworkspace = torch.empty(1)\n"
           "wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace)\n"
           "wrapper.plan(indptr, indices, last_page_len, num_qo_heads=32)\n")
    assert undefined_names(old) == {"indptr", "indices", "last_page_len"}


@pytest.mark.parametrize("name,plan", PLANS, ids=IDS)
def test_the_script_compiles_and_defines_every_name(name: str, plan: Plan) -> None:
    text = _script(plan)
    compile(text, "flashinfer_decode.py", "exec")
    assert undefined_names(text) == set()
    assert text.startswith("#!/usr/bin/env python3\n# kvplan ")   # the digest header within HEADER_LINES


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed (the test extra)")
def test_pyflakes_rules_pass_on_every_script(tmp_path: Path) -> None:
    for i, (_, plan) in enumerate(PLANS):
        (tmp_path / f"s{i}.py").write_text(_script(plan), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F", "--no-cache",
                        str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name,plan", PLANS, ids=IDS)
def test_the_script_imports_only_the_standard_library_at_top_level(name: str, plan: Plan) -> None:
    tree = ast.parse(_script(plan))
    top = {a.name for node in tree.body if isinstance(node, ast.Import) for a in node.names}
    top |= {node.module or "" for node in tree.body if isinstance(node, ast.ImportFrom)}
    assert top == {"__future__", "argparse", "dataclasses", "json", "math", "statistics", "sys", "typing"}
    # what else the top level imports is for mypy only: under `if TYPE_CHECKING:`, which is False at run time
    guarded = [node for node in tree.body if isinstance(node, ast.If)
               and any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(node))]
    assert [ast.unparse(node.test) for node in guarded] == ["TYPE_CHECKING"]


# ------------------------------------------------------------------ the page table

@pytest.mark.parametrize("name,plan", PLANS, ids=IDS)
def test_page_tables_and_pool_of_each_plan(name: str, plan: Plan, tmp_path: Path) -> None:
    module = _load(_script(plan), tmp_path)
    assert "torch" not in sys.modules   # importing the file did not need it
    b, page = int(plan.scenario.batch), plan.block_size
    s = module.settings()
    layout = module.groups(s)
    assert len(layout) == len(plan.scenario.model.window_groups)
    for group in layout:
        indptr, indices, last = group.table
        pages = -(-group.kept // page)
        assert indptr[0] == 0 and indptr[-1] == len(indices) == b * pages
        assert all(x <= y for x, y in zip(indptr, indptr[1:]))
        assert [indptr[i + 1] - indptr[i] for i in range(b)] == [pages] * b
        assert len(last) == b and all(1 <= n <= page for n in last)
        assert last == [group.kept - (pages - 1) * page] * b
        assert len(set(indices)) == len(indices) and min(indices) >= 0 and max(indices) < b * pages
    want = _expected(plan)
    assert module.token_bytes(s) == want["per_token"]
    assert module.kv_bytes_read(s, layout) == want["read"]
    assert module.pool_bytes(s, layout) == want["pool"]   # total pages × page bytes
    assert s.planned_kv_bytes == round(kernel_config(plan).kv_bytes.value)


@pytest.mark.parametrize("name", ["llama-3.1-8b-h100-custom:chat-8b[context=8k]",
                                  "llama-3.1-8b-h100-custom:chat-8b[context=32k]", "evict:evict",
                                  "deepseek-v3-mi300x:deepseek-v3[batch=16]"])
def test_pool_is_the_kv_the_plan_states_per_rank(name: str, tmp_path: Path) -> None:
    """Where whole pages hold the context and every layer is on the rank, the pool is exactly kvplan's KV read
    per rank per step (b · layers · s · r · bytes per token per layer), the figure the plan prints."""
    plan = dict(PLANS)[name]
    module = _load(_script(plan), tmp_path)
    assert plan.pp == 1 and int(plan.scenario.context * plan.retention) % plan.block_size == 0
    s = module.settings()
    layout = module.groups(s)
    assert module.pool_bytes(s, layout) == module.kv_bytes_read(s, layout) == kernel_config(plan).kv_bytes.value


def test_odd_context_fills_a_last_partial_page(tmp_path: Path) -> None:
    plan = plan_of(ODD)
    module = _load(_script(plan), tmp_path)
    s = module.settings()
    (group,) = module.groups(s)
    assert (plan.tp, plan.pp, group.group.layers) == (1, 2, 16)
    kept = math.ceil(1000 * 0.7)                        # 700 tokens kept of 1,000
    assert (group.kept, plan.block_size) == (kept, 16)
    indptr, _, last = group.table
    assert indptr[:2] == [0, 44] and last == [700 - 43 * 16] * 3   # 44 pages, 12 tokens in the last
    layout = module.groups(s)
    # what the kernel reads is the plan's KV per rank (b · L/pp · s · r · bytes); the pool holds whole pages more
    assert module.kv_bytes_read(s, layout) == pytest.approx(kernel_config(plan).kv_bytes.value, rel=1e-12)
    assert module.pool_bytes(s, layout) == module.kv_bytes_read(s, layout) * 44 * 16 / 700


def _module() -> ModuleType:
    """One emitted script imported once, for the property tests."""
    import tempfile

    where = Path(tempfile.mkdtemp(prefix="kvplan-fi-"))
    return _load(_script(PLANS[0][1]), where)


MODULE = _module()


@settings(max_examples=200, deadline=None)
@given(batch=st.integers(1, 64), tokens=st.integers(1, 5000), page=st.sampled_from([1, 8, 16, 32, 64, 128]))
def test_page_table_properties(batch: int, tokens: int, page: int) -> None:
    indptr, indices, last = MODULE.page_table(batch, tokens, page)
    pages = math.ceil(tokens / page)
    assert indptr[0] == 0 and indptr[-1] == len(indices) == batch * pages
    assert all(indptr[i + 1] - indptr[i] == pages for i in range(batch))
    assert last == [tokens - (pages - 1) * page] * batch and 1 <= last[0] <= page
    assert sorted(indices) == list(range(batch * pages))
    rows = MODULE.block_table(indptr, indices)
    assert len(rows) == batch and all(len(r) == pages for r in rows)
    assert [p for r in rows for p in r] == indices


def test_page_table_refuses_an_empty_shape() -> None:
    for args in [(0, 10, 16), (2, 0, 16), (2, 10, 0)]:
        with pytest.raises(ValueError, match="at least 1"):
            MODULE.page_table(*args)


# ------------------------------------------------------------------ the measurements file

def test_measurements_csv_has_the_documented_columns() -> None:
    text = MODULE.measurements_csv(MODULE.settings(), 16_777_216_000, 0.0052, "measured on a test")
    comments = [line for line in text.splitlines() if line.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("\n".join(line for line in text.splitlines()
                                                     if not line.startswith("#")))))
    assert tuple(rows[0]) == CSV_COLUMNS and CSV_COLUMNS[:9] == CALIBRATE_COLUMNS
    (row,) = rows
    assert row["itl_ms"] == ""   # the kernel alone is no inter-token latency
    assert (row["model"], row["device"], row["kv_dtype"], row["batch"], row["context"]) == (
        "llama-3-8b", "h100-class", "bf16", "16", "8000")
    assert float(row["kernel_ms"]) == 5.2 and int(row["kv_bytes"]) == 16_777_216_000
    assert int(row["achieved_kv_bandwidth_Bps"]) == round(16_777_216_000 / 0.0052)
    for column in CSV_COLUMNS[8:]:   # each extra column, and itl_ms, said in a comment
        assert any(line.startswith(f"# {column}:") for line in comments), column
    assert comments[-1] == "# measured on a test"


def test_the_fallback_dtype_is_what_the_csv_names(tmp_path: Path) -> None:
    plan = dict(PLANS)["llama-3.1-8b-h100-custom:chat-8b[context=32k]"]
    assert plan.kv_dtype.id == "int4"
    s = _load(_script(plan), tmp_path).settings()
    assert (s.kv_dtype, s.plan_kv_dtype, s.kv_element_bytes, s.kv_torch_dtype) == ("fp8", "int4", 1, "float8_e4m3fn")


def test_docs_describe_every_column() -> None:
    doc = (ROOT / "docs" / "kernels.md").read_text(encoding="utf-8")
    for column in CSV_COLUMNS:
        assert f"`{column}`" in doc, column


# ------------------------------------------------------------------ without torch, FlashInfer or a GPU

STUB_TORCH = "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
BLOCKED = "raise ImportError('blocked by the test')\n"

#: The emitted file runs where kvplan is not installed: every run below has it blocked.
NO_KVPLAN = {"kvplan": "raise ImportError('kvplan is not on the GPU machine')\n"}


def _run(tmp_path: Path, packages: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run the emitted script with stand-in packages first on the path (a blocked one raises ImportError)."""
    stubs = tmp_path / "stubs"
    for name, body in {**NO_KVPLAN, **packages}.items():
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text(body, encoding="utf-8")
    script = tmp_path / "flashinfer_decode.py"
    script.write_text(_script(PLANS[0][1]), encoding="utf-8")
    env = {"PYTHONPATH": str(stubs), "PATH": "/usr/bin:/bin", "PYTHONNOUSERSITE": "1"}
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=60)


@pytest.mark.parametrize("packages,line", [
    ({"torch": BLOCKED}, "torch is not installed (pip install torch)"),
    ({"torch": STUB_TORCH, "flashinfer": BLOCKED},
     "FlashInfer does not import (ImportError: blocked by the test; pip install flashinfer-python==0.7.4)"),
    ({"torch": STUB_TORCH, "flashinfer": ""}, "no CUDA GPU is visible to torch (torch.cuda.is_available() is False)"),
], ids=["no-torch", "no-flashinfer", "no-gpu"])
def test_without_what_it_needs_it_exits_2_with_one_line(packages: dict[str, str], line: str,
                                                         tmp_path: Path) -> None:
    r = _run(tmp_path, packages)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"flashinfer_decode.py: cannot measure: {line}; nothing written\n"
    assert not (tmp_path / "flashinfer_measured.csv").exists()


def test_a_bad_argument_is_one_line_and_exit_2(tmp_path: Path) -> None:
    r = _run(tmp_path, {"torch": BLOCKED}, "--iters", "0")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "1 to 100000" in r.stderr
    assert "Traceback" not in r.stderr


def test_emit_request_keeps_the_plans_header() -> None:
    """The script's first lines carry the digest header `lint --check-digest` reads (shebang first)."""
    plan = PLANS[0][1]
    text = benchmark_script(EmitRequest(plan, "x.kvp"), kernel_config(plan))
    assert text.splitlines()[1].startswith("# kvplan ") and plan.digest in text.splitlines()[1]
