"""The issue's cases, end to end: nothing a spec or its path holds runs when an emitted file is run.

A spec file named `x<LF>touch PWNED<LF>#.kvp` put `touch PWNED` on a line of its own in every launcher (running
vllm.sh created the file), one named with carriage returns put Python into flashinfer_decode.py, and a deployment
named `chat<CR>---<CR>kind: Pod` added a Pod to k8s-vllm.yaml while `kvplan lint` passed it. Every target and every
hostile text is covered at the writers, in tests/unit/app/test_injection.py; the language's refusal (KV019) in
tests/unit/lang/test_control_characters.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from tests.acceptance.test_service import _applied
from tests.paths import ROOT
from tests.unit.lang.test_security import CLEAN_ENV

# Slow: hostile names through every command and the scripts emit writes (about 12 s).
# The default `python -m pytest` leaves it out; --run-slow and CI run it.
pytestmark = pytest.mark.slow

SPEC = (ROOT / "tests" / "data" / "emit" / "host-tier.kvp").read_text(encoding="utf-8")

needs_sh = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")


def _kvplan(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], cwd=cwd, env=CLEAN_ENV, capture_output=True,
                          text=True, timeout=120, check=False)


def _stubs(tmp: Path) -> dict[str, str]:
    """An environment whose `vllm`, `python` and `trtllm-serve` exit 0 at once: the launchers run to their exec."""
    bin_dir = tmp / "stub-bin"
    bin_dir.mkdir()
    for name in ("vllm", "python", "trtllm-serve"):
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        stub.chmod(0o755)
    return {**CLEAN_ENV, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


@needs_sh
@pytest.mark.parametrize("name", ["x\ntouch PWNED\n#.kvp", "x\rtouch PWNED\r#.kvp", "x\u2028touch PWNED\u2029#.kvp"],
                         ids=["line-feeds", "carriage-returns", "separators"])
def test_running_what_emit_wrote_for_a_hostile_spec_path_runs_nothing_else(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(SPEC, encoding="utf-8")
    out = _kvplan(["emit", name, "--target", "all", "-o", "out"], tmp_path)
    assert out.returncode == 0, out.stderr
    scripts = sorted((tmp_path / "out").rglob("*.sh"))
    assert {s.name for s in scripts} == {"vllm.sh", "sglang.sh", "trtllm.sh", "lmcache-vllm.sh"}
    env = _stubs(tmp_path)
    for script in scripts:
        run = subprocess.run(["sh", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                             check=False)
        assert run.returncode == 0, (script.name, run.stderr)
        assert not (tmp_path / "PWNED").exists(), f"running {script.name} ran a line from the spec's path"
    (bench,) = (tmp_path / "out").rglob("flashinfer_decode.py")
    assert "touch PWNED" not in [line.strip() for line in bench.read_text(encoding="utf-8").splitlines()]


def test_python_in_a_spec_path_does_not_run_in_the_kernel_benchmark(tmp_path: Path) -> None:
    # Python ends a line (and so a comment) at a carriage return: the header would hold a statement of its own
    name = 'x\rimport pathlib; pathlib.Path("PWNED").touch()\r#.kvp'
    (tmp_path / name).write_text(SPEC, encoding="utf-8")
    assert _kvplan(["emit", name, "--target", "flashinfer", "-o", "out"], tmp_path).returncode == 0
    (bench,) = (tmp_path / "out").rglob("flashinfer_decode.py")
    # --help parses the arguments after the module's top level ran; it needs neither torch nor a GPU
    run = subprocess.run([sys.executable, str(bench), "--help"], cwd=tmp_path, env=CLEAN_ENV, capture_output=True,
                         text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert not (tmp_path / "PWNED").exists()


HOSTILE_NAME = SPEC.replace('deployment "host-tier" {', 'deployment "chat\r\r---\rkind: Pod" {')


def test_lint_refuses_a_deployment_name_with_carriage_returns_and_emit_writes_nothing(tmp_path: Path) -> None:
    assert HOSTILE_NAME != SPEC
    (tmp_path / "chat.kvp").write_text(HOSTILE_NAME, encoding="utf-8", newline="")
    lint = _kvplan(["lint", "chat.kvp"], tmp_path)
    assert lint.returncode == 1, lint.stdout
    assert lint.stdout.startswith("chat.kvp:5:17: KV019 this string holds U+000D (carriage return) and 2 more: ")
    assert "\r" not in lint.stdout
    full = _kvplan(["lint", "--output-format", "full", "chat.kvp"], tmp_path)
    assert "\r" not in full.stdout and '5 | deployment "chat\u240d\u240d---\u240dkind: Pod" {' in full.stdout
    emit = _kvplan(["emit", "chat.kvp", "--target", "k8s", "-o", "out"], tmp_path)
    assert emit.returncode == 2 and "KV019" in emit.stderr and "\r" not in emit.stderr
    assert not (tmp_path / "out").exists()


def test_the_fix_lint_offers_for_the_name_lints_clean(tmp_path: Path) -> None:
    (tmp_path / "chat.kvp").write_text(HOSTILE_NAME, encoding="utf-8", newline="")
    lint = _kvplan(["lint", "--output-format", "json", "chat.kvp"], tmp_path)
    (diag,) = json.loads(lint.stdout)["diagnostics"]
    (fix,) = diag["fixes"]
    (tmp_path / "chat.kvp").write_text(_applied(HOSTILE_NAME, fix), encoding="utf-8", newline="")
    again = _kvplan(["lint", "chat.kvp"], tmp_path)
    assert again.returncode == 0, again.stdout
    emit = _kvplan(["emit", "chat.kvp", "--target", "k8s"], tmp_path)
    assert emit.returncode == 0 and "scenario chat---kind: Pod · plan" in emit.stdout


def test_report_names_a_hostile_spec_path_on_one_line(tmp_path: Path) -> None:
    name = "x\n# Injected\n`.kvp"
    (tmp_path / name).write_text(SPEC, encoding="utf-8")
    out = _kvplan(["report", name, "-o", "rep"], tmp_path)
    assert out.returncode == 0, out.stderr
    (index,) = (tmp_path / "rep").rglob("index.md")
    lines = index.read_text(encoding="utf-8").splitlines()
    assert "# Injected" not in lines
    (spec_line,) = [line for line in lines if line.startswith("Spec: ")]
    assert spec_line == 'Spec: ``"x\\n# Injected\\n`.kvp"``.'  # a literal, in a code span of two backticks


def test_import_writes_a_config_path_with_a_quote_and_a_backslash_as_a_string_lint_reads_back(tmp_path: Path) -> None:
    folder = tmp_path / 'we"ird\\dir'
    folder.mkdir()
    shutil.copy(ROOT / "tests" / "data" / "hf" / "Qwen--Qwen3-8B.json", folder / "config.json")
    out = _kvplan(["import", "--from", "vllm", "vllm serve Qwen/Qwen3-8B --max-model-len 8192", "--device", "h100-sxm",
                   "--model-config", 'we"ird\\dir/config.json', "-o", "spec.kvp"], tmp_path)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "spec.kvp").read_text(encoding="utf-8")
    assert '    config = "we\\"ird\\\\dir/config.json"\n' in text
    lint = _kvplan(["lint", "spec.kvp"], tmp_path)
    assert lint.returncode == 0, lint.stdout  # the config was found: the path read back is the one given


def test_import_writes_the_command_it_read_into_comments_without_control_or_bidi_characters(tmp_path: Path) -> None:
    command = "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --served-model-name a\u202eb\x1b[2Jc --api-key x\x0bk"
    out = _kvplan(["import", "--from", "vllm", command, "--device", "h100-sxm", "-o", "spec.kvp"], tmp_path)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "spec.kvp").read_text(encoding="utf-8")
    assert not [ch for ch in text if ch != "\n" and (ch < " " or ch in "\x7f\u202e")]
    assert "# source: vllm serve Qwen/Qwen3-8B --max-model-len 8192 --served-model-name a\\u202eb\\u001b[2Jc " in text
    assert _kvplan(["lint", "spec.kvp"], tmp_path).returncode == 0


def test_check_digest_reads_the_header_of_a_hostile_spec_path_back(tmp_path: Path) -> None:
    name = "x\ntouch PWNED\n# · scenario y · .kvp"
    (tmp_path / name).write_text(SPEC, encoding="utf-8")
    stem = name.removesuffix(".kvp")
    assert _kvplan(["emit", name, "--target", "vllm,trtllm", "-o", f"{stem}.kvplan"], tmp_path).returncode == 0
    clean = _kvplan(["lint", "--check-digest", name], tmp_path)
    assert "KV401" not in clean.stdout, clean.stdout
    (tmp_path / name).write_text(SPEC.replace("batch   = 8", "batch   = 4"), encoding="utf-8")
    stale = _kvplan(["lint", "--check-digest", name], tmp_path)
    assert stale.returncode == 1
    assert sum("KV401" in line and "was emitted from plan" in line for line in stale.stdout.splitlines()) == 3


def test_calibrate_names_a_hostile_input_file_in_the_profile_without_a_line_of_its_own(tmp_path: Path) -> None:
    # the profile is TOML: a name would add a [[fit]] of its own, and TOML refuses DEL even in a comment
    name = 'm\n[[fit]]\ndevice = "evil"\n#\x7f.csv'
    shutil.copy(ROOT / "tests" / "data" / "calibrate" / "measurements.csv", tmp_path / name)
    out = _kvplan(["calibrate", name, "-o", "p.toml"], tmp_path)
    assert out.returncode == 0, out.stderr
    doc = tomllib.loads((tmp_path / "p.toml").read_text(encoding="utf-8"))
    assert [f["device"] for f in doc["fit"]] == ["h100-sxm"]
    assert doc["profile"]["inputs"] == [name]
