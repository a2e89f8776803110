"""The range of every number kvplan reads, checked once where it is read.

The .kvp checker (kvplan.lang.check), `kvplan import` (kvplan.app.importer) and the
config.json reader (kvplan.catalog.hf_config) refuse a number outside its range with a located
error that names the range. Everything after that edge works with finite,
bounded numbers: no loop runs past the largest count, no product of inputs
overflows a float64 (or, for token counts, an int64), and no integer reaches
the size where Python refuses to convert it to text.

These are kvplan's own limits (decided; docs/language.md, docs/cli-import.md,
docs/config-json.md), not properties of any hardware or model: each is far above
what a real deployment states, and small enough that the work it admits stays
bounded. Where two readers take the same quantity (a device count in a spec and
`-tp` on a vLLM command line) they share one limit, so that `kvplan import`
never writes a spec that `kvplan lint` refuses.
"""

from __future__ import annotations

import re
from typing import Optional

#: Devices of one deployment (tensor × pipeline ranks): `devices`, `pin { devices }`, `-tp` × `-pp`.
MAX_DEVICES = 4096
#: Replica layouts (r replicas × n devices) one request workload's layout search plans (kvplan.planner.layouts):
#: at most 8 per-replica counts in a ladder, two replica counts sized from each, and the 8 splits of one total,
#: twice over; each is a settled batch plan of a few milliseconds, whatever `devices = <= N` says.
MAX_LAYOUTS = 48
#: Concurrent sequences: `batch`, `fanout`, `--max-num-seqs`.
MAX_BATCH = 2**20                 # 1,048,576
#: Tokens of one sequence: `context`, `prefix`, `block_size`, `--max-model-len`, a model's
#: `max_position_embeddings` and `sliding_window`. batch × context stays below 2^50 tokens.
MAX_TOKENS = 2**30                # 1,073,741,824 (1Gi)
#: Hardware units of one device block: `partitions`, `sm_count`.
MAX_UNITS = 2**20
#: Parameters of a model: `params`, `params_active`.
MIN_PARAMS, MAX_PARAMS = 1.0, 1e15
#: A device block's memory (B), bandwidths (B/s) and compute (FLOP/s).
MIN_MEMORY, MAX_MEMORY = 1e6, 1e15           # 1 MB .. 1 PB
MIN_BANDWIDTH, MAX_BANDWIDTH = 1e6, 1e15     # 1 MB/s .. 1 PB/s
MIN_COMPUTE, MAX_COMPUTE = 1e9, 1e18         # 1 GFLOP/s .. 1 EFLOP/s
#: SLOs and the matching `expect` metrics.
MIN_STEP_TIME, MAX_STEP_TIME = 1e-6, 3600.0  # 1 us .. 1 h
MAX_THROUGHPUT = 1e12                        # tok/s
MAX_KV_BYTES = 1e18                          # an `expect kv_bytes` bound: 1 EB
MAX_SPEEDUP = 1e6
#: Scenarios: a deployment's workload lists expand into at most MAX_SCENARIOS; a file
#: into at most MAX_FILE_SCENARIOS. lint plans every scenario: about 2 ms of CPU apiece when none fits
#: (bench/bench_lint.py --cap: 10,000 unfit took 21 s), plus the file's bounded suggestion search
#: (kvplan.planner.REPLANS_PER_FILE), so a file at the cap lints in under 10 s on one core (issue 19).
MAX_SCENARIOS = 1000
MAX_FILE_SCENARIOS = 2_000
#: Blocks nested in one another, a declaration's own braces included: the language uses two
#: (`deployment "x" { workload { ... } }`). `kvplan fmt` indents each level, so its output grows
#: with depth × lines; under this cap it stays linear in the file (a spec-sized file formats in a few MB).
MAX_NESTING = 16
#: Points of one `kvplan sweep` (the product of its lists, summed over a file's deployments): ten
#: times the 10^7-point sweeps it is built for (docs/cli-sweep.md measures
#: 12 s and 1.7 GB of CSV per 10^7 points: the limit is about 2 minutes and 17 GB).
MAX_SWEEP_POINTS = 10**8

#: config.json sizes (kvplan.catalog.hf_config): layers, heads, widths (hidden, intermediate, head, vocab,
#: low-rank), experts.
MAX_LAYERS = 1024
MAX_HEADS = 2**16
MAX_WIDTH = 2**24                 # 16,777,216
MAX_EXPERTS = 2**16
#: A config.json, a JSON flag value or any other JSON or TOML input (a calibration profile, pyproject.toml,
#: a safetensors index) nests objects, tables and arrays at most this deep.
MAX_JSON_DEPTH = 64
#: Digits of an integer read from JSON, YAML or a flag: more cannot be in any range above.
MAX_DIGITS = 30


def count_words(n: float) -> str:
    """1048576 -> '1,048,576'."""
    return f"{int(n):,}"


def between(lo: float, hi: float, unit: str = "") -> str:
    """'between 1 and 4,096' (whole numbers), with a unit when given."""
    tail = f" {unit}" if unit else ""
    return f"between {count_words(lo)} and {count_words(hi)}{tail}"


def digits_of(text: str) -> int:
    """How many digits a written integer has (sign and leading zeros aside)."""
    return len(text.lstrip("+-").lstrip("0")) or 1


#: Compiled on first use (re caches it), not at import: only a JSON or TOML file read from the user needs them.
_JSON_TOKEN = r'"(?:[^"\\]|\\.)*"|[\[\]{}]'
#: A TOML string of each of the four kinds (a multi-line one that never closes runs to the end: one scan),
#: a comment, or a bracket; a table header's `[` or `[[` closes on its line.
_TOML_TOKEN = (r'"""(?:[^"\\]|\\[\s\S]|"(?!""))*"""|"""[\s\S]*' + r"|'''(?:[^']|'(?!''))*'''|'''[\s\S]*"
               + r'''|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|#[^\n]*|[\[\]{}]''')


def json_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> Optional[int]:
    """The offset of the first `[` or `{` that opens level limit + 1 of `text`, or None.

    Python's json module recurses once per level and raises RecursionError near
    a thousand; this scan (strings skipped) finds the place first.
    """
    return _too_deep(text, _JSON_TOKEN, limit)


def toml_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> Optional[int]:
    """As json_too_deep, for TOML: tomllib recurses once per nested array or inline table."""
    return _too_deep(text, _TOML_TOKEN, limit)


def _too_deep(text: str, tokens: str, limit: int) -> Optional[int]:
    depth = 0
    for m in re.finditer(tokens, text):
        ch = m.group(0)
        if ch in ("[", "{"):
            depth += 1
            if depth > limit:
                return m.start()
        elif ch in ("]", "}"):
            depth = max(depth - 1, 0)
    return None


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
