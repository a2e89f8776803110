"""kvplan sweep --format parquet through the CLI: the file it writes, and one clear line without pyarrow."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvplan.cli import main

ARGS = ["sweep", "--model", "llama-3-70b", "--device", "b200", "--devices", "1,2", "--kv-dtype", "bf16,fp8",
        "--batch", "1,8", "--context", "32k,128k"]


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    out = tmp_path / "sw.parquet"
    r = CliRunner().invoke(main, [*ARGS, "--format", "parquet", "-o", str(out)])
    assert r.exit_code == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0] == ("kvplan: error: --format parquet needs pyarrow (the optional `parquet` extra) "
                        "(pip install pyarrow, or pip install '.[parquet]' in a checkout of kvplan; "
                        "or use --format csv)")
    assert not out.exists()  # refused before the output file is made


def test_parquet_file_matches_csv_stdout(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "sw.parquet"
    r = CliRunner().invoke(main, [*ARGS, "--format", "parquet", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    csv_out = CliRunner().invoke(main, [*ARGS, "--exact"])
    header, *lines = csv_out.stdout.splitlines()
    table = pq.read_table(out)
    assert table.column_names == header.split(",")
    assert table.num_rows == len(lines) == 16
    got = table.to_pylist()
    for row, line in zip(got, lines):
        fields = line.split(",")
        assert row["step_time_s"] == float(fields[header.split(",").index("step_time_s")])
        assert row["regime"] == fields[header.split(",").index("regime")]


def test_parquet_to_stdout_is_the_same_file(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import io

    out = tmp_path / "sw.parquet"
    assert CliRunner().invoke(main, [*ARGS, "--format", "parquet", "-o", str(out)]).exit_code == 0
    r = CliRunner().invoke(main, [*ARGS, "--format", "parquet"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes[:4] == b"PAR1" and r.stdout_bytes[-4:] == b"PAR1"
    assert pq.read_table(io.BytesIO(r.stdout_bytes)).equals(pq.read_table(out))
