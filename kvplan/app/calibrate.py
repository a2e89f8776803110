"""`kvplan calibrate`: the expected model's factors fitted to measurements, written as a profile."""

from __future__ import annotations

import os

from kvplan.app.output import EXIT_CLEAN, Said, Stop, err, out
from kvplan.app.requests import CalibrateRequest
from kvplan.base.errors import KvplanError


def calibrate(req: CalibrateRequest) -> Said:
    """The fits on stdout, each measurement file's notes on stderr; stops when no parameter could be fitted."""
    from kvplan.engines import measurements
    from kvplan.model import calibrate
    from kvplan.render import calibrate_view

    output = req.output
    if any(os.path.exists(p) and os.path.exists(output) and os.path.samefile(p, output) for p in req.paths):
        raise KvplanError(f"-o {output} is one of the measurement files", help="write the profile elsewhere")
    given = measurements.Given(req.model_id, req.device_id, req.n_devices, req.tp, req.weights, req.kv_dtype,
                               None if req.engine is None else measurements.engine_id(req.engine), req.batch,
                               req.input_len, req.output_len)
    reads = measurements.read_all(req.paths, given)
    for note in dict.fromkeys(n for r in reads for n in r.notes):
        yield err(f"kvplan: note: {note}")
    fits = calibrate.fit([m for r in reads for m in r.measurements], output)
    yield out(calibrate_view.text(fits, ()), nl=False)
    if not any(f.written for f in fits):
        raise Stop("the measurements determine no parameter; no profile written (see above what each would need)")
    from kvplan.base.outputs import write_file

    yield err(f"wrote {write_file(output, calibrate_view.profile(fits, req.paths, output))}")
    return EXIT_CLEAN
