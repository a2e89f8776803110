"""kvplan.engines.measurements reads the CSV `emit --target flashinfer`'s benchmark writes: a kernel row (itl_ms
empty; kv_bytes, kernel_ms, achieved_kv_bandwidth_Bps), which `kvplan calibrate` fits η_kv from.

The fixture files are written by the emitted flashinfer_decode.py's own measurements_csv (imported without
torch), with synthetic timings: kv_bytes / (η_kv · β) for a chosen η_kv on the plan's device."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from kvplan import catalog
from kvplan.engines import emit
from kvplan.engines import measurements as mr
from kvplan.model import calibrate as cal
from kvplan.model.expected import default_factors
from tests.unit.app.test_flashinfer_bench import _load as load_script
from tests.unit.app.test_memory import plan_of
from tests.unit.engines.test_measurements import CAL, one, refusal

#: llama-3-8b on two H100 SXM at tensor parallel 2, fp8 KV.
SPEC = CAL / "kernel.kvp"

#: The η_kv the synthetic timings are made at.
ETA_KV = 0.8123456789
H100_BANDWIDTH = 3.35e12  # B/s, the h100-sxm datasheet figure (catalog devices.toml)


def bench(where: Path) -> ModuleType:
    """The emitted flashinfer_decode.py of SPEC, imported as a module (its main() is not run)."""
    files = emit(plan_of(SPEC.read_text(), str(SPEC)), "flashinfer").files
    (text,) = [f.text for f in files if f.name == "flashinfer_decode.py"]
    return load_script(text, where)


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return bench(tmp_path_factory.mktemp("bench"))


def written(module: ModuleType, where: Path, eta_kv: float = ETA_KV) -> tuple[Path, float, float]:
    """The benchmark's file for a kernel at `eta_kv` of the H100's bandwidth, its KV bytes and kernel time."""
    s = module.settings()
    kv = float(module.kv_bytes_read(s, module.groups(s)))
    kernel_s = kv / (eta_kv * H100_BANDWIDTH)
    path = where / "flashinfer_measured.csv"
    path.write_text(module.measurements_csv(s, kv, kernel_s, "synthetic: made at a chosen eta_kv"), encoding="utf-8")
    return path, kv, kernel_s


def test_the_benchmarks_file_reads_as_one_kernel_measurement(module: ModuleType, tmp_path: Path) -> None:
    path, kv, kernel_s = written(module, tmp_path)
    lines = path.read_text().splitlines()
    assert lines[-1].split(",")[8] == ""   # itl_ms empty, as the benchmark writes it
    got = mr.read(str(path), mr.Given())
    (m,) = got.measurements
    assert m.itl_s is None and m.ttft_s is None and m.request_s is None
    assert (m.model, m.device, m.devices, m.tensor_parallel, m.kv_dtype, m.batch, m.context) == \
        ("llama-3-8b", "h100-sxm", 2, 2, "fp8", 3, 1000)
    assert m.kv_bytes == kv and m.kernel_s == pytest.approx(kernel_s, rel=1e-12)
    assert m.observed() == (("kernel", m.kernel_s),)
    assert (m.span.line, m.span.column) == (len(lines), 1)


def test_the_fit_recovers_eta_kv_from_the_benchmarks_file(module: ModuleType, tmp_path: Path) -> None:
    path, _, _ = written(module, tmp_path)
    (fit,) = cal.fit(mr.read(str(path), mr.Given()).measurements, "p.toml")
    assert (fit.device, fit.engine) == ("h100-sxm", "any")
    assert dict(fit.fitted)["eta_kv:fp8"].value == pytest.approx(ETA_KV, rel=1e-9)
    eta_w = default_factors(catalog.get_device("h100-sxm"), "fp8", "any").eta_w.value
    assert dict(fit.kv_efficiency)["fp8"].value == pytest.approx(ETA_KV / eta_w, rel=1e-9)
    assert {n for n, _ in fit.left_out} == {"eta_w", "eta_compute", "t_fixed", "collective_latency", "t_layer"}


def test_kernel_and_itl_rows_of_one_file_fit_together(module: ModuleType, tmp_path: Path) -> None:
    """The benchmark's row beside ITL rows of the same deployment in bf16: each kind is read, and the kernel
    row alone gives fp8's η_kv."""
    path, _, _ = written(module, tmp_path)
    lines = path.read_text().splitlines()
    itl = [f"llama-3-8b,h100-sxm,1,1,,bf16,{b},{s},{ms},,," for b, s, ms in
           ((1, 1000, 8.1), (8, 8000, 9.7), (32, 32000, 30.2))]
    path.write_text("\n".join([*lines, *itl]) + "\n")
    ms_ = mr.read(str(path), mr.Given(engine="vllm")).measurements
    assert [m.observed()[0][0] for m in ms_] == ["kernel", "itl", "itl", "itl"]
    (fit,) = cal.fit(ms_, "p.toml")
    assert dict(fit.fitted)["eta_kv:fp8"].value == pytest.approx(ETA_KV, rel=1e-9)
    assert [r.kind for r in fit.residuals] == ["kernel", "itl", "itl", "itl"]


HEAD = "model,device,devices,tensor_parallel,weights,kv_dtype,batch,context,itl_ms,kv_bytes,kernel_ms," \
       "achieved_kv_bandwidth_Bps"
#: A row's cells up to the kernel's, itl_ms empty: the itl_ms cell is at column len(DEPLOYMENT), kv_bytes next.
DEPLOYMENT = "llama-3-8b,h100-sxm,1,1,,fp8,8,4000,,"


def row_file(tmp_path: Path, cells: str) -> Path:
    """A CSV of one row: DEPLOYMENT then `cells` (kv_bytes, kernel_ms, achieved_kv_bandwidth_Bps), on line 3."""
    path = tmp_path / "k.csv"
    path.write_text(f"# a comment\n{HEAD}\n{DEPLOYMENT}{cells}\n")
    return path


def column(cells: str, i: int) -> int:
    """The column the i-th kernel cell of `cells` starts at."""
    return len(DEPLOYMENT) + 1 + sum(len(c) + 1 for c in cells.split(",")[:i])


def test_a_row_with_neither_an_itl_nor_a_kernel_measurement_is_refused(tmp_path: Path) -> None:
    path = row_file(tmp_path, ",,")
    text = refusal(path)
    assert text.startswith(f"{path}:3:{len(DEPLOYMENT)}: no `itl_ms` in this row, nor a kernel measurement "
                           "(`kv_bytes`, `kernel_ms`, `achieved_kv_bandwidth_Bps`)"), text


@pytest.mark.parametrize("cells,i", [(",1.0,1000000000", 0), ("1000000,,1000000000", 1), ("1000000,1.0,", 2)])
def test_a_kernel_measurement_missing_a_cell_names_it(cells: str, i: int, tmp_path: Path) -> None:
    path = row_file(tmp_path, cells)
    missing = mr.KERNEL_COLUMNS[i]
    text = refusal(path)
    assert text.startswith(f"{path}:3:{column(cells, i)}: no `{missing}` in this row: a kernel measurement needs "
                           "`kv_bytes`, `kernel_ms`, `achieved_kv_bandwidth_Bps`"), text


def test_kv_bytes_over_kernel_ms_must_agree_with_the_achieved_bandwidth(tmp_path: Path) -> None:
    # 1e9 B in 1 ms is 1e12 B/s; 1.02e12 is 2% off: refused at the achieved column, naming both figures
    cells = "1000000000,1.0,1020000000000"
    path = row_file(tmp_path, cells)
    text = refusal(path)
    assert text.startswith(f"{path}:3:{column(cells, 2)}: kv_bytes / kernel_ms is 1e+12 B/s, but "
                           "achieved_kv_bandwidth_Bps is 1.02e+12 B/s: 1.96% apart, more than 1%"), text
    # 0.5% off is the rounding of kernel_ms, not two measurements: read, at the achieved bandwidth's time
    m = one(row_file(tmp_path, "1000000000,1.0,1005000000000"))
    assert m.kernel_s == pytest.approx(1e9 / 1.005e12, rel=1e-15) and m.kv_bytes == 1e9


@pytest.mark.parametrize("cells,i,why", [("0,1.0,1", 0, "kv_bytes must be above 0"),
                                         ("1000000000,0,1000000000000", 1, "kernel_ms must be above 0"),
                                         ("-5,1.0,1000000000", 0, "kv_bytes is -5.0: expected a number from 0 to "
                                                                 "1e+18"),
                                         ("1000000000,1.0,2e15", 2, "achieved_kv_bandwidth_Bps is 2000000000000000.0: "
                                                                   "expected a number from 0 to 1e+15")])
def test_a_kernel_figure_must_be_positive_and_bounded(cells: str, i: int, why: str, tmp_path: Path) -> None:
    path = row_file(tmp_path, cells)
    text = refusal(path)
    assert text.startswith(f"{path}:3:{column(cells, i)}: {why}"), text


def test_an_itl_row_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "i.csv"
    path.write_text(f"{HEAD}\nllama-3-8b,h100-sxm,1,1,,fp8,8,4000,9.5,,,\n")
    got = one(path)
    assert got.itl_s == pytest.approx(9.5e-3, rel=1e-15) and got.kernel_s is None and got.kv_bytes is None
    assert got.observed() == (("itl", got.itl_s),)
