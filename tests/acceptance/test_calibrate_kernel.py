"""Through the CLI: `kvplan emit --target flashinfer` writes a benchmark, its measurements_csv writes the file
(synthetic timings: no GPU here), and `kvplan calibrate that.csv -o p.toml` fits η_kv from it (docs/kernels.md
§ Measuring, docs/calibrate.md § Kernel rows)."""

from __future__ import annotations

import sys
from pathlib import Path

from click.testing import CliRunner

from kvplan.cli import main
from tests.paths import ROOT
from tests.unit.app.test_flashinfer_bench import _load as load_script
from tests.unit.app.test_kernel_measurements import ETA_KV, H100_BANDWIDTH, SPEC
from tests.unit.render.test_calibrate_view import check_format

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def test_calibrate_reads_the_flashinfer_benchmarks_file(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["emit", str(SPEC), "--target", "flashinfer", "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    (script,) = (tmp_path / "out").rglob("flashinfer_decode.py")
    bench = load_script(script.read_text(), tmp_path)   # imported, not run: no GPU here
    s = bench.settings()
    kv = bench.kv_bytes_read(s, bench.groups(s))
    csv = tmp_path / "flashinfer_measured.csv"
    csv.write_text(bench.measurements_csv(s, kv, kv / (ETA_KV * H100_BANDWIDTH), "synthetic"))

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
