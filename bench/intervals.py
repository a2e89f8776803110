"""The error-bar table (kvplan/catalog/intervals.toml) from the ledger's residuals, and its held-out coverage.

Run:  python bench/intervals.py res.csv [--out PATH] [--level 0.8]   write the table (default: the shipped one)
      python bench/intervals.py --coverage res.csv [--level 0.8]     held-out rows inside their interval, per engine

res.csv is `bench/serving.py --out res.csv`: one line per planned row, its first columns
engine,device,regime,tpot_expected_ms,tpot_measured_ms,ttft_expected_ms,ttft_measured_ms,measured_on,split.
The table is made from the `split = fit` rows measured before 2026-03-01 only: per cell (engine/device/regime,
engine/device, engine, any) the (1 − level)/2 and (1 + level)/2 quantiles (linear interpolation between order
statistics) of measured/expected TPOT and TTFT, and the rows' count. `--coverage` builds the same cells from the
fit rows and reports the share of `split = holdout` rows whose measured TPOT and TTFT lie inside their interval
(kvplan.planner.intervals.lookup, fallback and thin-cell widening included); acceptance is 75–85% per engine at
level 0.8, and the exit status is 1 when an engine is outside it. After writing the table run
`python tools/build_catalog.py`. A malformed row stops it with FILE:LINE, what was wrong, exit 2.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import math
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: kvplan is the checkout's
    sys.path.insert(0, str(ROOT))

from kvplan.base.records import record  # noqa: E402
from kvplan.planner.intervals import Cell, lookup, parse  # noqa: E402

HOLDOUT = datetime.date(2026, 3, 1)  # issue 22: rows measured on or after it are held out
COLUMNS = ("engine", "device", "regime", "tpot_expected_ms", "tpot_measured_ms", "ttft_expected_ms",
           "ttft_measured_ms", "measured_on", "split")
LEVEL = 0.8
TABLE = ROOT / "kvplan" / "catalog" / "intervals.toml"
ACCEPT = (0.75, 0.85)


class BenchError(Exception):
    """The bench cannot run: one line naming the file (and line) and what was wrong."""


@record
class Residual:
    engine: str
    device: str
    regime: str
    tpot: float   # measured / expected
    ttft: float
    measured_on: datetime.date
    split: str
    tpot_ms: tuple[float, float]  # (expected, measured), for coverage
    ttft_ms: tuple[float, float]


def _positive(text: str, where: str, col: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise BenchError(f"{where}: {col} is {text!r}, want a number of milliseconds") from None
    if not (math.isfinite(v) and v > 0):
        raise BenchError(f"{where}: {col} is {text!r}, want a finite number > 0")
    return v


def read(path: Path) -> list[Residual]:
    """The residual rows of `path`; a missing column, a bad number, date or split is a BenchError."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BenchError(f"{path}: cannot read: {e.strerror}") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise BenchError(f"{path}:1: no column {', '.join(missing)}: want the header of bench/serving.py --out")
    out = []
    for i, row in enumerate(reader, start=2):
        where = f"{path}:{i}"
        te, tm = (_positive(row[c], where, c) for c in ("tpot_expected_ms", "tpot_measured_ms"))
        fe, fm = (_positive(row[c], where, c) for c in ("ttft_expected_ms", "ttft_measured_ms"))
        try:
            on = datetime.date.fromisoformat(row["measured_on"])
        except ValueError:
            raise BenchError(f"{where}: measured_on is {row['measured_on']!r}, want YYYY-MM-DD") from None
        if row["split"] not in ("fit", "holdout"):
            raise BenchError(f"{where}: split is {row['split']!r}, want fit or holdout")
        if (row["split"] == "fit") != (on < HOLDOUT):
            raise BenchError(f"{where}: split {row['split']} but measured_on {on}: rows before {HOLDOUT} are fit, "
                             "the rest holdout")
        for c in ("engine", "device", "regime"):
            if not row[c] or "/" in row[c]:
                raise BenchError(f"{where}: {c} is {row[c]!r}, want a name without '/'")
        out.append(Residual(row["engine"], row["device"], row["regime"], tm / te, fm / fe, on, row["split"],
                            (te, tm), (fe, fm)))
    return out


def quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile of xs by linear interpolation between order statistics (numpy's default, type 7)."""
    s = sorted(xs)
    h = (len(s) - 1) * q
    lo = math.floor(h)
    return s[lo] + (h - lo) * (s[min(lo + 1, len(s) - 1)] - s[lo])


def cells_of(rows: Sequence[Residual], level: float, source: str) -> dict[str, dict[str, object]]:
    """The table's entries, by cell name, from the fit rows of `rows` (sorted by name: deterministic)."""
    groups: dict[tuple[str, str, str], list[Residual]] = {}
    for r in rows:
        if r.split != "fit":
            continue
        for key in ((r.engine, r.device, r.regime), (r.engine, r.device, ""), (r.engine, "", ""), ("", "", "")):
            groups.setdefault(key, []).append(r)
    a, b = (1 - level) / 2, (1 + level) / 2
    out: dict[str, dict[str, object]] = {}
    for (e, d, g), rs in groups.items():
        name = "/".join(x for x in (e, d, g) if x) or "any"
        t, f = [r.tpot for r in rs], [r.ttft for r in rs]
        out[name] = {"engine": e, "device": d, "regime": g, "level": level, "n": len(rs),
                     "tpot_lo": round(quantile(t, a), 4), "tpot_hi": round(quantile(t, b), 4),
                     "ttft_lo": round(quantile(f, a), 4), "ttft_hi": round(quantile(f, b), 4), "source": source}
    return dict(sorted(out.items()))


def provenance(path: Path, rows: Sequence[Residual]) -> str:
    """'res.csv sha256:…, 212 fit rows measured 2025-06-01..2026-02-27'."""
    fit = [r.measured_on for r in rows if r.split == "fit"]
    span = f"{min(fit)}..{max(fit)}" if fit else "none"
    return f"{path.name} sha256:{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}, {len(fit)} fit rows measured {span}"


def toml_text(cells: Mapping[str, Mapping[str, object]]) -> str:
    """The table's TOML: the shipped header comment, then one table per cell."""
    head = "".join(line + "\n" for line in TABLE.read_text(encoding="utf-8").splitlines()
                   if line.startswith("#") and not line.startswith("# Shipped empty"))
    body = []
    for name, c in cells.items():
        body.append(f'\n["{name}"]\n' + "".join(
            f"{k} = {repr(v) if isinstance(v, (int, float)) else _q(str(v))}\n" for k, v in c.items()))
    return head + "".join(body)


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def coverage(rows: Sequence[Residual], cells: Mapping[str, Cell]) -> dict[str, tuple[int, int, int]]:
    """Per engine: (held-out rows, TPOT inside its interval, TTFT inside its interval)."""
    out: dict[str, list[int]] = {}
    for r in rows:
        if r.split != "holdout":
            continue
        c = lookup(cells, r.engine, r.device, r.regime)
        acc = out.setdefault(r.engine, [0, 0, 0])
        acc[0] += 1
        if c is None:
            continue
        acc[1] += c.tpot[0] * r.tpot_ms[0] <= r.tpot_ms[1] <= c.tpot[1] * r.tpot_ms[0]
        acc[2] += c.ttft[0] * r.ttft_ms[0] <= r.ttft_ms[1] <= c.ttft[1] * r.ttft_ms[0]
    return {e: (a[0], a[1], a[2]) for e, a in sorted(out.items())}


def coverage_text(cov: Mapping[str, tuple[int, int, int]], level: float) -> tuple[str, bool]:
    """The coverage report and whether every engine's TPOT and TTFT shares lie in ACCEPT."""
    lines = [f"held-out rows inside their {round(level * 100)}% interval (acceptance {ACCEPT[0]:.0%}–{ACCEPT[1]:.0%})",
             f"  {'engine':<12} {'rows':>5} {'TPOT':>6} {'TTFT':>6}"]
    ok = True
    for e, (n, t, f) in cov.items():
        st, sf = t / n, f / n
        good = all(ACCEPT[0] <= s <= ACCEPT[1] for s in (st, sf))
        ok &= good
        lines.append(f"  {e:<12} {n:>5} {st:>6.1%} {sf:>6.1%}  {'ok' if good else 'OUTSIDE'}")
    if not cov:
        lines.append("  (no held-out rows)")
    return "\n".join(lines) + "\n", ok


USAGE = "usage: intervals.py [--coverage] [--out PATH] [--level L] RES.csv"


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    level, out, cov, path = LEVEL, TABLE, False, None
    try:
        while args:
            a = args.pop(0)
            if a == "--coverage":
                cov = True
            elif a in ("--out", "--level"):
                if not args:
                    raise BenchError(f"{a} wants a value; {USAGE}")
                v = args.pop(0)
                if a == "--out":
                    out = Path(v)
                else:
                    try:
                        level = float(v)
                    except ValueError:
                        level = -1.0
                    if not 0 < level < 1:
                        raise BenchError(f"--level is {v!r}, want a share between 0 and 1 (0.8)")
            elif a.startswith("-") or path is not None:
                raise BenchError(f"unexpected argument {a!r}; {USAGE}")
            else:
                path = Path(a)
        if path is None:
            raise BenchError(USAGE)
        rows = read(path)
        entries = cells_of(rows, level, provenance(path, rows))
        if cov:
            text, ok = coverage_text(coverage(rows, parse(entries, str(path))), level)
            sys.stdout.write(text)
            return 0 if ok else 1
        Path(out).write_text(toml_text(entries), encoding="utf-8")
        print(f"wrote {out} ({len(entries)} cells from {sum(r.split == 'fit' for r in rows)} fit rows); "
              "now run python tools/build_catalog.py")
        return 0
    except BenchError as e:
        print(f"intervals: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
