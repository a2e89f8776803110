"""The words of the checker's messages: suggestions by meaning (synonyms, opposites), units and ranges in words.

kvplan.lang.check and its parts (values, blocks, sections, workload) build their help lines with these.
"""

from __future__ import annotations

import itertools
import re
from typing import Mapping, Optional, Sequence

from kvplan.base import limits
from kvplan.base.diagnostics import Fix
from kvplan.base.errors import Span
from kvplan.base.near import close_matches
from kvplan.base.units import UNITS, Dim, fmt_unit
from kvplan.catalog import engines as engine_catalog
from kvplan.catalog.settings import REQUEST_RATE_UNITS
from kvplan.lang import fixes as fx
from kvplan.lang.spec import (
    Ident,
    Quantity,
    String,
    ValueNode,
)

# ------------------------------------------------------------------ words


def _did_you_mean(span: Span, help: str) -> Optional[Fix]:
    """The fix of a help that reads "did you mean `X`?": X in place of the span."""

    m = re.match(r"did you mean `([^`]+)`\?", help)
    return fx.replace(span, m.group(1)) if m else None


def _source_text(node: Optional[ValueNode]) -> str:
    """A scalar value as it would be written back; "" for anything else."""
    if isinstance(node, Quantity):
        return node.text
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, String):
        return node.value
    return ""


#: Words people write for a choice, by what they mean: a suggestion goes by meaning, never by
#: spelling alone. A tuple of several choices lists them all (`lossy` is any of the lossy budgets).
SYNONYMS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "budget": {"lossy": ("near-lossless", "moderate", "aggressive"), "exact": ("lossless",),
               "none": ("lossless",), "no-loss": ("lossless",), "medium": ("moderate",)},
    "eviction": {"on": ("allowed",), "yes": ("allowed",), "true": ("allowed",), "allow": ("allowed",),
                 "enabled": ("allowed",), "off": ("forbidden",), "no": ("forbidden",), "false": ("forbidden",),
                 "forbid": ("forbidden",), "disabled": ("forbidden",), "none": ("forbidden",)},
    "prefix_caching": {"yes": ("on",), "enabled": ("on",), "enable": ("on",), "no": ("off",),
                       "disabled": ("off",), "disable": ("off",)},
    "placement": {"stripe": ("striped",), "interleaved": ("striped",), "pin": ("pinned",)},
    "objective": {"fewest": ("fewest-devices",), "cheap": ("cheapest",), "fast": ("fastest",),
                  "latency": ("fastest",), "headroom": ("most-headroom",)},
    "regime": {"memory-bound": ("weight-bound", "kv-bound"), "bandwidth-bound": ("weight-bound", "kv-bound"),
               "oom": ("capacity-bound",), "capacity": ("capacity-bound",)},
    "tier": {"cpu": ("host",), "dram": ("host",), "disk": ("ssd",), "nvme": ("ssd",), "off": ("none",)},
}
#: Word parts that carry a meaning wherever they stand in a word (`lossy-ish`, `lossy_ok`,
#: `lossier`, `lossful`): any word containing one means those choices, whatever it is spelled like.
STEMS: Mapping[str, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = {
    "budget": ((("lossy", "lossier", "lossiest", "lossful"), ("near-lossless", "moderate", "aggressive")),),
    "eviction": ((("disallow", "forbid", "prohibit", "deny"), ("forbidden",)),),
}


def _synonyms(key: str) -> Mapping[str, tuple[str, ...]]:
    """SYNONYMS of `key`; an engine's are the aliases in its catalog record (kvplan.catalog.engines)."""
    if key == "engine":
        return {a: (e.id,) for e in engine_catalog.ENGINES.values() for a in e.aliases}
    return SYNONYMS.get(key, {})
#: Pairs that look alike and mean the opposite.
OPPOSITES = frozenset({frozenset(p) for p in (("lossy", "lossless"), ("on", "off"), ("true", "false"),
                                               ("allowed", "forbidden"), ("enabled", "disabled"))})
_NEGATIONS = ("un", "non-", "non", "no-", "not-", "dis", "in")


def _opposite(a: str, b: str) -> bool:
    """Whether a and b look alike but mean the opposite: a known pair, one the other negated,
    or the `-y` and `-less` forms of one root (lossy / lossless)."""
    a, b = a.lower(), b.lower()
    if frozenset((a, b)) in OPPOSITES:
        return True
    # a word built on one side of a pair (`lossy-ish`, `not-allowed`) and a choice built on the other
    for pair in OPPOSITES:
        for x, y in itertools.permutations(sorted(pair)):
            if len(x) >= 5 and x in a and y not in a and y in b and x not in b:
                return True
    if any(a.startswith(n) and b == a[len(n):].strip("-_") or b.startswith(n) and a == b[len(n):].strip("-_")
           for n in _NEGATIONS):
        return True
    if any(a == n + b or b == n + a for n in _NEGATIONS):
        return True
    return any(x.endswith("y") and y.endswith("less") and x[:-1] == y[:-4] for x, y in ((a, b), (b, a)))


def _meaning(word: str, key: str, choices: Sequence[str], what: str) -> tuple[str, tuple[str, ...]]:
    """The help for an unknown choice and the choices it may have meant: synonyms first; a
    spelling match only when it does not mean something else."""
    meant = tuple(c for c in _synonyms(key).get(word.lower(), ()) if c in choices)
    if not meant:
        meant = next((tuple(c for c in means if c in choices) for stems, means in STEMS.get(key, ())
                      if any(s in word.lower() for s in stems)), ())
    if len(meant) > 1:
        return f"`{word}` is not one {what}: it could be {_or(meant)}", meant
    if meant:
        return f"did you mean `{meant[0]}`?", meant
    close = [c for c in close_matches(word, choices, n=3, cutoff=0.5) if not _opposite(word, c)][:1]
    if close:
        return f"did you mean `{close[0]}`?", (close[0],)
    return f"choose {_or(choices)}", ()


_EXAMPLES = {Dim.TOKENS: "128k", Dim.COUNT: "32", Dim.BYTES: "80 GB", Dim.BANDWIDTH: "3.35 TB/s",
             Dim.COMPUTE: "989 TFLOPS", Dim.TIME: "50 ms", Dim.RATE: "500 tok/s", Dim.FRACTION: "60%",
             Dim.NUMBER: "1.5"}


def _dim_words(dim: Dim) -> str:
    return {Dim.COUNT: "a count", Dim.NUMBER: "a number", Dim.FRACTION: "a fraction"}.get(dim, dim.value)


def _unit_names(table: Mapping[str, float]) -> str:
    units = [f"`{u}`" for u in table if u]
    plain = "" in table
    if not units:
        return "a plain number"
    return ", ".join(units[:16]) + (" or a plain number" if plain else "")


def _unit_first(word: str, dim: Dim) -> Optional[str]:
    """'128k' for the identifier 'k128' when `k` is a unit of `dim`: a unit written before its number."""
    for unit in sorted(UNITS[dim], key=len, reverse=True):
        if unit and word.startswith(unit):
            rest = word[len(unit):]
            try:
                float(rest)
            except ValueError:
                continue
            return f"{rest}{unit}"
    return None


#: Units a range's ends are written in, by dimension: each one the key itself takes.
_BOUND_UNITS: Mapping[Dim, Mapping[str, float]] = {
    Dim.BYTES: {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12},
    Dim.BANDWIDTH: {"B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12},
    Dim.COMPUTE: {"FLOPS": 1.0, "GFLOPS": 1e9, "TFLOPS": 1e12, "PFLOPS": 1e15},
    Dim.TIME: {"us": 1e-6, "ms": 1e-3, "s": 1.0},
    Dim.RATE: {"tok/s": 1.0},
}

#: The range of a device block's quantity, by dimension (kvplan.base.limits).
_DEVICE_RANGE = {Dim.BYTES: (limits.MIN_MEMORY, limits.MAX_MEMORY),
                 Dim.BANDWIDTH: (limits.MIN_BANDWIDTH, limits.MAX_BANDWIDTH),
                 Dim.COMPUTE: (limits.MIN_COMPUTE, limits.MAX_COMPUTE)}


def _shown(text: str) -> str:
    """A value as written, cut when it is too long to repeat whole (`99999…` (400 characters))."""
    text = " ".join(text.split())
    return text if len(text) <= 24 else f"{text[:12]}… ({len(text):,} characters)"


def _range_words(lo: Optional[float], hi: Optional[float], lo_open: bool, dim: Dim, unit: str,
                 hi_open: bool = False) -> str:
    def show(x: float) -> str:
        if unit == "%":
            return f"{x * 100:g}%"
        if dim is Dim.RATE and unit in REQUEST_RATE_UNITS:  # requests, not tokens, per second
            return f"{x:g}".replace("e+0", "e").replace("e+", "e") + "/s"
        if dim is Dim.COUNT and x >= 1e12:
            return fmt_unit(x, "1")                      # parameters: `1000T`
        if dim in (Dim.COUNT, Dim.TOKENS, Dim.NUMBER, Dim.FRACTION):
            return f"{x:,.0f}" if x == int(x) else f"{x:g}"
        # as a .kvp value: the largest unit the key takes that leaves a number of at least 1
        units = sorted(((f, u) for u, f in _BOUND_UNITS[dim].items()), reverse=True)
        factor, name = next(((f, u) for f, u in units if abs(x) >= f), units[-1])
        return f"{x / factor:g}".replace("e+0", "e").replace("e+", "e") + f" {name}"
    if lo is not None and hi is not None:
        if lo_open:
            return f"above {show(lo)} and {'below' if hi_open else 'at most'} {show(hi)}"
        return f"between {show(lo)} and {show(hi)}"
    if lo is not None:
        return f"{'above' if lo_open else 'at least'} {show(lo)}"
    return f"at most {show(hi or 0)}"


def _or(words: Sequence[str]) -> str:
    quoted = [f"`{w}`" for w in words]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
