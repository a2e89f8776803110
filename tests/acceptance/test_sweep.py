"""kvplan sweep: list parsing, rows against the single-point core and SPEC's formulas, CSV/JSON shape."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math

import attrs
import pytest
from click.testing import CliRunner

from kvplan import catalog
from kvplan.base import limits
from kvplan.cli import main
from kvplan.model import roofline as rf
from kvplan.model import sweep as sw
from kvplan.model.footprint import kappa
from tests.unit.model.test_sweep import B200, LLAMA


def run(*args: str) -> "object":
    return CliRunner().invoke(main, list(args))


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_bad_list_exits_2_with_one_line() -> None:
    r = run("sweep", "--model", "llama-3-70b", "--device", "b200", "--batch", "1..")
    assert r.exit_code == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1
    assert "batch" in r.stderr and "'1..'" in r.stderr and "1..64" in r.stderr


@pytest.mark.parametrize("args, needle", [
    (("--model", "llama-3-70b"), "missing --device"),
    (("--model", "llama-3-70b", "--device", "b201"), "unknown device 'b201'"),
    (("--device", "b200"), "give a catalog model name"),
    (("--model", "llama-3-70b", "--device", "b200", "--context", "40 GB"), "context takes tokens"),
    (("--model", "llama-3-70b", "--device", "b200", "--devices", "3", "--kv-dtype", "bf16", "--batch", "1"), None),
])
def test_cli_input_errors(args: tuple[str, ...], needle: str | None) -> None:
    r = run("sweep", *args)
    if needle is None:  # 3 devices is a valid (if odd) deployment: tp = 3 over 8 KV heads
        assert r.exit_code == 0, r.stderr
        return
    assert r.exit_code == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("fmt", ["json", "parquet"])
@pytest.mark.parametrize("opt, needle", [(("--exact",), "--exact applies to --format csv only"),
                                         (("--jobs", "2"), "--jobs applies to --format csv only")])
def test_csv_only_options_with_another_format_are_refused(fmt: str, opt: tuple[str, ...], needle: str) -> None:
    """--exact and --jobs shape the CSV writer only: with json or parquet they are an error, not ignored, and
    the help says what to do (dropping the option runs)."""
    base = ("sweep", "--model", "llama-3-70b", "--device", "b200", "--batch", "1", "--context", "1k",
            "--kv-dtype", "bf16", "--format", fmt)
    r = run(*base, *opt)
    assert r.exit_code == 2 and r.stdout == ""
    assert needle in r.stderr and "drop the option" in r.stderr and "Traceback" not in r.stderr
    if fmt == "json":  # the suggestion works: without the option the same sweep runs
        ok = run(*base)
        assert ok.exit_code == 0 and json.loads(ok.stdout)


# ------------------------------------------------------------------ rows

GRID = dict(devices="1,2", kv_dtypes="bf16,int4,int2", batch="1..1024:x4", context="1k..1M:x4")


def llama_rows(*extra: str) -> list[dict[str, str]]:
    r = run("sweep", "--model", "llama-3-70b", "--device", "b200", "--devices", GRID["devices"],
            "--kv-dtype", GRID["kv_dtypes"], "--batch", GRID["batch"], "--context", GRID["context"], *extra)
    assert r.exit_code == 0, r.stderr
    return rows_of(r.stdout)


def test_row_order_is_devices_kv_batch_context() -> None:
    rows = llama_rows()
    lists = ([1, 2], ["bf16", "int4", "int2"], [4**k for k in range(6)], [1000 * 4**k for k in range(5)])
    got = [(int(r["devices"]), r["kv_dtype"], int(r["batch"]), int(r["context"])) for r in rows]
    assert got == list(itertools.product(*lists))
    assert list(rows[0]) == [c.name for c in sw.COLUMNS]


def test_rows_follow_spec_formulas_by_hand() -> None:
    """Llama-3-70B on b200, striped: every column from SPEC §3–5 written out here."""
    P = LLAMA.params
    C, beta, pi = 192e9, 8.0e12, 2250e12  # paper Tab. 3; striped B200: min(8, 10·2/1) = 8 TB/s
    assert (B200.memory, B200.bandwidth, B200.compute) == (C, beta, pi)
    for r in llama_rows("--exact"):
        n, b, s = int(r["devices"]), int(r["batch"]), int(r["context"])
        w_kv = {"bf16": 2.0, "int4": 0.5, "int2": 0.25}[r["kv_dtype"]]
        k = 2 * 80 * 8 * 128 * w_kv
        kv = b * s * k * max(1.0, n / 8)  # KV heads split over tp = n ranks (n ≤ 8: no copies)
        W = P * 2
        assert float(r["kappa_bytes"]) == k
        assert float(r["kv_bytes"]) == pytest.approx(kv, rel=1e-12)
        assert float(r["weight_bytes"]) == pytest.approx(W, rel=1e-12)
        assert float(r["memory_bytes"]) == pytest.approx(W + kv, rel=1e-12)
        assert r["fits"] == ("true" if W + kv <= n * C else "false")
        s_star, s_cap = W / (b * k), (n * C - W) / (b * k)
        assert float(r["s_star_tokens"]) == pytest.approx(s_star, rel=1e-12)
        assert float(r["s_cap_tokens"]) == pytest.approx(s_cap, rel=1e-12)
        expected = "capacity-bound" if s > s_cap else "weight-bound" if s < s_star else "kv-bound"
        assert r["regime"] == expected
        flops = 2 * P * b + 4 * b * s * 80 * 64 * 128
        step = max((W + kv) / (n * beta), flops / (n * pi))
        assert float(r["step_time_s"]) == pytest.approx(step, rel=1e-12)
        assert float(r["throughput_tok_s"]) == pytest.approx(b / step, rel=1e-12)
        c = 2.0 / w_kv
        K = b * s * 2 * 80 * 8 * 128 * 2.0
        assert float(r["speedup_vs_bf16"]) == pytest.approx((W + K) / (W + K / c), rel=1e-12)


def test_worked_example_s_star_427k() -> None:
    """SPEC §5: s*(1) = 427.2k with P = 70e9; the catalog's P is 70.55e9, so s* scales by it."""
    r = run("sweep", "--model", "llama-3-70b", "--device", "b200")
    (row,) = rows_of(r.stdout)
    assert float(row["s_star_tokens"]) * 70e9 / LLAMA.params == pytest.approx(427.2e3, rel=1e-3)
    assert row["context"] == "128000" and row["regime"] == "weight-bound"


@pytest.mark.parametrize("model, device, placement", [
    ("mixtral-8x7b", "mi300x", "affinity"),
    ("gemma-3-27b", "h100-sxm", "striped"),
    ("deepseek-v3", "b200", "pinned"),
    ("mistral-7b", "a100-80g", "striped"),
])
def test_rows_equal_single_point_core(model: str, device: str, placement: str) -> None:
    """Sampled rows equal the scalar results of kvplan.model.roofline for the same point."""
    args = ["sweep", "--model", model, "--device", device, "--placement", placement, "--devices", "1,8",
            "--kv-dtype", "bf16,fp8,int2", "--batch", "1,3,9,64", "--context", "100,5k,128k,2M", "--exact"]
    r = run(*args)
    assert r.exit_code == 0, r.stderr
    m, d = catalog.get_model(model), catalog.get_device(device)
    for row in rows_of(r.stdout)[::5]:
        n, b, s = int(row["devices"]), int(row["batch"]), int(row["context"])
        cfg = rf.Config(m, d, n_devices=n, w_kv=catalog.dtype(row["kv_dtype"]).width, placement=placement)
        t = rf.step_time(cfg, b, s)
        base = rf.step_time(attrs.evolve(cfg, w_kv=2.0), b, s).memory
        s_star, s_cap = float(rf.s_star(cfg, b)), float(rf.s_cap(cfg, b))
        expect = {
            "kappa_bytes": kappa(m, cfg.w_kv), "kv_bytes": float(rf.kv_bytes_stored(cfg, b, s)),
            "weight_bytes": rf.weight_bytes_held(m, cfg.w_p), "s_star_tokens": s_star, "s_cap_tokens": s_cap,
            "step_time_s": float(t.step), "throughput_tok_s": b / float(t.step),
            "speedup_vs_bf16": float(base / t.memory),
        }
        for key, value in expect.items():
            if key == "s_cap_tokens" and value <= 0:
                assert row[key] == ""  # the weights alone exceed N·C: no crossover, never a negative number
            elif math.isinf(value):
                assert row[key] == "inf"
            else:
                assert float(row[key]) == pytest.approx(value, rel=1e-12), key
        assert row["regime"] == str(rf.regime(s, s_star, s_cap))
        assert (row["fits"] == "true") == (float(row["memory_bytes"]) <= cfg.capacity)


def test_hundred_thousand_points_parse_as_csv(tmp_path: "object") -> None:
    r = run("sweep", "--model", "llama-3-70b", "--device", "h100-sxm", "--batch", "1..100",
            "--context", "1k..1000k:+1k")
    assert r.exit_code == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == [c.name for c in sw.COLUMNS]
    assert len(rows) == 1 + 100 * 1000
    assert all(len(x) == len(sw.COLUMNS) for x in rows)
    assert rows[-1][4:6] == ["100", "1000000"]
    assert {x[13] for x in rows[1:]} <= set(rf.REGIMES)


def test_output_file_matches_stdout(tmp_path: "object") -> None:
    out = tmp_path / "grid.csv"  # type: ignore[operator]
    args = ["sweep", "--model", "qwen3-8b", "--device", "h200", "--batch", "1,2", "--context", "1k,2k"]
    r1, r2 = run(*args), run(*args, "-o", str(out))
    assert r2.exit_code == 0 and r2.stdout == ""
    assert out.read_text(encoding="utf-8") == r1.stdout


def test_json_form_parses_and_matches_csv() -> None:
    args = ["sweep", "--model", "gemma-2-9b", "--device", "h100-sxm", "--devices", "1,2", "--kv-dtype", "bf16,int4",
            "--batch", "1..16:x2", "--context", "1k..64k:x4"]
    rj, rc = run(*args, "--format", "json"), run(*args, "--exact")
    assert rj.exit_code == 0, rj.stderr
    doc = json.loads(rj.stdout)
    assert doc["format_version"] == "1" and doc["kind"] == "sweep"
    names = [c["name"] for c in doc["columns"]]
    assert names == [c.name for c in sw.COLUMNS]
    units = {c["name"]: (c.get("unit"), c.get("evidence")) for c in doc["columns"]}
    assert units["kv_bytes"] == ("B", "derived") and units["context"] == ("tokens", "assumed")
    assert units["step_time_s"] == ("s", "derived") and units["throughput_tok_s"] == ("tok/s", "derived")
    assert all(c.get("source") for c in doc["columns"])
    assert doc["deployments"][0]["params"]["evidence"] == "reported"
    csv_rows = list(csv.reader(io.StringIO(rc.stdout)))[1:]
    assert doc["row_count"] == len(doc["rows"]) == len(csv_rows) == 2 * 2 * 5 * 4
    for jrow, crow in zip(doc["rows"], csv_rows):
        assert [str(v).lower() if isinstance(v, bool) else str(v) for v in jrow] == crow


def test_default_csv_is_the_exact_csv_to_6_significant_digits() -> None:
    """The default text of every cell is csvtext.number_text of the exact value (whole numbers as
    integers, others as '%.6g'), the names and booleans unchanged; and within 5e-6 of it."""
    exact, short = llama_rows("--exact"), llama_rows()
    kinds = {c.name: c.type for c in sw.COLUMNS}
    assert len(exact) == len(short) == 2 * 3 * 6 * 5
    rounded = 0
    for e, d in zip(exact, short):
        for key, text in e.items():
            if kinds[key] != "number" or text == "":
                assert d[key] == text
                continue
            x = float(text)
            want = str(int(x)) if x == int(x) else "%.6g" % x
            assert d[key] == want
            assert float(d[key]) == pytest.approx(x, rel=5e-6)
            rounded += d[key] != text
    assert rounded > 0  # the grid has numbers that are not whole, so the two forms differ


def test_json_infinite_s_star_is_null_and_csv_inf() -> None:
    """mistral-7b windows every layer at 4096 tokens: past what the windows hold, s* never comes."""
    args = ["sweep", "--model", "mistral-7b", "--device", "h100-sxm", "--batch", "1,64", "--context", "8k"]
    doc = json.loads(run(*args, "--format", "json").stdout)
    rows = rows_of(run(*args).stdout)
    i = [c["name"] for c in doc["columns"]].index("s_star_tokens")
    m = catalog.get_model("mistral-7b")
    for jrow, crow in zip(doc["rows"], rows):
        s_star = float(rf.s_star(rf.Config(m, catalog.get_device("h100-sxm")), jrow[4]))
        assert (jrow[i] is None) == math.isinf(s_star) == (crow["s_star_tokens"] == "inf")
    assert any(r["s_star_tokens"] == "inf" for r in rows)


# ------------------------------------------------------------------ FILE.kvp

SPEC = """kvplan 1
deployment "chat-70b" {
    model     = llama-3-70b
    device    = b200
    devices   = <= 4
    placement = auto
    workload {
        batch   = [1, 8, 32]
        context = [32k, 128k]
    }
    pin { kv_dtype = fp8 }
}
deployment "small" {
    model   = qwen3-8b
    device  = h100-sxm
    devices = 1
    placement = pinned
    workload {
        batch   = 4
        context = 8k
    }
}
"""


def test_file_form_defaults_to_the_specs_values(tmp_path: "object") -> None:
    path = tmp_path / "chat.kvp"  # type: ignore[operator]
    path.write_text(SPEC, encoding="utf-8")
    r = run("sweep", str(path))
    assert r.exit_code == 0, r.stderr
    rows = rows_of(r.stdout)
    assert list(rows[0]) == ["deployment"] + [c.name for c in sw.COLUMNS]
    chat = [(int(x["devices"]), x["kv_dtype"], int(x["batch"]), int(x["context"])) for x in rows
            if x["deployment"] == "chat-70b"]
    # `devices = <= 4`: 1, 2, 4; the pinned kv_dtype; the workload lists in the order written
    assert chat == list(itertools.product([1, 2, 4], ["fp8"], [1, 8, 32], [32_000, 128_000]))
    small = [x for x in rows if x["deployment"] == "small"]
    assert [(x["model"], x["device"], x["devices"], x["kv_dtype"], x["batch"], x["context"]) for x in small] == [
        ("qwen3-8b", "h100-sxm", "1", "bf16", "4", "8000")]
    # the same points through the flags give the same numbers (placement auto sweeps striped)
    flags = run("sweep", "--model", "llama-3-70b", "--device", "b200", "--devices", "1,2,4", "--kv-dtype", "fp8",
                "--batch", "1,8,32", "--context", "32k,128k")
    assert [list(x.values())[1:] for x in rows if x["deployment"] == "chat-70b"] == \
        [list(x.values()) for x in rows_of(flags.stdout)]
    pinned = run("sweep", "--model", "qwen3-8b", "--device", "h100-sxm", "--placement", "pinned", "--batch", "4",
                 "--context", "8k")
    assert list(small[0].values())[1:] == list(rows_of(pinned.stdout)[0].values())


def test_file_form_lists_override(tmp_path: "object") -> None:
    path = tmp_path / "chat.kvp"  # type: ignore[operator]
    path.write_text(SPEC, encoding="utf-8")
    r = run("sweep", str(path), "--devices", "8", "--kv-dtype", "int4,int2", "--context", "1k,2k,3k",
            "--format", "json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [d["name"] for d in doc["deployments"]] == ["chat-70b", "small"]
    assert doc["row_count"] == 1 * 2 * 3 * 3 + 1 * 2 * 1 * 3
    assert {(row[3], row[4]) for row in doc["rows"]} == {(8, "int4"), (8, "int2")}


def test_file_form_errors(tmp_path: "object") -> None:
    path = tmp_path / "bad.kvp"  # type: ignore[operator]
    path.write_text(SPEC.replace("b200", "b201", 1), encoding="utf-8")
    r = run("sweep", str(path))
    assert r.exit_code == 2 and r.stdout == ""
    assert "b201" in r.stderr and "Traceback" not in r.stderr
    both = run("sweep", str(path), "--model", "llama-3-70b")
    assert both.exit_code == 2 and "not both" in both.stderr


def test_names_with_commas_quotes_and_percent_survive(tmp_path: "object") -> None:
    path = tmp_path / "odd.kvp"  # type: ignore[operator]
    name = 'a, "b" 100%'
    path.write_text(SPEC.replace('"chat-70b"', json.dumps(name)), encoding="utf-8")
    r = run("sweep", str(path), "--batch", "1", "--context", "1k", "--devices", "1")
    assert r.exit_code == 0, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[1][0] == name and len(rows[1]) == len(rows[0])
    doc = json.loads(run("sweep", str(path), "--batch", "1", "--context", "1k", "--devices", "1",
                         "--format", "json").stdout)
    assert doc["rows"][0][0] == name


# ------------------------------------------------------------------ the grid's size (issue 9 review)

def test_a_grid_of_10_to_the_12_points_is_refused_before_any_work(tmp_path: "object",
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def no_work(*a: object, **k: object) -> None:
        raise AssertionError("a point was evaluated")

    monkeypatch.setattr(sw, "evaluate", no_work)
    out = tmp_path / "sw.csv"  # type: ignore[operator]
    r = run("sweep", "--model", "llama-3-8b", "--device", "h100-sxm", "--batch", "1..1000000",
            "--context", "1..1000000", "-o", str(out))
    assert r.exit_code == 2, r.output
    assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert "1,000,000,000,000 points" in r.stderr and "1,000,000 batch sizes × 1,000,000 context lengths" in r.stderr
    assert f"more than {limits.MAX_SWEEP_POINTS:,}" in r.stderr
    assert not out.exists()  # type: ignore[attr-defined]
