"""Through the CLI: `kvplan emit --target flashinfer` writes a benchmark, its measurements_csv writes the file
(synthetic timings: no GPU here), and `kvplan calibrate that.csv -o p.toml` fits η_kv from it (docs/kernels.md
§ Measuring, docs/calibrate.md § Kernel rows)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT
from tests.unit.render.test_calibrate_view import check_format

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SPEC = """kvplan 1

deployment "kernel" {
    model   = llama-3-8b
    device  = h100-sxm
    devices = 2
    workload {
        batch   = 3
        context = 1000
    }
    pin {
        kv_dtype          = fp8
        tensor_parallel   = 2
    }
}
"""
ETA_KV = 0.8123456789
H100_BANDWIDTH = 3.35e12  # B/s, the h100-sxm datasheet figure


def test_calibrate_reads_the_flashinfer_benchmarks_file(tmp_path: Path) -> None:
    spec = tmp_path / "kernel.kvp"
    spec.write_text(SPEC)
    r = CliRunner().invoke(main, ["emit", str(spec), "--target", "flashinfer", "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    (script,) = (tmp_path / "out").rglob("flashinfer_decode.py")
    loader = importlib.util.spec_from_file_location("emitted_acceptance_bench", script)
    assert loader is not None and loader.loader is not None
    bench = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(bench)
    kv = bench.kv_bytes_read(bench.groups())
    csv = tmp_path / "flashinfer_measured.csv"
    csv.write_text(bench.measurements_csv(kv, kv / (ETA_KV * H100_BANDWIDTH), "synthetic"))

    out = tmp_path / "p.toml"
    r = CliRunner().invoke(main, ["calibrate", str(csv), "-o", str(out)])
    assert r.exit_code == 0, r.output
    (fit,) = check_format(out.read_text())["fit"]
    assert (fit["device"], fit["engine"], fit["points"]) == ("h100-sxm", "any", 1)
    # η_w is not determined: kv_efficiency is η_kv over the default η_w of the catalog's h100-sxm entry
    eta_w = tomllib.loads((ROOT / "kvplan" / "catalog" / "performance.toml").read_text())["device"]["h100-sxm"]["eta_w"]
    assert set(fit["kv_efficiency"]) == {"fp8"}
    assert abs(fit["kv_efficiency"]["fp8"] - ETA_KV / eta_w) < 1e-9
    assert "eta_w" not in fit and "t_fixed" not in fit
    assert "eta_kv fp8" in r.stdout and "kernel" in r.stdout and "(measured)" in r.stdout
    assert "left out (default used): eta_w: not determined: the measurements time the attention kernel alone" \
        in r.stdout
