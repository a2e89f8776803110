"""Cold start: what `kvplan advise` loads and parses, as properties (bench/bench_coldstart.py times it).

No test here asserts a time: the modules a command imports and the files it parses are what
the time is made of, and those can be checked exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan import catalog
from tests.paths import ROOT

SPEC = ROOT / "examples" / "w2-batch32.kvp"

#: Modules `kvplan advise` must not load: optional heavy dependencies, what other commands run (the
#: linter too: advise needs only its settings), importlib.resources (with zipfile and its
#: readers: ~7 ms) for four files that sit beside the code, pathlib (with urllib.parse and
#: ipaddress: ~3 ms) for a few path operations, numpy.typing, which is for annotations only, and difflib
#: (with heapq: ~1 ms), which only a misspelt word needs (kvplan.base.near).
NOT_FOR_ADVISE = ("matplotlib", "yaml", "jsonschema", "importlib.resources", "zipfile",
                  "kvplan.engines", "kvplan.render.report", "kvplan.render.plot", "kvplan.model.sweep",
                  "kvplan.lang.lint", "pathlib", "urllib.parse", "ipaddress", "numpy.typing", "difflib")

_RUN_ADVISE = """
import json, sys
from kvplan.cli import main
try:
    main(["advise", sys.argv[1]])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def advise_report() -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _RUN_ADVISE, str(SPEC)], cwd=ROOT, capture_output=True,
                          text=True, check=False, timeout=120)
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["exit"] == 0, done.stderr
    assert "plan for w2-batch32" in done.stdout
    return report


@pytest.fixture(scope="module")
def advise_modules(advise_report: dict[str, object]) -> list[str]:
    return list(advise_report["modules"])  # type: ignore[call-overload]


def test_advise_runs_the_shipped_parser_without_importing_lark(advise_modules: list[str]) -> None:
    # kvplan/grammar/kvp_parser.py is lark's standalone parser: lark itself (~40 ms of imports) and its grammar
    # analysis (~250 ms) are for tools/build_parser.py and the tests, not for a run.
    assert "kvplan.grammar.kvp_parser" in advise_modules
    assert [m for m in advise_modules if m.split(".")[0] == "lark"] == []


@pytest.fixture(scope="module")
def baseline_modules() -> set[str]:
    """What the cold-start baseline, `import numpy, click, lark, attrs`, loads by itself (older numpy releases
    import pathlib, for one): kvplan is not charged for those."""
    done = subprocess.run([sys.executable, "-c", "import json, sys, numpy, click, lark, attrs; "
                           "print(json.dumps(sorted(sys.modules)))"], capture_output=True, text=True, check=True,
                          timeout=120)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("name", NOT_FOR_ADVISE)
def test_advise_does_not_import(advise_modules: list[str], baseline_modules: set[str], name: str) -> None:
    loaded = [m for m in advise_modules if (m == name or m.startswith(name + ".")) and m not in baseline_modules]
    assert not loaded, f"kvplan advise imported {loaded}"


@pytest.mark.parametrize("command", ["advise", "report"])  # emit checks its targets first, with the engines
def test_a_spec_with_errors_never_loads_the_planner(tmp_path: Path, command: str) -> None:
    # The spec is checked before the planner is imported: a spec with errors costs neither it nor numpy.
    bad = tmp_path / "bad.kvp"
    bad.write_text(SPEC.read_text(encoding="utf-8").replace("batch   =", "bacth   =", 1), encoding="utf-8")
    args = [command, str(bad)] + (["-o", str(tmp_path / "out")] if command == "report" else [])
    done = subprocess.run([sys.executable, "-c", _RUN_ADVISE.replace('["advise", sys.argv[1]]', repr(args))],
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["exit"] == 2, done.stderr
    assert "bacth" in done.stderr
    loaded = [m for m in report["modules"] if m.split(".")[0] == "numpy" or m.startswith("kvplan.planner")]
    assert loaded == []


def _clear_catalog_caches() -> None:
    for loader in (catalog._load_toml, catalog.models, catalog.aliases):
        getattr(loader, "cache_clear", lambda: None)()


def test_a_catalog_file_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # An alias (llama-3.1-70b) is looked up in the table models.toml was read into: one parse, not two.
    parsed: list[str] = []
    real_parse = catalog._parse

    def counting_parse(name: str, raw: bytes):  # type: ignore[no-untyped-def]
        parsed.append(name)
        return real_parse(name, raw)

    _clear_catalog_caches()
    monkeypatch.setattr(catalog, "_parse", counting_parse)
    try:
        assert catalog.get_model("llama-3.1-70b").id == "llama-3-70b"
        assert catalog.get_model("llama3-8b").id == "llama-3-8b"
    finally:
        monkeypatch.undo()
        _clear_catalog_caches()
    assert parsed == ["models.toml"]


def test_the_command_line_makes_each_kind_of_path_type_once() -> None:
    # Each click.Path() looks up a translation of its name with gettext (~35 µs); kvplan.cli made 29 of them,
    # one per option or argument that takes a path, where three kinds (file, folder, either) serve them all.
    count = ("import click, click.types\n"
             "made = []\n"
             "real = click.types.Path.__init__\n"
             "def init(self, *a, **k):\n"
             "    made.append(1)\n"
             "    real(self, *a, **k)\n"
             "click.types.Path.__init__ = init\n"
             "import kvplan.cli\n"
             "print(len(made))\n")
    done = subprocess.run([sys.executable, "-c", count], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=120)
    assert int(done.stdout) == 3, "kvplan.cli makes a click.Path of its own: use _FILE, _DIR or _ANY_PATH"


_COMPILED_AT_IMPORT = """
import contextlib, io, json, re, sys
real = re.compile
at_import = []
def compile(pattern, flags=0):
    f = sys._getframe(1)
    if f.f_code.co_name == "<module>" and f.f_globals.get("__name__", "").startswith("kvplan"):
        at_import.append(f.f_globals["__name__"])
    return real(pattern, flags)
re.compile = compile
from kvplan.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(["advise", sys.argv[1]])
    except SystemExit:
        pass
print(json.dumps(sorted(at_import)))
"""


def test_advise_compiles_at_import_only_the_expressions_it_uses() -> None:
    # A module-level re.compile costs 15-70 µs of every start-up; the expressions only an error, a calibration
    # profile, a user's JSON or a select/ignore setting needs are compiled on first use (re caches them).
    done = subprocess.run([sys.executable, "-c", _COMPILED_AT_IMPORT, str(SPEC)], cwd=ROOT, capture_output=True,
                          text=True, check=True, timeout=120)
    compiled = json.loads(done.stdout)
    assert compiled.count("kvplan.lang.syntax") == 1  # string escapes: every spec with a string
    assert not {"kvplan.base.limits", "kvplan.lang.settings", "kvplan.model.profile"} & set(compiled), compiled
