"""aiconfigurator's own estimate of the silicon sample's fit-set rows, for `bench/serving.py --aic` (docs/service.md).

Run (in a separate venv: `python3 -m venv /work/venv-aic && /work/venv-aic/bin/pip install aiconfigurator==0.12.0`):

    /work/venv-aic/bin/python bench/aiconfigurator_rows.py [--ids SERVING_OUT.csv] [--limit N] [SAMPLE.csv] > AIC.csv

For each row of the sample measured before HOLDOUT (and, with --ids, whose id is in bench/serving.py's --out
CSV), it calls aiconfigurator's `cli_estimate` with the row's own arguments, as aiconfigurator's
tools/accuracy_regression_testing/predict_silicon_sample.py does (the row's backend version when aiconfigurator
has its database, else its default one), and writes `id,aic_tpot_ms,aic_ttft_ms,note`: empty figures and the
reason where it cannot estimate. Offline: a checkpoint aiconfigurator has no bundled config for is estimated
under the bundled one of the same architecture (ALIASES, said in `note`); any other download is an error
counted in the summary on stderr. It reads no held-out row: a row's date is checked before its figures.
It uses only the standard library and aiconfigurator, not kvplan.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "public" / "silicon_sample.csv"
HOLDOUT = "2026-03-01"
#: Checkpoints of the sample that aiconfigurator 0.12.0 bundles no config for, and the bundled checkpoint of the
#: same architecture (its model_configs/): the Llama 3.1 instruct/base repos share one config.
ALIASES = {"meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
           "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B"}
PARALLEL = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
_MEASURED = re.compile(r"measured=(\d{4}-\d{2}-\d{2})")


def estimate_args(row: dict[str, str]) -> dict[str, object]:
    """cli_estimate's arguments for an aggregated row (predict_silicon_sample.py's _estimate_args)."""
    return dict(model_path=ALIASES.get(row["model_path"], row["model_path"]), system_name=row["system"],
                mode=row["mode"], backend_name=row["backend"], backend_version=row["backend_version"] or None,
                isl=int(row["isl"]), osl=int(row["osl"]), gemm_quant_mode=row["gemm_quant_mode"] or None,
                moe_quant_mode=row["moe_quant_mode"] or None,
                **{f: int(row[f]) for f in ("batch_size", *PARALLEL) if row.get(f)})


def estimate(args: dict[str, object]) -> tuple[float, float]:
    """aiconfigurator's (TTFT, TPOT) in ms; its default database when it has none for the row's version."""
    from aiconfigurator.cli.api import cli_estimate  # type: ignore[import-not-found]  # its own venv only

    with contextlib.redirect_stdout(sys.stderr):
        try:
            r = cli_estimate(**args)
        except ValueError as e:
            if args["backend_version"] is None or "Failed to load perf database" not in str(e):
                raise
            r = cli_estimate(**{**args, "backend_version": None})
    return float(r.ttft), float(r.tpot)


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    ids: Optional[set[str]] = None
    limit: Optional[int] = None
    path = SAMPLE
    while args:
        a = args.pop(0)
        if a == "--ids" and args:
            with open(args.pop(0), newline="", encoding="utf-8") as f:
                ids = {r["id"] for r in csv.DictReader(f)}
        elif a == "--limit" and args:
            limit = int(args.pop(0))
        elif not a.startswith("-"):
            path = Path(a)
        else:
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
    logging.disable(logging.WARNING)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["id", "aic_tpot_ms", "aic_ttft_ms", "note"])
    why: Counter[str] = Counter()
    cache: dict[tuple[tuple[str, object], ...], tuple[float, float] | str] = {}
    done = 0
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            m = _MEASURED.search(row["silicon_data_source"])
            if m is None or m.group(1) >= HOLDOUT or (ids is not None and row["id"] not in ids):
                continue  # undated or held out: nothing of it past its date is read
            if row["mode"] != "agg":
                continue
            if limit is not None and done >= limit:
                break
            done += 1
            est = estimate_args(row)
            key = tuple(sorted(est.items()))
            if key not in cache:
                try:
                    cache[key] = estimate(est)
                except Exception as e:  # noqa: BLE001 -- aiconfigurator's own errors, each counted by its kind
                    cache[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            got = cache[key]
            note = f"model_path {est['model_path']}" if row["model_path"] in ALIASES else ""
            if isinstance(got, str):
                why[got.split(":")[0]] += 1
                out.writerow([row["id"], "", "", got])
            else:
                why["estimated"] += 1
                out.writerow([row["id"], f"{got[1]:.6g}", f"{got[0]:.6g}", note])
            sys.stdout.flush()
    buf = io.StringIO()
    for k, n in why.most_common():
        buf.write(f"{n:6}  {k}\n")
    print(f"{done} rows:\n{buf.getvalue()}", file=sys.stderr, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
