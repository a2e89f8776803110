"""Nothing a spec or a path holds escapes into an emitted file: every target, hostile names and paths.

The spec path is written into the header of every file and the language does not check it (a file may be named
`x<LF>touch PWNED<LF>#.kvp`); scenario names, model ids and hub ids are checked by the language (KV019,
tests/unit/lang/test_control_characters.py), and are made hostile here directly on the plan, so that the writers'
own quoting is what is tested. For each hostile text and each target the files are emitted twice, once with the
text and once with a plain marker in its place, and each file with the text must

- parse as its format: `bash -n`, `yaml.safe_load_all` with the same documents of the same kinds, `ast.parse`,
  `json.loads`;
- hold the same lines as the file with the marker (str.splitlines, which breaks at every line boundary Unicode and
  YAML and Python know), differing only in lines that hold the marker;
- give the text back where it was written: the header's spec and scenario (`lint --check-digest` reads them), the
  launcher's model argument, the benchmark's MODEL constant, the JSON's `_kvplan` fields.

A model id no shell word can hold on one line (a line feed, a carriage return, any control character) is refused
with a KvplanError by the targets that write a launcher, rather than split over lines.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any, Callable, Optional

import attrs
import pytest
import yaml

from kvplan.app.digest import read_header
from kvplan.app.replan import emit
from kvplan.base import controls
from kvplan.base.errors import KvplanError
from kvplan.catalog.engines import concrete
from kvplan.engines import DeployOptions
from kvplan.engines.k8s import k8s_name
from kvplan.lang import check_file
from kvplan.planner import for_engine, plans_for
from kvplan.planner.plan import Plan
from tests.paths import ROOT

# Slow: hostile names through every engine target's files (about 3 s).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow

#: Hostile text: each class of control character, the line and paragraph separators, bidirectional overrides,
#: quotes, shell substitutions, a YAML document marker, a Python docstring's quotes, a backslash, comment openers,
#: the header's own separator, and the issue's two payloads.
HOSTILE = ["\n", "\r", "\x00", "\t", "\x0b", "\x0c", "\x1b[2J", "\x1c", "\x7f", "\x85", "\u2028", "\u2029",
           "\u202e", "\u2067", "\u200f", "\u061c", "'", '"', "$(touch PWNED)", "`touch PWNED`", "\n---\nkind: Pod\n",
           '"""', "\\", "#", "*/", " · scenario x · plan sha256:0 · ", "\ntouch PWNED\n#", "\r\r---\rkind: Pod",
           '"leading', "\\n"]
IDS = [ascii(h)[1:-1] or "empty" for h in HOSTILE]

MARK = "MARK"
_DIGEST = re.compile(r"sha256:[0-9a-f]{16}")

#: (spec, scenario, target, deploy options): every target, LMCache with both loaders, Kubernetes with a ConfigMap (of
#: trtllm.yaml) and as a LeaderWorkerSet of two nodes under vLLM and SGLang.
CASES = [
    *[("tests/data/emit/host-tier.kvp", 0, t, None) for t in ("vllm", "sglang", "trtllm", "flashinfer", "k8s")],
    ("tests/data/emit/tier-ssd.kvp", 0, "lmcache", None),
    ("tests/data/k8s/two-nodes.kvp", 0, "k8s", None),
    ("tests/data/k8s/two-nodes.kvp", 1, "k8s", None),
    ("tests/data/k8s/trtllm.kvp", 0, "k8s", DeployOptions(image="nvcr.io/nvidia/tensorrt-llm/release:main")),
]
CASE_IDS = [f"{Path(s).stem}:{i}:{t}" for s, i, t, _ in CASES]

_PLANS: dict[str, list[Plan]] = {}


def _plan(spec: str, index: int) -> Plan:
    if spec not in _PLANS:
        result = check_file(str(ROOT / spec))
        assert result.ok, result.diagnostics
        # each with the plans made for every engine, which a renamed plan keeps (emit plans none again)
        _PLANS[spec] = [attrs.evolve(p, engines=tuple(for_engine(p, e) for e in concrete()))
                        for p in plans_for(result)]
    return _PLANS[spec][index]


def _renamed(p: Plan, name: Optional[str] = None, model: Optional[str] = None) -> Plan:
    """`p` (and the plans made for each engine) with another scenario name, or another model id, hub id and
    device id."""

    def one(q: Plan) -> Plan:
        sc = q.scenario
        if name is not None:
            sc = attrs.evolve(sc, name=name)
        if model is not None:
            sc = attrs.evolve(sc, model=attrs.evolve(sc.model, id=f"org/m{model}", hf_id=f"org/m{model}"),
                              device=attrs.evolve(sc.device, id=f"gpu{model}"))
        return attrs.evolve(q, scenario=sc)

    return attrs.evolve(one(p), engines=tuple(one(q) for q in p.engines))


def _files(p: Plan, target: str, deploy: Optional[DeployOptions], spec: str) -> dict[str, str]:
    out = emit(p, target, spec=spec, deploy=deploy)
    assert not out.errors, out.errors
    assert out.files
    return {f.name: f.text for f in out.files}


def _bash_n(scripts: list[str], tmp: Path) -> None:
    """`bash -n` of every launcher at once: each script the body of a function of its own, so that one whose quoting
    is broken breaks the file (a script that ran past its function would end its `}` early or leave it unclosed)."""
    if not scripts:
        return
    path = tmp / "launchers.sh"
    path.write_text("".join(f"launcher_{i}() {{\n{text}}}\n" for i, text in enumerate(scripts)), encoding="utf-8")
    run = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr


def _exec_words(text: str) -> list[str]:
    """The words the launcher execs, read by shlex from `exec` to the last continued line."""
    body = text[text.index("\nexec ") + 6:]
    return shlex.split(body.replace("\\\n", " "))


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _kinds(text: str) -> list[Any]:
    return [(d or {}).get("kind") for d in yaml.load_all(text, Loader=_LOADER)]


def _python_constants(text: str) -> dict[str, Any]:
    tree = ast.parse(text)
    return {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant)}


def _same_lines(hostile: str, benign: str, name: str) -> None:
    """The same lines, but for lines that hold the marker; no line starts with an injected payload."""
    h, b = hostile.splitlines(), benign.splitlines()
    assert len(h) == len(b), f"{name}: {len(h)} lines, {len(b)} with a plain name"
    for x, y in zip(h, b):
        assert x == y or MARK in y, f"{name}: {x!r} where the plain file has {y!r}"
        assert not x.lstrip().startswith(("touch PWNED", "kind: Pod")), f"{name}: {x!r}"


def _check(files: dict[str, str], benign: dict[str, str], where: Callable[[str, str], None]) -> list[str]:
    """Each file against the file with the marker (see the module's docstring); the launchers, for `_bash_n`."""
    assert files.keys() == benign.keys()
    for name, text in files.items():
        _same_lines(text, benign[name], name)
        if name.endswith(".yaml"):
            assert _kinds(text) == _kinds(benign[name]), name
        elif name.endswith(".py"):
            ast.parse(text)
        elif name.endswith(".json"):
            json.loads(text)
        where(name, text)
    return [text for name, text in files.items() if name.endswith(".sh")]


def _read_back(tmp: Path, spec: str, scenario: str) -> Callable[[str, str], None]:
    """A check that each file names `spec` and `scenario` as `lint --check-digest` reads them: the header's fields,
    or a JSON file's `_kvplan` key."""

    def where(name: str, text: str) -> None:
        if name.endswith(".json"):
            head = json.loads(text)["_kvplan"]
        else:
            (tmp / name).write_text(text, encoding="utf-8")
            head, _ = read_header(tmp / name)
        assert head is not None and (head["spec"], head["scenario"]) == (spec, scenario), name

    return where


@pytest.mark.parametrize(("spec", "index", "target", "deploy"), CASES, ids=CASE_IDS)
def test_a_hostile_spec_path_stays_in_its_header(spec: str, index: int, target: str,
                                                 deploy: Optional[DeployOptions], tmp_path: Path) -> None:
    p = _plan(spec, index)
    benign = _files(p, target, deploy, f"specs/x{MARK}y.kvp")
    scripts: list[str] = []
    for hostile in HOSTILE:
        path = f"specs/x{hostile}y.kvp"
        scripts += _check(_files(p, target, deploy, path), benign, _read_back(tmp_path, path, p.scenario.name))
    _bash_n(scripts, tmp_path)


@pytest.mark.parametrize(("spec", "index", "target", "deploy"), CASES, ids=CASE_IDS)
def test_a_hostile_scenario_name_stays_in_its_header(spec: str, index: int, target: str,
                                                     deploy: Optional[DeployOptions], tmp_path: Path) -> None:
    benign = _files(_renamed(_plan(spec, index), name=f"chat{MARK}"), target, deploy, "s.kvp")
    scripts: list[str] = []
    for hostile in HOSTILE:
        name = f"chat{hostile}"
        files = _files(_renamed(_plan(spec, index), name=name), target, deploy, "s.kvp")
        # the objects' names are the scenario's as a DNS label (k8s_name), the marker's `chatmark`
        label = k8s_name(name, "vllm").removesuffix("-vllm")
        files = {n: re.sub(f"{re.escape(label)}(?=-(?:vllm|sglang|trtllm)\\b)", "chatmark", t)
                 for n, t in files.items()}
        scripts += _check(files, benign, _read_back(tmp_path, "s.kvp", name))
    _bash_n(scripts, tmp_path)


def _strings(obj: object) -> list[str]:
    """Every string in a loaded YAML document."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


@pytest.mark.parametrize(("spec", "index", "target", "deploy"), CASES, ids=CASE_IDS)
def test_a_hostile_model_and_device_id_are_quoted_in_every_format(spec: str, index: int, target: str,
                                                                  deploy: Optional[DeployOptions],
                                                                  tmp_path: Path) -> None:
    benign = {n: _DIGEST.sub("sha256:0", t)
              for n, t in _files(_renamed(_plan(spec, index), model=MARK), target, deploy, "s.kvp").items()}
    scripts: list[str] = []
    for hostile in HOSTILE:
        p = _renamed(_plan(spec, index), model=hostile)
        model = f"org/m{hostile}"
        if target != "flashinfer" and controls.first(model) is not None:  # every other target writes a launcher
            with pytest.raises(KvplanError, match="into a launcher script"):
                emit(p, target, spec="s.kvp", deploy=deploy)
            continue

        def where(name: str, text: str, model: str = model, hostile: str = hostile) -> None:
            if name.endswith(".sh"):
                assert model in _exec_words(text), name
            elif name.endswith(".py"):
                settings = json.loads(_python_constants(text)["SETTINGS_JSON"])   # the one literal
                assert (settings["model"], settings["device"]) == (model, f"gpu{hostile}")
            elif name.startswith("k8s-"):
                docs = yaml.load_all(text, Loader=_LOADER)
                pods = [d for d in docs if d and d["kind"] in ("Deployment", "LeaderWorkerSet")]
                # Kubernetes reads `$$` in a command's words as `$` (and `$(NAME)` as a variable): k8s.literal
                assert pods and all(model in [w.replace("$$", "$") for w in _strings(d)] for d in pods), name

        # the model and the device are in the plan's digest (the catalog records it used)
        files = {n: _DIGEST.sub("sha256:0", t) for n, t in _files(p, target, deploy, "s.kvp").items()}
        scripts += _check(files, benign, where)
    _bash_n(scripts, tmp_path)
