"""The error-bar table (kvplan/catalog/intervals.toml, docs/expected.md "Error bars") from the ledger's residuals.

Run:  python bench/intervals.py res.csv [--level 0.8] [--out kvplan/catalog/intervals.toml]
      python bench/intervals.py --coverage res.csv [--level 0.8]

res.csv is what `bench/serving.py --out res.csv` writes: one row per planned public row, its first columns
engine,device,regime,tpot_expected_ms,tpot_measured_ms,ttft_expected_ms,ttft_measured_ms,measured_on,split.

The table comes from the rows with split = fit measured before 2026-03-01 (CUTOFF). For each cell, engine ·
device · regime and the coarser engine · device, engine and any, it writes the quantiles (1 - level)/2 and
(1 + level)/2 of measured/expected (linear between order statistics), of TPOT and of TTFT, over the cell's rows;
a row whose TPOT or TTFT pair is blank counts only for the other. Then run `python tools/build_catalog.py`.

--coverage builds the same table from the fit rows in memory and prints, per engine, the share of split = holdout
rows whose measured TPOT (and TTFT) lies inside the interval kvplan would print for them (the cell lookup of
kvplan.planner.intervals, its fallback and widening); exit 1 when an engine's share is outside 75-85%
(issue 22's acceptance), 0 when every one is inside. A malformed file is one line naming FILE:LINE:COL, exit 2.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import math
import sys
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: kvplan is the checkout's
    sys.path.insert(0, str(ROOT))

from kvplan.base.records import record  # noqa: E402
from kvplan.planner import intervals as iv  # noqa: E402

COLUMNS = ("engine", "device", "regime", "tpot_expected_ms", "tpot_measured_ms", "ttft_expected_ms",
           "ttft_measured_ms", "measured_on", "split")
#: Rows measured on or after this day are never fitted (issue 22: the held-out window).
CUTOFF = "2026-03-01"
#: The acceptance band of --coverage at the 80% level (issue 22, item 5).
BAND = (0.75, 0.85)
HEADER = """\
# Error bars of kvplan's expected figures (docs/expected.md, "Error bars").
#
# Written by bench/intervals.py from the ledger's residuals (bench/serving.py --out res.csv), its
# `split = fit` rows only (measured before 2026-03-01); never edited by hand. One table per cell:
#
#   ["vllm/h200/kv-bound"]   engine/device/regime; the coarser cells "vllm/h200", "vllm" and "any" too
#   engine, device, regime   the cell's coordinates ("" where the cell spans them)
#   level                    the central share the bounds hold (0.8: the 10th and 90th percentiles)
#   n                        the residual rows the quantiles are of
#   tpot_lo, tpot_hi         quantiles of measured/expected TPOT (step time) over those rows
#   ttft_lo, ttft_hi         the same of TTFT
#   source                   the residual file's provenance (its name and sha256, the rows' measured_on span)
#"""


class BadInput(Exception):
    """FILE:LINE:COL and what is wrong."""


@record
class Row:
    engine: str
    device: str
    regime: str
    tpot: Optional[float]   # measured/expected, None when the pair is blank
    ttft: Optional[float]
    measured_on: str
    split: str


def _ratio(path: str, line: int, header: Sequence[str], rec: Mapping[str, str], what: str) -> Optional[float]:
    exp, meas = rec[f"{what}_expected_ms"].strip(), rec[f"{what}_measured_ms"].strip()
    if not exp or not meas:
        return None
    for col, text in ((f"{what}_expected_ms", exp), (f"{what}_measured_ms", meas)):
        try:
            x = float(text)
        except ValueError:
            x = float("nan")
        if not math.isfinite(x) or x <= 0:
            raise BadInput(f"{path}:{line}:{header.index(col) + 1}: {col} = {text!r}: want a positive number "
                           "of milliseconds (or blank)")
    return float(meas) / float(exp)


def read(path: str) -> list[Row]:
    """The rows of a residual CSV; a missing column or a bad cell raises BadInput naming FILE:LINE:COL."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = list(reader.fieldnames or [])
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise BadInput(f"{path}:1:1: the header lacks {', '.join(missing)}; want the first columns "
                           f"{','.join(COLUMNS)} (bench/serving.py --out)")
        out = []
        for rec in reader:
            line = reader.line_num
            split = rec["split"].strip()
            if split not in ("fit", "holdout"):
                raise BadInput(f"{path}:{line}:{header.index('split') + 1}: split = {split!r}: want fit or holdout")
            day = rec["measured_on"].strip()
            if len(day) != 10 or day[4] != "-" or day[7] != "-" or not (day[:4] + day[5:7] + day[8:]).isdigit():
                raise BadInput(f"{path}:{line}:{header.index('measured_on') + 1}: measured_on = {day!r}: "
                               "want a date YYYY-MM-DD")
            out.append(Row(rec["engine"].strip(), rec["device"].strip(), rec["regime"].strip(),
                           _ratio(path, line, header, rec, "tpot"), _ratio(path, line, header, rec, "ttft"),
                           day, split))
    return out


def quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile of xs, linear between order statistics (position q·(n − 1) of the sorted values)."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    i = math.floor(pos)
    j = min(i + 1, len(s) - 1)
    return s[i] + (s[j] - s[i]) * (pos - i)


def _keys(r: Row) -> tuple[tuple[str, str, str, str], ...]:
    return ((f"{r.engine}/{r.device}/{r.regime}", r.engine, r.device, r.regime),
            (f"{r.engine}/{r.device}", r.engine, r.device, ""), (r.engine, r.engine, "", ""), ("any", "", "", ""))


def fit_rows(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if r.split == "fit" and r.measured_on < CUTOFF]


def table(rows: Sequence[Row], level: float, source: str) -> dict[str, dict[str, object]]:
    """The cells of intervals.toml (as tomllib would read them) from the fit rows; a cell needs both a TPOT and
    a TTFT ratio, so one with either side empty is left out."""
    groups: dict[str, tuple[tuple[str, str, str], list[float], list[float]]] = {}
    for r in rows:
        for key, *coords in _keys(r):
            g = groups.setdefault(key, ((coords[0], coords[1], coords[2]), [], []))
            if r.tpot is not None:
                g[1].append(r.tpot)
            if r.ttft is not None:
                g[2].append(r.ttft)
    lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
    out: dict[str, dict[str, object]] = {}
    for key in sorted(groups):
        (engine, device, regime), tp, tt = groups[key]
        if not tp or not tt:
            continue
        out[key] = {"engine": engine, "device": device, "regime": regime, "level": level, "n": min(len(tp), len(tt)),
                    "tpot_lo": round(quantile(tp, lo_q), 4), "tpot_hi": round(quantile(tp, hi_q), 4),
                    "ttft_lo": round(quantile(tt, lo_q), 4), "ttft_hi": round(quantile(tt, hi_q), 4),
                    "source": source}
    return out


def provenance(path: str, rows: Sequence[Row]) -> str:
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    days = sorted(r.measured_on for r in rows)
    span = f", measured {days[0]}..{days[-1]}" if days else ""
    return f"{Path(path).name} sha256 {digest}, {len(rows)} fit rows{span}"


def _toml_value(v: object) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def toml_text(cells: Mapping[str, Mapping[str, object]]) -> str:
    parts = [HEADER]
    if not cells:
        parts.append("# Shipped empty: the lead generates it from the ledger. "
                     "With no cells no plan prints an interval.")
    for key, cell in cells.items():
        parts.append(f'\n["{key}"]')
        parts.extend(f"{k} = {_toml_value(v)}" for k, v in cell.items())
    return "\n".join(parts) + "\n"


def coverage(rows: Sequence[Row], level: float, source: str) -> dict[str, dict[str, tuple[int, int]]]:
    """Per engine, per figure (tpot, ttft): (held-out rows inside the interval, held-out rows with a ratio)."""
    cells = iv.parse(table(fit_rows(rows), level, source), "the fit rows")
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for r in rows:
        if r.split != "holdout":
            continue
        c = iv.lookup(cells, r.engine, r.device, r.regime)
        per = out.setdefault(r.engine, {"tpot": (0, 0), "ttft": (0, 0)})
        if c is None:
            continue
        for what, ratio, (lo, hi) in (("tpot", r.tpot, c.tpot), ("ttft", r.ttft, c.ttft)):
            if ratio is not None:
                inside, n = per[what]
                per[what] = (inside + (lo <= ratio <= hi), n + 1)
    return dict(sorted(out.items()))


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/intervals.py", description=__doc__.split("\n")[0])
    ap.add_argument("residuals", nargs="?", help="res.csv (bench/serving.py --out)")
    ap.add_argument("--coverage", metavar="RES_CSV", help="report the held-out rows' coverage instead")
    ap.add_argument("--level", type=float, default=0.8, help="the central share of each interval (default 0.8)")
    ap.add_argument("--out", default=str(ROOT / "kvplan" / "catalog" / "intervals.toml"))
    a = ap.parse_args(argv)
    path = a.coverage or a.residuals
    if not path:
        print("bench/intervals.py: give res.csv, or --coverage res.csv", file=sys.stderr)
        return 2
    if not 0 < a.level < 1:
        print(f"bench/intervals.py: --level {a.level}: want a share between 0 and 1 (0.8)", file=sys.stderr)
        return 2
    try:
        rows = read(path)
    except (BadInput, OSError, UnicodeDecodeError, csv.Error) as err:
        print(f"bench/intervals.py: {err}", file=sys.stderr)
        return 2
    fit = fit_rows(rows)
    source = provenance(path, fit)
    if a.coverage:
        bad = 0
        print(f"held-out coverage of the {a.level:.0%} intervals (band {BAND[0]:.0%}-{BAND[1]:.0%}), from {source}")
        for engine, per in coverage(rows, a.level, source).items():
            shown = []
            for what, (inside, n) in per.items():
                share = inside / n if n else float("nan")
                ok = n > 0 and BAND[0] <= share <= BAND[1]
                bad += not ok
                shown.append(f"{what} {inside}/{n} = {share:.1%}" + ("" if ok else " OUTSIDE"))
            print(f"  {engine}: " + ", ".join(shown))
        return 1 if bad else 0
    Path(a.out).write_text(toml_text(table(fit, a.level, source)), encoding="utf-8")
    print(f"wrote {a.out} from {source}; now run python tools/build_catalog.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
