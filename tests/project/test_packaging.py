"""kvplan as users meet it: the built wheel and sdist, the pre-commit hooks, the CI workflow, shell completion.

The wheel is built offline (hatchling comes with the test extra) and installed with --no-deps into a fresh
virtual environment that sees, for the runtime dependencies, the directories where the environment under test
keeps them (not the base interpreter's); every command runs outside the checkout so that the installed copy,
not the editable one, answers.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT, load_tool

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXAMPLE = ROOT / "examples" / "w2-batch32.kvp"
VERSION = re.search(r'__version__ = "([^"]+)"', (ROOT / "kvplan" / "__init__.py").read_text(encoding="utf-8"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
DIST = PYPROJECT["project"]["name"]
DIST_FILE = re.sub(r"[-_.]+", "_", DIST).lower()  # how wheel and sdist file names spell it (PEP 427, PEP 625)
CATALOG_TOMLS = sorted(p.name for p in (ROOT / "kvplan" / "catalog").glob("*.toml"))
#: Their JSON copies (tools/build_catalog.py), which the installed package reads at start-up.
CATALOG_JSONS = sorted(p.name for p in (ROOT / "kvplan" / "catalog").glob("*.json"))
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}

# A spec with one lint error: pages pinned to one of the B200's two dies (R7, KV207, docs/rules/KV207.md).
# The two-space indents and unaligned `=` signs are not kvplan fmt's layout, so the file also needs formatting.
PINNED_ON_B200 = """\
deployment "chat-32k" {
    model = llama-3-70b
    device = b200

    workload {
      batch = 32
      context = 32k
    }

    pin {
        placement = pinned
    }

    expect {
        regime == kv-bound
    }
}
"""

# Keys of a hook in .pre-commit-hooks.yaml, as pre-commit documents them (pre-commit.com, "Creating new hooks").
PRE_COMMIT_REQUIRED = {"id", "name", "entry", "language"}
PRE_COMMIT_OPTIONAL = {"files", "exclude", "types", "types_or", "exclude_types", "always_run", "fail_fast",
                       "verbose", "pass_filenames", "require_serial", "description", "language_version",
                       "minimum_pre_commit_version", "args", "stages"}


def _run(argv: list[str], cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env={**CLEAN_ENV, **kw.pop("env", {})}, capture_output=True, text=True,
                          timeout=120, check=False, **kw)


def _kvplan_argv(entry: str) -> list[str]:
    """A hook's entry as pre-commit runs it, with `kvplan` being this interpreter's kvplan."""
    argv = shlex.split(entry)
    assert argv[0] == "kvplan"
    return [sys.executable, "-m", "kvplan", *argv[1:]]


# --- pre-commit hooks ------------------------------------------------------------------------------------------

def _hooks() -> dict[str, dict[str, Any]]:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert isinstance(hooks, list)
    return {h["id"]: h for h in hooks}


def test_pre_commit_hooks_have_the_keys_pre_commit_reads() -> None:
    hooks = _hooks()
    assert set(hooks) == {"kvplan-lint", "kvplan-fmt"}
    assert shlex.split(hooks["kvplan-lint"]["entry"]) == ["kvplan", "lint"]
    assert shlex.split(hooks["kvplan-fmt"]["entry"]) == ["kvplan", "fmt"]
    for hook in hooks.values():
        assert PRE_COMMIT_REQUIRED <= set(hook) <= PRE_COMMIT_REQUIRED | PRE_COMMIT_OPTIONAL, hook["id"]
        assert hook["language"] == "python"  # pre-commit pip-installs this repository: `kvplan` is on PATH
        assert hook.get("pass_filenames", True) is True  # both commands take the staged files as arguments
        files = re.compile(hook["files"])
        assert [bool(files.search(p)) for p in ("specs/w2.kvp", "w2.kvp.bak", "README.md", "x.kvp")] == \
            [True, False, False, True]


@pytest.mark.slow
def test_lint_hook_fails_a_spec_with_an_error_and_passes_a_clean_one(tmp_path: Path) -> None:
    (tmp_path / "chat-32k.kvp").write_text(PINNED_ON_B200, encoding="utf-8")
    (tmp_path / "w2-batch32.kvp").write_bytes(EXAMPLE.read_bytes())
    argv = _kvplan_argv(_hooks()["kvplan-lint"]["entry"])

    bad = _run([*argv, "chat-32k.kvp"], tmp_path)
    assert bad.returncode == 1, bad.stderr
    assert bad.stdout.startswith("chat-32k.kvp:11:9: KV207 ")  # the `placement = pinned` line
    good = _run([*argv, "w2-batch32.kvp"], tmp_path)
    assert (good.returncode, good.stdout) == (0, ""), good.stderr
    both = _run([*argv, "w2-batch32.kvp", "chat-32k.kvp"], tmp_path)  # pre-commit passes many files at once
    assert (both.returncode, both.stdout) == (1, bad.stdout)


@pytest.mark.slow
def test_fmt_hook_rewrites_an_unformatted_spec(tmp_path: Path) -> None:
    from kvplan.lang.fmt import format_source

    spec = tmp_path / "chat-32k.kvp"
    spec.write_text(PINNED_ON_B200, encoding="utf-8")
    argv = _kvplan_argv(_hooks()["kvplan-fmt"]["entry"])

    assert _run([*argv, "--check", spec.name], tmp_path).returncode == 1
    assert spec.read_text(encoding="utf-8") == PINNED_ON_B200  # --check writes nothing
    done = _run([*argv, spec.name], tmp_path)
    assert done.returncode == 0, done.stderr  # pre-commit fails the hook because the file changed
    formatted = spec.read_text(encoding="utf-8")
    assert formatted != PINNED_ON_B200
    assert formatted == format_source(PINNED_ON_B200, spec.name)
    assert "    model  = llama-3-70b\n" in formatted and "        batch   = 32\n" in formatted
    assert _run([*argv, "--check", spec.name], tmp_path).returncode == 0


# --- the GitHub Actions workflow -------------------------------------------------------------------------------

def _workflow(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def _steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for job in doc["jobs"].values() for s in job["steps"]]


def _commands(doc: dict[str, Any]) -> list[str]:
    """Every shell line of every `run:` step."""
    return [line.strip() for s in _steps(doc) if "run" in s for line in s["run"].splitlines() if line.strip()]


def _readme_commands() -> list[str]:
    """The lines of the README's opening ```sh block: the install-and-run line, then the install-and-test line."""
    block = re.match(r"# [^\n]+\n\n```sh\n(.*?)\n```\n", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert block is not None, "README.md must open with its ```sh block of two commands"
    return block.group(1).splitlines()


def _readme_first_command() -> str:
    install, command = (part.strip() for part in _readme_commands()[0].split("&&"))
    assert install == "pip install ."
    return command


def test_workflow_lints_formats_uploads_sarif_and_runs_the_readme_command_from_the_wheel() -> None:
    doc = _workflow(ROOT / ".github" / "workflows" / "kvplan.yml")
    assert set(doc["on"]) == {"push", "pull_request"}
    lint_job = doc["jobs"]["lint-specs"]
    assert lint_job["permissions"]["security-events"] == "write"
    lint_cmds = _commands({"jobs": {"lint-specs": lint_job}})
    for wanted in ("pip install .", "kvplan lint examples --output-format github", "kvplan fmt --check examples"):
        assert wanted in lint_cmds
    sarif = [c for c in lint_cmds if "--output-format sarif" in c]
    assert sarif == ["kvplan lint examples --output-format sarif > kvplan.sarif || test $? -eq 1"]
    (upload,) = [s for s in lint_job["steps"] if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    assert upload["with"]["sarif_file"] == "kvplan.sarif"

    wheel_cmds = _commands({"jobs": {"wheel": doc["jobs"]["wheel"]}})
    assert "python -m build" in wheel_cmds
    assert _readme_first_command() in wheel_cmds
    assert any(c.startswith('python -m venv "$RUNNER_TEMP/venv"') for c in wheel_cmds)
    assert any("pip\" install dist/*.whl" in c for c in wheel_cmds)


def test_workflow_kvplan_commands_parse_with_the_cli() -> None:
    doc = _workflow(ROOT / ".github" / "workflows" / "kvplan.yml")
    kvplan_cmds = [c for c in _commands(doc) if c.startswith("kvplan ")]
    assert len(kvplan_cmds) >= 5
    for line in kvplan_cmds:
        words = shlex.split(line)
        cut = next((i for i, w in enumerate(words) if w in {">", "|", "||", "&&", ";"}), len(words))
        name, *args = words[1:cut]
        if name.startswith("-"):  # kvplan --version
            main.make_context("kvplan", [name, *args], resilient_parsing=True)
            continue
        main.commands[name].make_context(name, args)  # raises click.UsageError on an unknown option or choice


def test_workflow_matches_the_example_in_cli_lint_md() -> None:
    text = (ROOT / "docs" / "cli-lint.md").read_text(encoding="utf-8")
    block = re.search(r"## A GitHub Actions workflow\n\n```yaml\n(.*?)```", text, re.DOTALL)
    assert block is not None
    documented = yaml.safe_load(block.group(1))
    documented["on"] = documented.pop(True, documented.get("on"))
    ours = _workflow(ROOT / ".github" / "workflows" / "kvplan.yml")
    assert documented["on"] == ours["on"]
    doc_job, our_job = documented["jobs"]["lint-specs"], ours["jobs"]["lint-specs"]
    assert doc_job["permissions"].items() <= our_job["permissions"].items()
    assert [s["uses"] for s in doc_job["steps"] if "uses" in s] == [s["uses"] for s in our_job["steps"] if "uses" in s]
    # The same lint commands, on this repository's examples/ instead of the docs' specs/.
    ours_lint = [c for c in _commands({"jobs": {"j": our_job}}) if c.startswith("kvplan lint")]
    doc_lint = [c.replace("specs/", "examples") for c in _commands({"jobs": {"j": doc_job}}) if c.startswith("kvplan")]
    assert doc_lint == ours_lint


def test_ci_md_shows_the_shipped_workflow_and_hooks() -> None:
    blocks = [yaml.safe_load(b) for b in
              re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "ci.md").read_text(encoding="utf-8"), re.DOTALL)]
    ours = _workflow(ROOT / ".github" / "workflows" / "kvplan.yml")
    whole, wheel_job, test_job, engines_job, remote, local = blocks
    whole["on"] = whole.pop(True, whole.get("on"))
    assert whole["on"] == ours["on"] and whole["jobs"]["lint-specs"] == ours["jobs"]["lint-specs"]
    assert wheel_job["wheel"] == ours["jobs"]["wheel"]
    assert test_job["test"] == ours["jobs"]["test"]
    assert engines_job["engines"] == ours["jobs"]["engines"]
    hooks = _hooks()
    assert [h["id"] for h in remote["repos"][0]["hooks"]] == list(hooks)
    for h in local["repos"][0]["hooks"]:
        shipped = hooks[h["id"]]
        assert (h["name"], h["entry"], h["files"]) == (shipped["name"], shipped["entry"], shipped["files"])


# --- .ci/run: the README's test command in a fresh virtual environment -------------------------------------

CI_RUN = ROOT / ".ci" / "run"


def _ci_run_lines() -> list[str]:
    """.ci/run's shell lines, comments and blank lines left out."""
    lines = [line.strip() for line in CI_RUN.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_readme_opens_with_the_two_commands() -> None:
    assert _readme_commands() == ["pip install . && kvplan advise examples/w2-batch32.kvp",
                                  "pip install '.[test]' && python -m pytest --run-slow"]


def test_ci_run_runs_the_readmes_test_command_verbatim_in_a_fresh_venv() -> None:
    lines = _ci_run_lines()
    test_command = _readme_commands()[1]
    assert lines.count(test_command) == 1, f".ci/run must run {test_command!r} exactly as README.md writes it"
    at = lines.index(test_command)
    # A new virtual environment in a temporary directory, activated, before the command; removed on exit.
    venv = [i for i, line in enumerate(lines) if re.fullmatch(r'python3 -m venv "\$(\w+)/venv"', line)]
    assert len(venv) == 1 and venv[0] < at
    scratch = re.fullmatch(r'python3 -m venv "\$(\w+)/venv"', lines[venv[0]]).group(1)  # type: ignore[union-attr]
    assert f'{scratch}="$(mktemp -d)"' in lines[:venv[0]]
    assert f"trap 'rm -rf \"${scratch}\"' EXIT" in lines[:at]
    assert f'. "${scratch}/venv/bin/activate"' in lines[venv[0]:at]
    assert lines[0] == "set -euo pipefail" and lines[1] == 'cd "$(dirname "$0")/.."'


# Stand-ins for python3, pip and python: .ci/run runs end to end in a second, and nothing is installed anywhere.
# Outside the fake virtual environment `pip` and `python` refuse (exit 97), so a script that skips the venv fails.
_FAKE_PYTHON3 = """\
#!/bin/sh
[ "$1 $2" = "-m venv" ] && [ $# -eq 3 ] || { echo "fake python3: only -m venv DIR" >&2; exit 97; }
mkdir -p "$3/bin"
printf 'VIRTUAL_ENV="%s"; export VIRTUAL_ENV; PATH="%s/bin:$PATH"; export PATH\\n' "$3" "$3" > "$3/bin/activate"
cp "$FAKE_SHIMS/venv-pip" "$3/bin/pip"; cp "$FAKE_SHIMS/venv-python" "$3/bin/python"
echo "venv $3" >> "$FAKE_LOG"
"""
_FAKE_VENV_TOOL = """\
#!/bin/sh
echo "{name} $* | cwd=$(pwd) | venv=$VIRTUAL_ENV | ci=$CI | pythonpath=${{PYTHONPATH-unset}}" >> "$FAKE_LOG"
for a in "$@"; do [ "$prev" = "-r" ] || [ "$prev" = "-c" ] && sed 's/^/  /' "$a" >> "$FAKE_LOG"; prev="$a"; done
exit "${{{rc}:-0}}"
"""
# The venv's python: pytest is faked; anything else (tools/dep_pins.py) runs on this interpreter.
_FAKE_VENV_PYTHON = """\
#!/bin/sh
if [ "$1 $2" = "-m pytest" ]; then
    echo "python $* | cwd=$(pwd) | venv=$VIRTUAL_ENV | ci=$CI | pythonpath=${{PYTHONPATH-unset}}" >> "$FAKE_LOG"
    exit "${{FAKE_PYTEST_RC:-0}}"
fi
exec {python} "$@"
"""
_FAKE_OUTSIDE = """\
#!/bin/sh
echo "outside-venv {name} $*" >> "$FAKE_LOG"
exit 97
"""


def _run_ci_with_fakes(tmp_path: Path, *argv: str, script: Path = CI_RUN,
                       **rcs: int) -> tuple[subprocess.CompletedProcess[str], list[str], Path]:
    shims, scratch, log = tmp_path / "shims", tmp_path / "tmp", tmp_path / "log"
    for d in (shims, scratch, tmp_path / "elsewhere"):
        d.mkdir()
    for name, text in {"python3": _FAKE_PYTHON3, "pip": _FAKE_OUTSIDE.format(name="pip"),
                       "python": _FAKE_OUTSIDE.format(name="python"),
                       "venv-pip": _FAKE_VENV_TOOL.format(name="pip", rc="FAKE_PIP_RC"),
                       "venv-python": _FAKE_VENV_PYTHON.format(python=shlex.quote(sys.executable))}.items():
        (shims / name).write_text(text, encoding="utf-8")
        (shims / name).chmod(0o755)
    # PYTHON (which tools/test-deps.sh reads) is dropped: the fake python3 must be the interpreter it uses.
    env = {**{k: v for k, v in CLEAN_ENV.items() if k != "PYTHON"}, "PATH": f"{shims}:{os.environ['PATH']}",
           "TMPDIR": str(scratch), "CI": "true",
           "FAKE_SHIMS": str(shims), "FAKE_LOG": str(log), "PYTHONPATH": "/nowhere",
           **{k: str(v) for k, v in rcs.items()}}
    # As CI runs it: `bash .ci/run`, no standard input; here from another directory, to check it finds the root.
    out = subprocess.run(["bash", str(script), *argv], cwd=tmp_path / "elsewhere", env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=60, check=False)
    return out, log.read_text(encoding="utf-8").splitlines() if log.exists() else [], scratch


def test_ci_run_makes_a_venv_runs_install_then_pytest_from_the_root_and_cleans_up(tmp_path: Path) -> None:
    out, log, scratch = _run_ci_with_fakes(tmp_path)
    assert out.returncode == 0, (out.stderr, log)
    assert len(log) == 3, log
    venv = log[0].removeprefix("venv ")
    assert Path(venv).name == "venv" and Path(venv).parent.parent == scratch  # mktemp -d under $TMPDIR
    # From the root, inside the venv, with the caller's PYTHONPATH (/nowhere) dropped.
    assert log[1:] == [f"pip install .[test] | cwd={ROOT} | venv={venv} | ci=true | pythonpath=unset",
                       f"python -m pytest --run-slow | cwd={ROOT} | venv={venv} | ci=true | pythonpath=unset"]
    assert list(scratch.iterdir()) == []  # the temporary directory is gone


@pytest.mark.parametrize(("rc", "expected"), [(1, 1), (2, 2), (5, 5)])
def test_ci_run_exits_with_pytests_status_and_no_tests_fails(tmp_path: Path, rc: int, expected: int) -> None:
    out, log, scratch = _run_ci_with_fakes(tmp_path, FAKE_PYTEST_RC=rc)
    assert out.returncode == expected, (out.stderr, log)
    assert [line.split(" |")[0] for line in log[1:]] == ["pip install .[test]", "python -m pytest --run-slow"]
    assert ("collected no tests" in out.stderr) == (rc == 5)
    assert list(scratch.iterdir()) == []


def test_ci_run_fails_without_running_pytest_when_the_install_fails(tmp_path: Path) -> None:
    out, log, scratch = _run_ci_with_fakes(tmp_path, FAKE_PIP_RC=1)
    assert out.returncode == 1, (out.stderr, log)
    assert [line.split(" |")[0] for line in log[1:]] == ["pip install .[test]"]
    assert list(scratch.iterdir()) == []


# --- dependency ranges: tools/dep_pins.py and tools/test-deps.sh ----------------------------------------------

TEST_DEPS = ROOT / "tools" / "test-deps.sh"
SUPPORTED_PYTHONS = [(3, 10), (3, 11), (3, 12), (3, 13)]


def _dep_pins() -> Any:
    return load_tool("dep_pins")


def _declared_names(extra: str | None) -> set[str]:
    reqs = PYPROJECT["project"]["optional-dependencies"][extra] if extra else PYPROJECT["project"]["dependencies"]
    return {re.sub(r"[-_.]+", "-", n).lower() for n, _ in _requirement_names(reqs)}


def test_requires_python_starts_at_the_oldest_python_the_ranges_cover() -> None:
    assert PYPROJECT["project"]["requires-python"] == ">=3.10"


@pytest.mark.parametrize("python", SUPPORTED_PYTHONS, ids=lambda v: "%d.%d" % v)
def test_every_dependency_declares_a_range_and_each_python_gets_one_minimum(python: tuple[int, int]) -> None:
    dep_pins = _dep_pins()
    reqs = dep_pins.declared(python=python)  # raises DepError on a requirement without >=LOW,<HIGH
    assert all(r.lower and r.upper for r in reqs)
    pins = dict(p.split("==") for p in dep_pins.minimum_pins(python=python))
    # Every runtime and test dependency is pinned once for this Python: the markers of one name do not overlap
    # (minimum_pins refuses two lower bounds) and leave no gap; tomli is only for Pythons without tomllib.
    wanted = (_declared_names(None) | _declared_names("test")) - ({"tomli"} if python >= (3, 11) else set())
    assert set(pins) == wanted
    for name in wanted:
        applying = [r for r in reqs if re.sub(r"[-_.]+", "-", r.name).lower() == name and r.applies]
        assert len(applying) == 1, (name, python, applying)
    # The lower bounds raised on purpose (docs/ci.md says why): the tests fail below them.
    assert tuple(int(x) for x in pins["lark"].split(".")) >= (1, 2, 1)  # RecursionError in UnexpectedToken.accepts
    assert int(pins["mypy"].split(".")[0]) >= 2  # older mypy --strict reports kvplan with older numpy stubs


def test_the_plot_extra_matches_the_test_extras_matplotlib() -> None:
    test = [r for r in PYPROJECT["project"]["optional-dependencies"]["test"] if r.startswith("matplotlib")]
    assert PYPROJECT["project"]["optional-dependencies"]["plot"] == test


def test_the_parquet_extra_matches_the_test_extras_pyarrow() -> None:
    """The Parquet tests run in CI (the `test` extra) against the range the `parquet` extra declares."""
    test = [r for r in PYPROJECT["project"]["optional-dependencies"]["test"] if r.startswith("pyarrow")]
    assert test and PYPROJECT["project"]["optional-dependencies"]["parquet"] == test


@pytest.mark.parametrize(("req", "complaint"), [
    ("click>=8.2", "declares no upper bound (<)"),
    ("click<9", "declares no lower bound (>=)"),
    ("click", "declares no lower bound (>=) and upper bound (<)"),
    ("click~=8.2", "is not one of its two bounds"),
    ("click>=8.2,<9; sys_platform == 'linux'", "only `python_version"),
    ("click[extra]>=8.2,<9", "extras of a dependency"),
])
def test_dep_pins_refuses_a_requirement_it_cannot_pin(req: str, complaint: str) -> None:
    dep_pins = _dep_pins()
    with pytest.raises(dep_pins.DepError) as err:
        dep_pins.parse(req, (3, 11))
    assert complaint in str(err.value) and repr(req) in str(err.value)


def test_dep_pins_reads_python_version_markers() -> None:
    dep_pins = _dep_pins()
    req = "numpy>=1.26,<3; python_version >= '3.12' and python_version < '3.13'"
    assert [dep_pins.parse(req, v).applies for v in SUPPORTED_PYTHONS] == [False, False, True, False]
    assert dep_pins.parse(req, (3, 12))[1:4] == ("numpy", "1.26", "3")


def test_dep_pins_command_prints_the_pins_and_refuses_a_pyproject_without_ranges(tmp_path: Path) -> None:
    dep_pins = _dep_pins()
    out = _run([sys.executable, str(ROOT / "tools" / "dep_pins.py"), "min"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == dep_pins.minimum_pins()
    assert _run([sys.executable, str(ROOT / "tools" / "dep_pins.py"), "max"], tmp_path).returncode == 2
    bare = tmp_path / "pyproject.toml"
    bare.write_text('[project]\nname = "x"\ndependencies = ["lark>=1.1.9"]\n', encoding="utf-8")
    with pytest.raises(dep_pins.DepError, match="no upper bound"):
        dep_pins.minimum_pins(bare, (3, 11))


def test_test_deps_min_installs_exactly_the_pins_from_pyproject_then_runs_pytest(tmp_path: Path) -> None:
    out, log, scratch = _run_ci_with_fakes(tmp_path, "min", "-x", script=TEST_DEPS, FAKE_PYTEST_RC=0)
    assert out.returncode == 0, (out.stderr, log)
    pins = [f"  {p}" for p in _dep_pins().minimum_pins()]
    steps = [line.split(" |")[0] for line in log if not line.startswith("  ")]
    if sys.version_info < (3, 11):  # tools/dep_pins.py needs tomli to read pyproject.toml; the pins then hold it
        assert steps.pop(1) == "pip install --quiet --disable-pip-version-check tomli"
    assert len(steps) == 4, log
    pins_file = re.fullmatch(r"pip install --quiet --disable-pip-version-check --only-binary=:all: -r (\S+)", steps[1])
    assert pins_file is not None and Path(pins_file.group(1)).parent.parent == scratch, steps[1]
    assert steps[2:] == [f"pip install --quiet --disable-pip-version-check -c {pins_file.group(1)} .[test]",
                         "python -m pytest -p no:cacheprovider --run-slow -x"]
    for step in steps[1:3]:  # the requirements file and the constraints file hold the pins, nothing else
        at = log.index(next(line for line in log if line.startswith(step + " |")))
        assert log[at + 1:at + 1 + len(pins)] == pins and not log[at + 1 + len(pins)].startswith("  ")
    assert all(line.split(" | cwd=")[1].startswith(f"{ROOT} ") for line in log if " | cwd=" in line)
    assert list(scratch.iterdir()) == []


def test_test_deps_newest_upgrades_everything_and_passes_pytests_status_on(tmp_path: Path) -> None:
    out, log, scratch = _run_ci_with_fakes(tmp_path, "newest", script=TEST_DEPS, FAKE_PYTEST_RC=5)
    assert out.returncode == 5, (out.stderr, log)
    assert "collected no tests" in out.stderr
    assert [line.split(" |")[0] for line in log[1:]] == [
        "pip install --quiet --disable-pip-version-check --upgrade --upgrade-strategy eager .[test]",
        "python -m pytest -p no:cacheprovider --run-slow"]
    assert list(scratch.iterdir()) == []


def test_test_deps_without_a_mode_is_a_usage_error(tmp_path: Path) -> None:
    out, log, _ = _run_ci_with_fakes(tmp_path, "oldest", script=TEST_DEPS)
    assert (out.returncode, log) == (2, [])
    assert out.stderr.startswith("usage: tools/test-deps.sh min|newest")


def test_workflow_test_job_runs_min_and_newest_on_each_python() -> None:
    doc = _workflow(ROOT / ".github" / "workflows" / "kvplan.yml")
    job = doc["jobs"]["test"]
    matrix = job["strategy"]["matrix"]
    assert matrix["deps"] == ["min", "newest"]
    assert matrix["python-version"] == ["%d.%d" % v for v in SUPPORTED_PYTHONS]
    assert job["strategy"]["fail-fast"] is False  # one red cell does not cancel the others
    (setup,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
    assert setup["with"]["python-version"] == "${{ matrix.python-version }}"
    assert _commands({"jobs": {"test": job}}) == ["PYTHON=python bash tools/test-deps.sh ${{ matrix.deps }}"]
    assert set(doc["jobs"]) == {"lint-specs", "wheel", "test", "engines"}


def test_workflow_engines_job_installs_the_engines_and_requires_them() -> None:
    """The engines job runs tools/test-engines.sh, which installs the pinned engines and runs `pytest -m engines`
    with KVPLAN_REQUIRE_ENGINES=1, so a skip cannot hide a failure; .ci/run installs none of them."""
    job = _workflow(ROOT / ".github" / "workflows" / "kvplan.yml")["jobs"]["engines"]
    assert _commands({"jobs": {"engines": job}}) == ["PYTHON=python bash tools/test-engines.sh"]
    script = (ROOT / "tools" / "test-engines.sh").read_text(encoding="utf-8")
    for pin in ("vllm==0.33.0", "--no-deps sglang==0.5.23 lmcache==0.5.6",
                "KVPLAN_REQUIRE_ENGINES=1 python -m pytest -m engines"):
        assert pin in script
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "vllm" not in ci and "test-engines" not in ci


# --- the distribution name ---------------------------------------------------------------------------------------

def test_distribution_is_not_named_kvplan_and_the_readme_says_so() -> None:
    # `kvplan` on PyPI is another project ("Plan vLLM deployments without the GPU"); the command and the import
    # package keep the name, the distribution does not.
    assert re.sub(r"[-_.]+", "", DIST).lower() != "kvplan"
    assert DIST == "kvcache-planner"
    assert PYPROJECT["project"]["scripts"] == {"kvplan": "kvplan.cli:main"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"The distribution is named **`{DIST}`**" in readme
    assert "`pip install kvplan` installs someone else's tool" in readme
    # No page tells a user to run `pip install kvplan`, which installs the other project; a paragraph that names
    # the command says that it does.
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for para in re.split(r"\n\s*\n", page.read_text(encoding="utf-8")):
            if re.search(r"pip install kvplan(?![-\w.])", para):
                assert "someone else's tool" in " ".join(para.split()), f"{page.relative_to(ROOT)}: {para.strip()}"


# --- the wheel, the sdist, and a fresh virtual environment -----------------------------------------------------

@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist)], check=True, cwd=dist, env=CLEAN_ENV, timeout=120)
    (built,) = dist.glob(f"{DIST_FILE}-*.whl")
    return built


def _requirement_names(requirements: list[str]) -> list[tuple[str, bool]]:
    """(distribution name, has a marker) for each requirement string; extras' requirements left out."""
    out = []
    for req in requirements:
        spec, _, marker = req.partition(";")
        if "extra ==" in marker.replace("extra==", "extra =="):
            continue
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec.strip())
        assert name is not None, req
        out.append((name.group(0), bool(marker.strip())))
    return out


def _runtime_dependency_dirs() -> list[str]:
    """The directories that hold kvplan's runtime dependencies, and theirs, in the environment under test.

    Not the base interpreter's site-packages: the environment under test (a venv made by .ci/run, say) is where
    `pip install '.[test]'` put them. A requirement with a marker that does not apply here is not installed.
    """
    from importlib import metadata

    declared = PYPROJECT["project"]["dependencies"]
    todo, seen, dirs = _requirement_names(declared), set(), []
    while todo:
        name, conditional = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            assert conditional, f"{name}, a runtime dependency, is not installed in {sys.prefix}"
            continue
        where = str(Path(str(dist.locate_file(""))).resolve())
        if where not in dirs:
            dirs.append(where)
        todo.extend(_requirement_names(dist.requires or []))
    return dirs


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel; its runtime dependencies are those of the environment under test.

    Offline: the wheel goes in with --no-deps, and a .pth file appends the directories where this environment
    keeps kvplan's runtime dependencies to the venv's sys.path, after the venv's own site-packages, so that the
    wheel's kvplan (not one this environment may hold, not the checkout) is the one imported.
    """
    where = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, env=CLEAN_ENV, timeout=120)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, env=CLEAN_ENV, capture_output=True, text=True, timeout=60).stdout.strip()
    Path(purelib, "kvplan_test_runtime_deps.pth").write_text(
        "".join(f"{d}\n" for d in _runtime_dependency_dirs()), encoding="utf-8")
    # --ignore-installed: a kvplan this environment holds (`pip install '.[test]'` installs one) is visible
    # through the .pth file and must not satisfy the requirement; the venv gets its own copy.
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q",
                    str(wheel)], check=True, cwd=where, env=CLEAN_ENV, timeout=120)
    return where


@pytest.mark.slow
def test_wheel_ships_the_grammar_the_catalogs_and_the_console_script(wheel: Path) -> None:
    assert VERSION is not None and wheel.name == f"{DIST_FILE}-{VERSION.group(1)}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = zf.read(f"{DIST_FILE}-{VERSION.group(1)}.dist-info/entry_points.txt").decode()
        metadata_text = zf.read(f"{DIST_FILE}-{VERSION.group(1)}.dist-info/METADATA").decode()
    assert "kvplan/grammar/kvp.lark" in names
    assert "kvplan/grammar/kvp_parser.py" in names  # lark's standalone parser (tools/build_parser.py)
    assert CATALOG_TOMLS and {f"kvplan/catalog/{n}" for n in CATALOG_TOMLS} <= names
    assert CATALOG_JSONS and {f"kvplan/catalog/{n}" for n in CATALOG_JSONS} <= names
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kvplan").rglob("*.py")}
    assert sources <= names
    assert not any(n.startswith(("tests/", "examples/", "docs/")) for n in names)
    assert re.search(r"^kvplan = kvplan\.cli:main$", entry_points, re.MULTILINE)
    assert re.search(rf"^Name: {re.escape(DIST)}$", metadata_text, re.MULTILINE)


@pytest.mark.slow
def test_sdist_and_the_wheel_built_from_it_ship_the_grammar(tmp_path: Path) -> None:
    # `python -m build` (the workflow's wheel job) builds the sdist, then the wheel from the unpacked sdist.
    # hatchling walks the tree once, following links and skipping a directory it has already seen: the top-level
    # `grammar` link is walked first, so `include = [...]` leaves kvplan/grammar/ out of the sdist, and the wheel
    # built from it has no grammar. `only-include` walks each listed path on its own and keeps both.
    sdist_dir = tmp_path / "sdist"
    build = "import sys; from hatchling.build import build_sdist; print(build_sdist(sys.argv[1]))"
    out = _run([sys.executable, "-c", build, str(sdist_dir)], ROOT)
    assert out.returncode == 0, out.stderr
    (sdist,) = sdist_dir.glob(f"{DIST_FILE}-*.tar.gz")
    top = f"{DIST_FILE}-{VERSION.group(1) if VERSION else ''}"
    with tarfile.open(sdist) as tf:
        names = set(tf.getnames())
        if hasattr(tarfile, "data_filter"):  # Python 3.12, and 3.10.12/3.11.4 onwards
            tf.extractall(tmp_path / "unpacked", filter="data")
        else:
            tf.extractall(tmp_path / "unpacked")
    wanted = {f"{top}/kvplan/grammar/kvp.lark", f"{top}/kvplan/grammar/kvp_parser.py",
              f"{top}/tools/build_parser.py", *(f"{top}/kvplan/catalog/{n}" for n in CATALOG_TOMLS + CATALOG_JSONS),
              f"{top}/examples/w2-batch32.kvp", f"{top}/pyproject.toml"}
    assert wanted <= names, sorted(wanted - names)
    wheel_dir = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(tmp_path / "unpacked" / top), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(wheel_dir)], check=True, cwd=tmp_path, env=CLEAN_ENV,
                   timeout=120)
    (from_sdist,) = wheel_dir.glob(f"{DIST_FILE}-*.whl")
    with zipfile.ZipFile(from_sdist) as zf:
        assert "kvplan/grammar/kvp.lark" in zf.namelist()
        assert "kvplan/grammar/kvp_parser.py" in zf.namelist()


@pytest.mark.slow
def test_readme_first_command_runs_from_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / EXAMPLE.name).write_bytes(EXAMPLE.read_bytes())
    python, script = venv / "bin" / "python", venv / "bin" / "kvplan"

    where = _run([str(python), "-c", "import kvplan; print(kvplan.__file__)"], tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve())  # not the editable checkout

    argv = shlex.split(_readme_first_command())
    assert argv[0] == "kvplan"
    installed = _run([str(script), *argv[1:]], tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.startswith("plan for w2-batch32: llama-3-70b on b200")
    # The wheel plans exactly as the source tree does.
    source = _run([sys.executable, "-m", "kvplan", *argv[1:]], tmp_path)
    assert source.returncode == 0 and installed.stdout == source.stdout


@pytest.mark.slow
def test_installed_python_m_kvplan_reports_the_package_version(venv: Path, tmp_path: Path) -> None:
    out = _run([str(venv / "bin" / "python"), "-m", "kvplan", "--version"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert VERSION is not None and out.stdout == f"kvplan, version {VERSION.group(1)}\n"


# --- shell completion ------------------------------------------------------------------------------------------

# What makes each script work, not click's exact text (which changes between click releases: 8.5 ends the script
# with one more newline than 8.4): it defines _kvplan_completion, which asks `kvplan` for completions through
# _KVPLAN_COMPLETE=<shell>_complete, and registers that function for the `kvplan` command.
COMPLETION_REGISTERS = {
    "bash": r"^\s*complete\b[^\n]* -F _kvplan_completion kvplan$",
    "zsh": r"^\s*compdef _kvplan_completion kvplan$",
    "fish": r"^complete\b[^\n]*(--command|-c) kvplan\b[^\n]*\(_kvplan_completion\)",
}
COMPLETION_DEFINES = {
    "bash": r"^_kvplan_completion\(\) \{$",
    "zsh": r"^_kvplan_completion\(\) \{$",
    "fish": r"^function _kvplan_completion\b",
}
SYNTAX_CHECK = {"bash": ["bash", "-n"], "zsh": ["zsh", "-n"], "fish": ["fish", "--no-execute"]}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_that_registers_kvplan_for_each_shell(shell: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["completion", shell])
    assert result.exit_code == 0, result.output
    script = result.output
    assert re.search(COMPLETION_DEFINES[shell], script, re.MULTILINE), script
    assert re.search(COMPLETION_REGISTERS[shell], script, re.MULTILINE), script
    assert f"_KVPLAN_COMPLETE={shell}_complete" in script
    assert "_KVPLAN_COMPLETE=" + next(s for s in COMPLETION_REGISTERS if s != shell) not in script
    # One trailing newline, whatever click's template ends with: `> kvplan.fish` gets no stray blank line.
    assert script.endswith("\n") and not script.endswith("\n\n")
    if shell == "zsh":
        assert script.startswith("#compdef kvplan\n")  # what zsh's autoloader reads from a file in $fpath
    checker = shutil.which(SYNTAX_CHECK[shell][0])
    if checker is not None:  # bash is everywhere kvplan's tests run; zsh and fish where they are installed
        (tmp_path / "script").write_text(script, encoding="utf-8")
        check = _run([checker, *SYNTAX_CHECK[shell][1:], "script"], tmp_path)
        assert check.returncode == 0, check.stderr
    else:
        assert shell != "bash"


def test_completion_unknown_shell_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["completion", "tcsh"])
    assert result.exit_code == 2
    # click words the message (its text is click's, and changes between releases); it names the value and the choices.
    (error,) = [line for line in result.output.splitlines() if "tcsh" in line]
    assert all(f"'{shell}'" in error for shell in ("bash", "zsh", "fish")), result.output


def test_bash_completion_script_completes_commands_and_choices(tmp_path: Path) -> None:
    wrapper = tmp_path / "kvplan"
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c "
                       "\"from kvplan.cli import main; main(prog_name='kvplan')\" \"$@\"\n", encoding="utf-8")
    wrapper.chmod(0o755)
    script = CliRunner().invoke(main, ["completion", "bash"]).output
    (tmp_path / "complete.bash").write_text(script, encoding="utf-8")
    probe = ('source complete.bash\n'
             'COMP_WORDS=(kvplan com); COMP_CWORD=1; _kvplan_completion ./kvplan; echo "${COMPREPLY[*]}"\n'
             'COMPREPLY=(); COMP_WORDS=(kvplan lint --output-format s); COMP_CWORD=3; _kvplan_completion ./kvplan; '
             'echo "${COMPREPLY[*]}"\n')
    out = _run(["bash", "--norc", "-c", probe], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["completion", "sarif"]
