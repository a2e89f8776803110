"""Write each shipped catalog TOML (kvplan/catalog/*.toml) as JSON beside it, for a faster start.

    python tools/build_catalog.py            write kvplan/catalog/<name>.json for every <name>.toml
    python tools/build_catalog.py --check    exit 1 if a shipped JSON file is not what this would write

The TOML files are the source of truth: edit them, then run this. Parsing the four
catalogs with tomllib costs `kvplan advise` ~3.5 ms of its cold start; json.loads of the
same data ~0.1 ms (bench/bench_coldstart.py). Each JSON file holds

    {"format": 1, "source": "<name>.toml", "source_sha256": "<hash of the TOML file's bytes>",
     "data": <what tomllib.load returns for it>}

and kvplan.catalog uses it only when `source_sha256` is the hash of the TOML file it reads, else
it parses the TOML: an edited TOML is never shadowed by a stale JSON.
tests/unit/catalog/test_catalog_json.py checks that every shipped JSON file is exactly what this
writes (so forgetting to run it fails the suite) and that its data equals tomllib's parse.
The output is deterministic: entries in file order (the catalogs list them in that order),
one line per top-level entry, ASCII only.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "kvplan" / "catalog"
FORMAT = 1


def _json_only(value: Any, where: str) -> None:
    """Refuse what JSON cannot carry as TOML means it (dates and times, inf and nan)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _json_only(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _json_only(v, f"{where}[{i}]")
    elif isinstance(value, (datetime.date, datetime.time)) or (isinstance(value, float) and not math.isfinite(value)):
        raise SystemExit(f"build_catalog: {where} is {value!r}, which JSON cannot hold: write it as a string")


def build(name: str, raw: bytes) -> str:
    """The JSON text for the TOML file `name` whose bytes are `raw`."""
    data = tomllib.loads(raw.decode("utf-8"))
    _json_only(data, name)
    head = json.dumps({"format": FORMAT, "source": name, "source_sha256": hashlib.sha256(raw).hexdigest()},
                      ensure_ascii=True)
    entries = ",\n".join(f" {json.dumps(k, ensure_ascii=True)}: "
                         f"{json.dumps(v, ensure_ascii=True, separators=(',', ':'), allow_nan=False)}"
                         for k, v in data.items())
    text = head[:-1] + ', "data": {\n' + entries + "\n}}\n"
    if json.loads(text)["data"] != data:
        raise SystemExit(f"build_catalog: {name} does not survive a JSON round trip")
    return text


def sources() -> list[Path]:
    return sorted(CATALOG.glob("*.toml"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped files; write nothing")
    args = ap.parse_args(argv)
    stale = []
    for toml in sources():
        out = toml.with_suffix(".json")
        text = build(toml.name, toml.read_bytes())
        if args.check:
            if not out.is_file() or out.read_text(encoding="utf-8") != text:
                stale.append(out.relative_to(ROOT).as_posix())
            continue
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT).as_posix()} ({len(text):,} bytes)")
    if stale:
        print(f"{', '.join(stale)} stale: run python tools/build_catalog.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
