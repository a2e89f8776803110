"""kvplan fmt: the tests that run the kvplan command.

Split by layer from the tests of the same subject in tests/unit/lang/test_fmt.py;
tests/unit/lang/test_fmt.py says what they check.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kvplan.cli import main
from tests.unit.lang.test_fmt import MESSY, MESSY_FORMATTED

# --------------------------------------------------------------------------- the command

def test_fmt_command_rewrites_checks_and_diffs(tmp_path: Path) -> None:
    messy = tmp_path / "messy.kvp"
    clean = tmp_path / "clean.kvp"
    messy.write_text(MESSY, encoding="utf-8")
    clean.write_text(MESSY_FORMATTED, encoding="utf-8")
    runner = CliRunner()

    r = runner.invoke(main, ["fmt", "--check", str(tmp_path)])
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [f"would reformat {messy}"]
    assert messy.read_text(encoding="utf-8") == MESSY                       # --check writes nothing

    r = runner.invoke(main, ["fmt", "--diff", str(messy)])
    assert r.exit_code == 1
    assert r.stdout.startswith(f"--- {messy}\n+++ {messy}\n")
    assert "+    model   = llama-3-8b\n" in r.stdout and "-  model=llama-3-8b\n" in r.stdout
    assert "-# the end\n\\ No newline at end of file\n" in r.stdout and r.stdout.endswith("+# the end\n")
    assert all(ln[:1] in " +-@\\" for ln in r.stdout.splitlines())
    assert messy.read_text(encoding="utf-8") == MESSY

    r = runner.invoke(main, ["fmt", str(messy), str(clean)])
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr == "1 file reformatted, 1 unchanged\n"
    assert messy.read_text(encoding="utf-8") == MESSY_FORMATTED

    r = runner.invoke(main, ["fmt", "--check", str(tmp_path)])
    assert (r.exit_code, r.stdout) == (0, "")


def test_fmt_command_syntax_error_exits_2_and_formats_the_rest(tmp_path: Path) -> None:
    bad = tmp_path / "bad.kvp"
    bad.write_text('deployment "x" {\n    batch 32\n}\n', encoding="utf-8")
    good = tmp_path / "good.kvp"
    good.write_text(MESSY, encoding="utf-8")
    r = CliRunner().invoke(main, ["fmt", str(tmp_path)])
    assert r.exit_code == 2 and r.stdout == ""
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"{bad}:2:") and "KV006" in first
    assert good.read_text(encoding="utf-8") == MESSY_FORMATTED
    assert bad.read_text(encoding="utf-8") == 'deployment "x" {\n    batch 32\n}\n'


def test_fmt_command_without_paths_cannot_run() -> None:
    r = CliRunner().invoke(main, ["fmt"])
    assert r.exit_code == 2 and r.stderr.startswith("kvplan: error: no paths given")
