"""The one YAML writer of the emit targets (trtllm.yaml, lmcache.yaml, k8s-<engine>.yaml): small, deterministic,
no PyYAML at run time (PyYAML is a test dependency only; the tests read every file back with it).

It writes mappings, sequences, scalars and literal blocks. A scalar reads back as the same value under YAML 1.1
(Kubernetes' and LMCache's parsers) and 1.2: a word is plain only where it cannot be taken for anything but a
string, anything else is double-quoted with YAML's escapes, so that no text a spec holds ends a line or becomes
structure.
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

from kvplan.base import controls
from kvplan.engines.common import comment_lines


class Block(str):
    """A string written as a YAML literal block (`|`): a file's text in a ConfigMap."""


#: What a YAML literal block (`|`) may hold: printable characters, tabs and newlines, none that YAML 1.1 reads
#: as a line break (U+2028, U+2029, U+0085), no bidirectional formatting and no byte-order mark.
BLOCK_SAFE = re.compile(r"[\t\n\x20-\x7e\xa0-\u061b\u061d-\u200d\u2010-\u2027\u202f-\u2065\u206a-\ud7ff"
                        r"\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]*")

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./:-]*")
#: Plain words YAML 1.1 reads as something other than a string.
_RESERVED = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"})


def quoted(s: str) -> str:
    """A YAML double-quoted scalar of `s`: printable characters as they are, the rest escaped."""
    return '"' + "".join(_char(ch) for ch in s) + '"'


def _char(ch: str) -> str:
    """One character inside a YAML double-quoted scalar (\\x, \\u, \\U: YAML has no surrogate pairs, so a
    character above U+FFFF is never two \\u escapes)."""
    if ch in '"\\':
        return "\\" + ch
    if ch != "\t" and ch != "\n" and BLOCK_SAFE.fullmatch(ch):
        return ch
    n = ord(ch)
    return f"\\x{n:02x}" if n <= 0xFF else f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def scalar(v: object) -> str:
    """A YAML scalar of a bool, None, a number or a string (plain only for a word that can be nothing else)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float(v)
    s = str(v)
    if _PLAIN.fullmatch(s) and s.lower() not in _RESERVED and not s.endswith(":"):
        return s
    return quoted(s)


def _float(v: float) -> str:
    """A finite float as YAML 1.1 reads a float: its repr, with a point in the mantissa (YAML 1.1 reads `1e-05`,
    which repr writes below 1e-4, as a string; `1.0e-05` is a float in 1.1 and 1.2)."""
    if not math.isfinite(v):
        raise ValueError(f"the YAML writer takes finite numbers, not {v!r}")
    mantissa, e, exponent = repr(v).partition("e")
    return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else repr(v)


def _block_ok(text: str) -> bool:
    return (text.endswith("\n") and not text.endswith("\n\n") and not text.startswith((" ", "\n"))
            and bool(BLOCK_SAFE.fullmatch(text)))


def _mapping(obj: Mapping[str, object], indent: int, notes: Mapping[str, str], path: str) -> list[str]:
    """`obj` at `indent`; `notes` puts a trailing comment on a key by its dotted path from the document's top."""
    pad = " " * indent
    lines: list[str] = []
    for key, v in obj.items():
        k, where = scalar(key), f"{path}{key}"
        note = f"  # {controls.escaped(notes[where])}" if where in notes else ""
        if isinstance(v, Block) and _block_ok(v):
            lines.append(f"{pad}{k}: |{note}")
            lines += [f"{pad}  {line}" if line else "" for line in v[:-1].split("\n")]
        elif isinstance(v, Mapping):
            lines += [f"{pad}{k}:{note}", *_mapping(v, indent + 2, notes, where + ".")] if v else [
                f"{pad}{k}: {{}}{note}"]
        elif isinstance(v, (list, tuple)):
            lines += [f"{pad}{k}:{note}", *_sequence(v, indent)] if v else [f"{pad}{k}: []{note}"]
        else:
            lines.append(f"{pad}{k}: {scalar(v)}{note}")
    return lines


def _sequence(items: Sequence[object], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for item in items:
        if isinstance(item, Mapping) and item:
            sub = _mapping(item, indent + 2, {}, "")
            lines += [f"{pad}- {sub[0][indent + 2:]}", *sub[1:]]
        elif isinstance(item, (Mapping, list, tuple)):
            raise TypeError("the YAML writer takes no empty mappings or nested lists in a list")
        else:
            lines.append(f"{pad}- {scalar(item)}")
    return lines


def text(head: Sequence[str], body: Mapping[str, object], notes: Mapping[str, str] = {}) -> str:
    """One document: comment lines, then `body`; `notes` puts a trailing comment on a key
    ("kv_cache_config.max_tokens")."""
    return "\n".join([*comment_lines(head), *_mapping(body, 0, notes, "")]) + "\n"


def documents(head: Sequence[str], docs: Sequence[Mapping[str, object]]) -> str:
    """Comment lines, then each document after a `---` line."""
    lines = comment_lines(head)
    for doc in docs:
        lines += ["---", *_mapping(doc, 0, {}, "")]
    return "\n".join(lines) + "\n"
