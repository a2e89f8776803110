"""kvplan sweep: the unit tests that need the model layer.

Split by layer from the tests of the same subject in tests/acceptance/test_sweep.py;
tests/acceptance/test_sweep.py says what they check.
"""

from __future__ import annotations

import pytest

from kvplan import catalog
from kvplan.base import limits
from kvplan.base.errors import KvplanError
from kvplan.model import sweep as sw

LLAMA = catalog.get_model("llama-3-70b")
B200 = catalog.get_device("b200")


# ------------------------------------------------------------------ lists

@pytest.mark.parametrize("text, kind, expected", [
    ("1,8,32", "int", (1, 8, 32)),
    ("1..4", "int", (1, 2, 3, 4)),
    ("1..1024:x2", "int", tuple(2**k for k in range(11))),
    ("3..100:x3", "int", (3, 9, 27, 81)),
    ("8..2,1", "int", None),  # downward range: error below
    ("1,1,2,1", "int", (1, 2)),
    (" 2 , 4 ", "int", (2, 4)),
    ("128k", "tokens", (128_000,)),
    ("1M", "tokens", (1_000_000,)),
    ("32Ki", "tokens", (32_768,)),
    ("4k..1M:x2", "tokens", tuple(4000 * 2**k for k in range(8))),  # 4k·2^8 = 1.024M > 1M
    ("4Ki..1Mi:x2", "tokens", tuple(2**k for k in range(12, 21))),
    ("8k..32k:+8k", "tokens", (8000, 16000, 24000, 32000)),
    ("1k..1003", "tokens", (1000, 1001, 1002, 1003)),
])
def test_parse_list(text: str, kind: str, expected: tuple[int, ...] | None) -> None:
    if expected is None:
        with pytest.raises(sw.SweepError, match="downward"):
            sw.parse_list(text, kind, "batch")
    else:
        assert sw.parse_list(text, kind, "batch") == expected


@pytest.mark.parametrize("text, kind, needle", [
    ("1..", "int", "needs both ends"),
    ("..8", "int", "needs both ends"),
    ("1...8", "int", "not a whole number"),
    ("1..8:x1", "int", "factor above 1"),
    ("1..8:x", "int", "factor above 1"),
    ("1..8:+0", "int", "step of at least 1"),
    ("1..8:+1.5", "int", "step of at least 1"),
    ("0", "int", "at least 1"),
    ("1.5", "int", "not a whole number"),
    ("eight", "int", "cannot read 'eight'"),
    ("1,,2", "int", "empty item"),
    ("", "int", "empty list"),
    ("1..50000000", "tokens", "more than"),          # 5e7 values: past the 10^7 cap
    ("1..100000000000", "int", "above 1,048,576, kvplan's limit for batch"),
    ("40 GB", "tokens", "context takes tokens"),
    ("0.5k..2k:x2.5", "tokens", None),
])
def test_parse_list_errors(text: str, kind: str, needle: str | None) -> None:
    if needle is None:  # a fractional factor rounds each value to a whole token count
        assert sw.parse_list(text, kind, "context") == (500, 1250)
        return
    with pytest.raises(KvplanError, match=needle):
        sw.parse_list(text, kind, "context" if kind == "tokens" else "batch")


def test_parse_dtypes_resolves_aliases_and_rejects_unknown() -> None:
    assert sw.parse_dtypes("bf16,bfloat16,2bit,fp8") == ("bf16", "int2", "fp8")
    with pytest.raises(catalog.CatalogError, match="unknown dtype 'int3'"):
        sw.parse_dtypes("bf16,int3")


def test_chunking_does_not_change_output() -> None:
    spec = sw.spec_from_flags(LLAMA, B200, devices="1,4", kv_dtypes="bf16,fp8", batch="1..9",
                              context="1k..100k:+7k")
    whole = "".join(t for _, t in sw.csv_text([spec]))
    pieces = list(sw.csv_text([spec], chunk=7))
    assert "".join(t for _, t in pieces) == whole
    assert sum(n for n, _ in pieces) == spec.points == 2 * 2 * 9 * 15
    assert whole.count("\n") == spec.points + 1


def test_the_grid_limit_is_on_the_product_and_admits_issue_13s_sweeps() -> None:
    assert limits.MAX_SWEEP_POINTS >= 10**7
    model, device = catalog.get_model("llama-3-8b"), catalog.get_device("h100-sxm")
    edge = sw.spec_from_flags(model, device, batch="1..10000", context="1..10000")  # 10^4 × 10^4 = 10^8
    assert sw.total_points([edge]) == 10**8 == limits.MAX_SWEEP_POINTS
    over = sw.spec_from_flags(model, device, devices="1,2", batch="1..10000", context="1..10000")
    with pytest.raises(sw.SweepError, match="200,000,000 points"):
        sw.total_points([over])
    # A file's deployments count together: two grids of 6·10^7 are over, though each alone is under.
    part = sw.spec_from_flags(model, device, batch="1..6000", context="1..10000")
    assert sw.total_points([part]) == 6 * 10**7
    with pytest.raises(sw.SweepError, match="120,000,000 points .the grids of 2 deployments together"):
        sw.total_points([part, part])


# ------------------------------------------------------------------ fast CSV

def test_regime_codes_equal_the_core_regime() -> None:
    import numpy as np

    from kvplan.model import roofline as rf

    rng = np.random.default_rng(11)
    s = rng.random(5000) * 1e6
    s_star = rng.random(5000) * 1e6
    s_cap = np.where(rng.random(5000) < 0.1, np.nan, rng.random(5000) * 1e6)
    s[:50], s_star[:25], s_cap[25:50] = 5e5, 5e5, 5e5  # equal values: the comparisons' edges
    names = np.array(rf.REGIMES)[sw.regime_codes(s, s_star, s_cap)]
    assert names.tolist() == rf.regime(s, s_star, s_cap).tolist()


def _spec() -> sw.SweepSpec:
    return sw.spec_from_flags(LLAMA, B200, devices="1,2,3", kv_dtypes="bf16,int4", batch="1..40:x3",
                              context="1k..1M:x2")


def test_csv_pieces_are_bounded_and_their_rows_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory: each piece of text holds at most FORMAT_ROWS rows, and says how many it holds."""
    monkeypatch.setattr(sw, "FORMAT_ROWS", 16)
    pieces = list(sw.csv_bytes([_spec()], chunk=50))
    assert pieces[0][0] == 0 and pieces[0][1].count(b"\n") == 1  # the header
    assert all(0 < rows <= 16 and data.count(b"\n") == rows for rows, data in pieces[1:])
    assert sum(rows for rows, _ in pieces) == _spec().points


@pytest.mark.parametrize("jobs", [2, 3])
def test_parallel_csv_is_the_same_file(jobs: int, monkeypatch: pytest.MonkeyPatch, tmp_path: "object") -> None:
    """Forked workers writing in turn give the bytes one process gives (small units force many turns)."""
    monkeypatch.setattr(sw, "PARALLEL_MIN", 0)
    monkeypatch.setattr(sw, "PARALLEL_UNIT", 7)
    specs = [_spec(), sw.spec_from_flags(LLAMA, B200, batch="3", context="5k,9k")]
    serial, parallel = tmp_path / "serial.csv", tmp_path / "parallel.csv"  # type: ignore[operator]
    with open(serial, "wb") as f:
        rows_serial = sum(sw.csv_write(specs, f, jobs=1))
    with open(parallel, "wb") as f:
        rows_parallel = sum(sw.csv_write(specs, f, jobs=jobs))
    assert rows_serial == rows_parallel == sum(s.points for s in specs)
    assert parallel.read_bytes() == serial.read_bytes()


def test_a_failing_worker_is_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch, tmp_path: "object") -> None:
    monkeypatch.setattr(sw, "PARALLEL_MIN", 0)
    monkeypatch.setattr(sw, "PARALLEL_UNIT", 7)

    def broken(block: sw.Block) -> "object":
        raise ZeroDivisionError("in the worker")

    monkeypatch.setattr(sw, "_csv_block", broken)
    with open(tmp_path / "x.csv", "wb") as f, pytest.raises(RuntimeError, match="ZeroDivisionError"):  # type: ignore[operator]
        sum(sw.csv_write([_spec()], f, jobs=2))


def test_parallel_csv_to_an_in_memory_file_is_made_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """No file descriptor (a BytesIO, as click's test runner gives): one process writes, the same bytes."""
    import io

    monkeypatch.setattr(sw, "PARALLEL_MIN", 0)
    buf = io.BytesIO()
    assert sum(sw.csv_write([_spec()], buf, jobs=2)) == _spec().points
    assert buf.getvalue() == b"".join(data for _, data in sw.csv_bytes([_spec()]))


def test_parallel_csv_to_a_reader_that_stops_is_a_broken_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """`| head`: the workers meet EPIPE and the parent raises BrokenPipeError (the CLI's quiet exit 0),
    not a worker's traceback and not a hang. The reader is another process, as `head` is: a pipe's read
    end held here would be inherited by the workers and keep the pipe open."""
    import subprocess
    import sys

    monkeypatch.setattr(sw, "PARALLEL_MIN", 0)
    monkeypatch.setattr(sw, "PARALLEL_UNIT", 1000)
    spec = sw.spec_from_flags(LLAMA, B200, batch="1..100", context="1k..100k:+1k")  # 1.5 MB: more than a pipe holds
    head = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(5000)"],
                            stdin=subprocess.PIPE)
    assert head.stdin is not None
    with pytest.raises(BrokenPipeError):
        sum(sw.csv_write([spec], head.stdin, jobs=2))
    head.wait(timeout=60)
    try:
        head.stdin.close()
    except BrokenPipeError:
        pass
