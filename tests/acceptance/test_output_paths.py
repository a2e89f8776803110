"""One rule for every path kvplan writes (issue 19, item 3): each single-file writer — `sweep -o` (CSV, JSON,
Parquet), `calibrate -o`, `import -o`, `map --plot` and `--roofline`, `pareto --plot`, `fmt` — refuses a
symbolic link, a hard link and a FIFO where its file would go, as `emit -o` and `report -o` do
(tests/acceptance/test_outputs.py), with one line and exit 2, and leaves the file the link names untouched.

On main each writer opened its path with open(..., "w"): it wrote through the link and the hard link, and
blocked on the FIFO. A write replaces its file in one rename (kvplan.base.outputs), so a refused or failed one
leaves nothing behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import DATA, ROOT
from tests.unit.app.test_import import ROUND_TRIP

KEEP = "keep me\n"
#: A spec fmt changes (the canonical layout indents and aligns it).
UNFORMATTED = ('kvplan 1\ndeployment "a" {\nmodel = llama-3-8b\n device = h100\n'
               ' workload { batch = 1\n context = 4k }\n}\n')

Writer = Callable[[Path, Path], list[str]]


def _sweep(fmt: str) -> Writer:
    return lambda tmp, target: ["sweep", "--model", "llama-3-8b", "--device", "h100", "--format", fmt, "-o",
                                str(target)]


WRITERS: dict[str, tuple[str, Writer]] = {
    "sweep-csv": ("out.csv", _sweep("csv")),
    "sweep-json": ("out.json", _sweep("json")),
    "sweep-parquet": ("out.parquet", _sweep("parquet")),
    "calibrate": ("profile.toml", lambda tmp, target: ["calibrate", str(DATA / "calibrate" / "measurements.csv"),
                                                       "-o", str(target)]),
    "import": ("imported.kvp", lambda tmp, target: ["import", "--from", "vllm", ROUND_TRIP, "--device", "h100-sxm",
                                                    "-o", str(target)]),
    "map-plot": ("map.png", lambda tmp, target: ["map", "--model", "llama-3-8b", "--device", "h100", "--plot",
                                                 str(target)]),
    "map-roofline": ("roofline.svg", lambda tmp, target: ["map", "--model", "llama-3-8b", "--device", "h100",
                                                          "--roofline", str(target)]),
    "pareto-plot": ("front.svg", lambda tmp, target: ["pareto", str(ROOT / "examples" / "w2-batch32.kvp"), "--plot",
                                                      str(target)]),
    "fmt": ("spec.kvp", lambda tmp, target: ["fmt", str(target)]),
}


def _needs(name: str) -> None:
    if name == "sweep-parquet":
        pytest.importorskip("pyarrow")
    if name.startswith(("map-", "pareto-")):
        pytest.importorskip("matplotlib")


def _victim(tmp: Path, name: str) -> Path:
    """The file an attacker wants written: elsewhere/<name>, holding KEEP (a spec fmt would change, for fmt)."""
    victim = tmp / "elsewhere" / name
    victim.parent.mkdir()
    victim.write_text(UNFORMATTED if name.endswith(".kvp") else KEEP, encoding="utf-8")
    return victim


def _refused(res: Any, words: str, target: Path) -> None:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("kvplan: error:")]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert words in lines[0] and str(target) in lines[0], lines[0]


def _no_temporary_files(*folders: Path) -> None:
    left = [p.name for d in folders for p in d.iterdir() if p.name.endswith(".kvplan-tmp")]
    assert left == [], left


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_symlink_where_the_file_goes_is_refused_and_its_target_untouched(tmp_path: Path, writer: str) -> None:
    _needs(writer)
    name, args = WRITERS[writer]
    victim = _victim(tmp_path, name)
    before = victim.read_bytes()
    target = tmp_path / name
    target.symlink_to(victim)
    res = CliRunner().invoke(main, args(tmp_path, target))
    _refused(res, "is a symbolic link; kvplan does not write through links", target)
    assert victim.read_bytes() == before and target.is_symlink()
    _no_temporary_files(tmp_path, victim.parent)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_hard_link_where_the_file_goes_is_refused_and_the_other_name_untouched(tmp_path: Path,
                                                                                 writer: str) -> None:
    _needs(writer)
    name, args = WRITERS[writer]
    victim = _victim(tmp_path, name)
    before = victim.read_bytes()
    target = tmp_path / name
    os.link(victim, target)
    res = CliRunner().invoke(main, args(tmp_path, target))
    _refused(res, "is a hard link to another file (2 names)", target)
    assert victim.read_bytes() == before and os.stat(victim).st_nlink == 2
    _no_temporary_files(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("writer", [w for w in WRITERS if w != "fmt"])  # fmt reads its file first (tested below)
def test_a_fifo_where_the_file_goes_is_refused_without_blocking(tmp_path: Path, writer: str) -> None:
    """In a child process with a timeout: on main the open for writing waited for a reader forever."""
    _needs(writer)
    name, args = WRITERS[writer]
    target = tmp_path / name
    os.mkfifo(target)
    try:
        res = subprocess.run([sys.executable, "-m", "kvplan", *args(tmp_path, target)], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{writer} blocked on a FIFO at {target}")
    assert res.returncode == 2, res.stderr
    assert "is a named pipe (FIFO), not a regular file" in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_fmt_of_a_fifo_or_a_device_link_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.kvp")
    res = subprocess.run([sys.executable, "-m", "kvplan", "fmt", str(tmp_path / "pipe.kvp")], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("writer", ["sweep-csv", "calibrate", "import", "fmt"])
def test_a_rerun_replaces_a_regular_file_and_keeps_its_permissions(tmp_path: Path, writer: str) -> None:
    name, args = WRITERS[writer]
    target = tmp_path / name
    target.write_text(UNFORMATTED if writer == "fmt" else "stale\n", encoding="utf-8")
    os.chmod(target, 0o640)
    res = CliRunner().invoke(main, args(tmp_path, target))
    assert res.exit_code == 0, res.output
    text = target.read_text(encoding="utf-8")
    assert text not in ("stale\n", UNFORMATTED) and len(text) > 20
    assert target.stat().st_mode & 0o777 == 0o640 and target.stat().st_nlink == 1
    _no_temporary_files(tmp_path)


def test_a_missing_folder_is_one_line_whose_fix_works(tmp_path: Path) -> None:
    target = tmp_path / "new dir" / "out.csv"
    res = CliRunner().invoke(main, WRITERS["sweep-csv"][1](tmp_path, target))
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert f"{target.parent} does not exist" in res.stderr
    fix = res.stderr.split("(make the folder first (", 1)[1].split(")", 1)[0]
    subprocess.run(fix, shell=True, check=True, cwd=tmp_path)  # `mkdir -p '<tmp>/new dir'`, quoted as printed
    again = CliRunner().invoke(main, WRITERS["sweep-csv"][1](tmp_path, target))
    assert again.exit_code == 0 and target.read_text(encoding="utf-8").startswith("model,")


def test_removing_the_link_as_the_message_says_lets_the_write_succeed(tmp_path: Path) -> None:
    name, args = WRITERS["sweep-csv"]
    victim = _victim(tmp_path, name)
    target = tmp_path / name
    target.symlink_to(victim)
    res = CliRunner().invoke(main, args(tmp_path, target))
    assert res.exit_code == 2 and "(remove the link if it is yours, or write to another path)" in res.stderr
    target.unlink()
    again = CliRunner().invoke(main, args(tmp_path, target))
    assert again.exit_code == 0 and victim.read_text(encoding="utf-8") == KEEP
    assert not target.is_symlink() and target.read_text(encoding="utf-8").startswith("model,")


def test_sweep_to_stdout_still_streams(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["sweep", "--model", "llama-3-8b", "--device", "h100", "--batch", "1..8",
                                    "--format", "json"])
    assert res.exit_code == 0, res.output
    import json

    assert json.loads(res.stdout)["row_count"] == 8


def test_the_null_device_is_the_one_device_written_to_and_a_link_to_it_is_refused(tmp_path: Path) -> None:
    """`-o /dev/null` times a sweep without a disk (bench/bench_sweep.py); /dev/zero, or a link to the null device,
    is refused as any device or link is."""
    if not os.path.exists("/dev/null") or not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/null and /dev/zero")
    sweep = WRITERS["sweep-csv"][1]
    assert CliRunner().invoke(main, sweep(tmp_path, Path("/dev/null"))).exit_code == 0
    _refused(CliRunner().invoke(main, sweep(tmp_path, Path("/dev/zero"))), "is a character device", Path("/dev/zero"))
    (tmp_path / "null").symlink_to("/dev/null")
    _refused(CliRunner().invoke(main, sweep(tmp_path, tmp_path / "null")), "is a symbolic link", tmp_path / "null")
