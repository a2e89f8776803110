"""The kernel benchmark is a module of the package (issue 20, build 5): kvplan/engines/kernels/flashinfer_decode.py,
which `emit --target flashinfer` writes out as it is, with the plan's settings as one JSON literal.

Checked here: the emitted file is the shipped source but for that literal; the settings read back are the plan's
(each field against the plan, not against the writer); a SETTINGS_JSON that does not read is one line and exit 2,
kvplan's own copy included; and the calls `--calls` prints for pasting are the calls plan_wrappers() makes (both run
against stand-in torch and FlashInfer modules that record every call). test_flashinfer_bench.py checks the page
tables, the pool and the measurements file of the emitted copies.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.base import controls
from kvplan.engines import flashinfer as fi_emit
from kvplan.engines.kernels import flashinfer_decode as shipped
from kvplan.model.kernels.flashinfer import kernel_config
from kvplan.planner.plan import Plan
from tests.paths import ROOT
from tests.unit.app.test_flashinfer_bench import BLOCKED, IDS, PLANS, _load, _run, _script
from tests.unit.lang.test_security import CLEAN_ENV

SOURCE = (ROOT / "kvplan" / "engines" / "kernels" / "flashinfer_decode.py").read_text(encoding="utf-8")


def _settings_block(text: str) -> str:
    """The emitted file's SETTINGS_JSON assignment, as source."""
    (node,) = [n for n in ast.parse(text).body if isinstance(n, ast.Assign)
               and [ast.unparse(t) for t in n.targets] == ["SETTINGS_JSON"]]
    return "\n".join(text.splitlines()[node.lineno - 1:node.end_lineno])


@pytest.mark.parametrize("name,plan", PLANS, ids=IDS)
def test_the_emitted_file_is_the_shipped_module_but_for_its_settings(name: str, plan: Plan) -> None:
    text = _script(plan)
    head, sep, body = text.partition('"""A benchmark')
    assert all(line.startswith("#") for line in head.splitlines())   # the header is comments only
    before, _, after = SOURCE.partition('\nSETTINGS_JSON = ""\n')
    block = _settings_block(text)
    assert sep + body == before + "\n" + block + "\n" + after
    value = ast.literal_eval(block.partition(" = ")[2])   # one string constant: nothing of the plan is code
    assert json.loads(value) == fi_emit.bench_settings(plan, kernel_config(plan))


@pytest.mark.parametrize("name,plan", PLANS, ids=IDS)
def test_the_settings_read_back_are_the_plans(name: str, plan: Plan, tmp_path: Path) -> None:
    module = _load(_script(plan), tmp_path)
    s = module.settings()
    sc = plan.scenario
    assert (s.plan, s.model, s.device, s.weights, s.plan_kv_dtype) == (
        plan.digest, sc.model.id, sc.device.id, sc.weights.id, plan.kv_dtype.id)
    assert (s.devices, s.tensor_parallel, s.pipeline_parallel) == (plan.n_devices, plan.tp, plan.pp)
    assert (s.batch, s.context, s.page_size, s.retention) == (sc.batch, sc.context, plan.block_size, plan.retention)
    assert len(s.groups) == len(sc.model.window_groups)
    assert sum(g.layers for g in s.groups) >= sc.model.n_layers / plan.pp
    assert {g.window for g in s.groups} == {w for w, _ in sc.model.window_groups}
    assert (s.mla is not None) == (sc.model.kv_kind == "mla")
    # and back: the record, as JSON, is the literal the file holds (nothing lost or added on the way)
    assert json.loads(json.dumps(dataclasses.asdict(s))) == json.loads(module.SETTINGS_JSON)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_in_the_settings_reads_back_through_the_literal(text: str) -> None:
    """The writer's literal form, r\"\"\" + controls.dumps(...) + \"\"\": JSON never holds three quotes in a row
    (a quote in a string is \\"), and the raw string keeps JSON's escapes for json.loads."""
    literal = f'r"""\n{controls.dumps({"model": text}, indent=2, allow_nan=False)}\n"""'
    assert json.loads(ast.literal_eval(literal)) == {"model": text}
    assert len(literal.splitlines()) == 5   # what a string holds breaks no line


# ------------------------------------------------------------------ settings that do not read

GOOD = fi_emit.settings_json(PLANS[0][1], kernel_config(PLANS[0][1]))


def _changed(obj: dict[str, object], changes: dict[str, object]) -> None:
    """Each key set to its value, or deleted where the value is KeyError."""
    for key, value in changes.items():
        if value is KeyError:
            del obj[key]
        else:
            obj[key] = value


def _edit(**changes: object) -> str:
    """The good settings with top-level keys changed."""
    data = json.loads(GOOD)
    _changed(data, changes)
    return json.dumps(data)


def _group(**changes: object) -> str:
    """The good settings with the first layer group's keys changed."""
    data = json.loads(GOOD)
    _changed(data["groups"][0], changes)
    return json.dumps(data)


@pytest.mark.parametrize("text,says", [
    ("", "SETTINGS_JSON holds no settings: write this file with kvplan emit --target flashinfer"),
    ("{batch: 1}", "SETTINGS_JSON is not JSON (Expecting property name enclosed in double quotes"),
    ("[1, 2]", "SETTINGS_JSON: give a JSON object, not [1, 2]"),
    (_edit(batch=KeyError), "SETTINGS_JSON: missing batch"),
    (_edit(batch=KeyError, speed=1), "SETTINGS_JSON: missing batch; unknown speed"),
    (_edit(batch=True), "SETTINGS_JSON.batch: true: give int"),
    (_edit(batch="16"), 'SETTINGS_JSON.batch: "16": give int'),
    (_edit(batch=0), "SETTINGS_JSON.batch: 0: give a whole number of at least 1"),
    (_edit(batch=1.5), "SETTINGS_JSON.batch: 1.5: give int"),
    (_edit(retention=float("nan")), "SETTINGS_JSON.retention: NaN: give float"),
    (_edit(model=None), "SETTINGS_JSON.model: null: give str"),
    (_edit(groups=[]), "SETTINGS_JSON.groups: give a list of one or more layer groups"),
    (_edit(mla=[]), "SETTINGS_JSON.mla: give a JSON object, not []"),
    (_group(layers=-3), "SETTINGS_JSON.groups[0].layers: -3: give a whole number of at least 1"),
    (_group(window_left=-2), "SETTINGS_JSON.groups[0].window_left: -2: give a whole number of at least 1"),
    (_group(pages=KeyError), "SETTINGS_JSON.groups[0]: missing pages"),
], ids=lambda x: None)
def test_settings_that_do_not_read_are_refused_saying_where(text: str, says: str) -> None:
    with pytest.raises(shipped.SettingsError) as info:
        shipped.load(text)
    assert str(info.value).startswith(says)
    assert "\n" not in str(info.value)


def test_window_left_takes_minus_one_for_full_attention() -> None:
    assert shipped.load(_group(window_left=-1)).groups[0].window_left == -1


def test_kvplans_own_copy_runs_to_one_line_saying_it_holds_no_settings(tmp_path: Path) -> None:
    path = ROOT / "kvplan" / "engines" / "kernels" / "flashinfer_decode.py"
    r = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=CLEAN_ENV, capture_output=True, text=True,
                       timeout=60, check=False)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("flashinfer_decode.py: cannot measure: SETTINGS_JSON holds no settings: write this file with "
                        "kvplan emit --target flashinfer; nothing written\n")


def test_an_edited_setting_that_does_not_read_is_one_line_and_exit_2(tmp_path: Path) -> None:
    text = _script(PLANS[0][1])
    assert text.count('\n  "batch": 16,\n') == 1
    edited = text.replace('\n  "batch": 16,\n', '\n  "batch": "sixteen",\n')
    script = tmp_path / "flashinfer_decode.py"
    script.write_text(edited, encoding="utf-8")
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=CLEAN_ENV, capture_output=True, text=True,
                       timeout=60, check=False)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ('flashinfer_decode.py: cannot measure: SETTINGS_JSON.batch: "sixteen": give int; nothing '
                        "written\n")


# ------------------------------------------------------------------ the calls a user pastes are the calls it makes

class Recorder:
    """A stand-in for torch or flashinfer: every attribute is one, and every call is logged and returns one."""

    def __init__(self, log: list[str], path: str) -> None:
        self.log, self.path = log, path

    def __getattr__(self, name: str) -> Recorder:
        return Recorder(self.log, f"{self.path}.{name}")

    def __call__(self, *args: object, **kwargs: object) -> Recorder:
        if self.path == "torch.tensor":   # a page table: named by its values, not logged (both sides build it)
            return Recorder(self.log, f"tensor{args[0]!r}")
        self.log.append(f"{self.path}({', '.join([*map(repr, args), *(f'{k}={v!r}' for k, v in kwargs.items())])})")
        return Recorder(self.log, f"<{self.path} #{len(self.log)}>")

    def __repr__(self) -> str:
        return self.path


def _made_by_plan_wrappers(module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log: list[str] = []
    monkeypatch.setitem(sys.modules, "torch", Recorder(log, "torch"))
    monkeypatch.setitem(sys.modules, "flashinfer", Recorder(log, "flashinfer"))
    s = module.settings()
    module.plan_wrappers(s, "WORKSPACE", module.groups(s))
    return log


def _made_by_the_pasted_calls(module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each group's lines of `--calls`, run with that group's page table bound to the names the first line gives."""
    log: list[str] = []
    torch, flashinfer = Recorder(log, "torch"), Recorder(log, "flashinfer")
    monkeypatch.setitem(sys.modules, "torch", torch)
    s = module.settings()
    chunks, current = [], []
    for line in module.calls(s).splitlines()[1:]:
        if line.startswith("# "):
            chunks.append(current := [])
        else:
            current.append(line)
    assert len(chunks) == len(s.groups)
    for laid, chunk in zip(module.groups(s), chunks):
        names = {"torch": torch, "flashinfer": flashinfer, "workspace": "WORKSPACE",
                 **module.device_tables(s, laid)}
        exec(compile("\n".join(chunk), "pasted", "exec"), names)   # noqa: S102  the printed calls, as a user pastes
    return log


@pytest.mark.parametrize("name,plan", PLANS, ids=IDS)
def test_the_pasted_calls_make_the_calls_the_benchmark_makes(name: str, plan: Plan, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load(_script(plan), tmp_path)
    made = _made_by_plan_wrappers(module, monkeypatch)
    pasted = _made_by_the_pasted_calls(module, monkeypatch)
    groups = len(plan.scenario.model.window_groups)
    assert len([c for c in made if ".plan(" in c]) == groups
    assert pasted == made


def test_calls_prints_them_without_torch_or_kvplan(tmp_path: Path) -> None:
    r = _run(tmp_path, {"torch": BLOCKED}, "--calls")   # the script of PLANS[0], kvplan blocked too
    (tmp_path / "copy").mkdir()
    module = _load(_script(PLANS[0][1]), tmp_path / "copy")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == module.calls(module.settings())
    ast.parse(r.stdout)   # Python, as pasted


def test_help_runs_without_torch_flashinfer_or_kvplan(tmp_path: Path) -> None:
    r = _run(tmp_path, {"torch": BLOCKED, "flashinfer": BLOCKED}, "--help")
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.startswith("usage: flashinfer_decode.py") and "--calls" in r.stdout
