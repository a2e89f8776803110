"""`kvplan sweep`: the grid of a spec file's deployments or of --model/--device, and the rows it streams."""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Generator, Iterator

import attrs

from kvplan.app.output import Line
from kvplan.app.requests import SweepRequest
from kvplan.app.spec import checked, load_calibration
from kvplan.base.errors import KvplanError
from kvplan.base.records import record

if TYPE_CHECKING:
    from kvplan.model.sweep import SweepSpec


@record
class Sweep:
    """The deployments to sweep and how to write them; `write` streams the rows, yielding each piece's count."""

    specs: tuple[SweepSpec, ...]
    total: int
    fmt: str
    exact: bool
    jobs: int

    def write(self, out: IO[bytes]) -> Iterator[int]:
        """Write the sweep to the binary file `out` in its format; yields the rows of each piece written."""
        from kvplan.model import sweep as sw

        if self.fmt == "parquet":
            return sw.parquet_write(self.specs, out)
        if self.fmt == "csv":
            return sw.csv_write(self.specs, out, exact=self.exact, jobs=self.jobs)
        return _written(sw.json_text(self.specs), out)


def _written(stream: Iterator[tuple[int, str]], out: IO[bytes]) -> Iterator[int]:
    """Write a sweep's text pieces to `out` as UTF-8, yielding each piece's rows (for the progress bar)."""
    for n, text in stream:
        out.write(text.encode("utf-8"))
        yield n


def _csv_only(fmt: str, exact: bool, jobs: int) -> None:
    """sweep's --exact and --jobs shape the CSV writer only: with another format they are an error, not ignored."""
    if fmt != "csv" and (exact or jobs != 1):
        raise KvplanError(f"{'--exact' if exact else '--jobs'} applies to --format csv only",
                          help=f"--format {fmt} writes every number exactly, in one process: drop the option, or "
                               "write --format csv")


def sweep(req: SweepRequest) -> Generator[Line, None, Sweep]:
    """The sweep a request asks for, its deployments checked (and, for parquet, pyarrow found) before any row."""
    from kvplan.model import sweep as sw

    _csv_only(req.fmt, req.exact, req.jobs)
    lists = {"devices": req.devices, "kv_dtypes": req.kv_dtypes, "batch": req.batch, "context": req.context}
    if req.spec_file is not None:
        if req.model_id or req.model_config or req.device_id:
            raise KvplanError("give FILE or --model/--device, not both")
        result = yield from checked(req.spec_file, req.allow_paths)
        specs = sw.specs_from_scenarios(result.scenarios, weights=req.weights, placement=req.placement, **lists)
    else:
        from kvplan import catalog
        from kvplan.catalog.hub import resolve_model

        if req.device_id is None:
            raise KvplanError("missing --device", help="name a catalog device (kvplan devices), or give a .kvp FILE")
        given = {k: v for k, v in lists.items() if v is not None}
        specs = [sw.spec_from_flags(resolve_model(req.model_id, req.model_config), catalog.get_device(req.device_id),
                                    weights=req.weights, placement=req.placement or "striped", **given)]
    profile = load_calibration(req.calibration)
    if profile is not None:  # the option replaces each deployment's own `calibration`
        from kvplan.model.profile import unmatched

        # a sweep's row is one engine's (no per-engine lines): a fit applies as fit_for finds it
        why = unmatched(profile, [(x.device.id, x.engine) for x in specs], per_engine=False)
        if why is not None:
            raise KvplanError(why, help="calibrate on runs of that device and engine (docs/calibrate.md), or sweep "
                                        "a spec whose deployment names the engine the profile fits")
        specs = [attrs.evolve(x, calibration=profile) for x in specs]
    job = Sweep(tuple(specs), sw.total_points(specs), req.fmt, req.exact, req.jobs)  # refused above the limit
    if req.fmt == "parquet":
        sw.parquet_schema(False)  # without pyarrow: the one-line error, before the output file is made
    return job
