"""Did-you-mean: the known words closest to a mistyped one, by difflib's similarity ratio.

difflib (with heapq) costs ~1 ms to import, and is needed only when a word is wrong: it is imported on the
first call rather than at every start-up (bench/bench_coldstart.py).
"""

from __future__ import annotations

from typing import Sequence


def close_matches(word: str, possibilities: Sequence[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """`difflib.get_close_matches`: up to `n` of `possibilities` at least `cutoff` similar to `word`, best first."""
    import difflib

    return difflib.get_close_matches(word, possibilities, n=n, cutoff=cutoff)
