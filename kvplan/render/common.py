"""Shared helpers for renderers: JSON envelopes and aligned text tables."""

from __future__ import annotations

import json
from typing import Sequence

from kvplan.base.evidence import to_jsonable

FORMAT_VERSION = "1"


def dump_json(payload: dict[str, object]) -> str:
    """Deterministic JSON with the format version first. `payload` holds JSON values, Values (written as
    their contract objects) and tuples (as arrays): what kvplan.base.evidence.to_jsonable takes."""
    body = {"format_version": FORMAT_VERSION, **to_jsonable(payload)}
    return json.dumps(body, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> str:
    """A plain aligned table; columns in `right` are right-aligned (numbers)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]

    def line(cells: Sequence[str]) -> str:
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            out.append(c.rjust(w) if i in right else c.ljust(w))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *[line(r) for r in rows]]) + "\n"


def clip(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a word boundary, with "…" where it was cut.

    Never cuts inside a word: the cut goes at the last space that leaves room for the ellipsis
    (trailing ",;:" and spaces dropped), and a first word longer than `width` is kept whole.
    """
    if len(text) <= width:
        return text
    head = text[:width]  # at most width - 1 characters are kept, then "…"
    cut = head.rfind(" ", 0, width)
    if cut <= 0:
        end = text.find(" ")
        return (text if end < 0 else text[:end].rstrip(",;:")) + ("…" if end >= 0 else "")
    head = text[:cut].rstrip(" ,;:")
    return head + "…" if head else text[:text.find(" ")] + "…"
