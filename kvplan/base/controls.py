"""Characters that change how text reads without being seen, and text written so that none of them gets through.

A spec's strings and a spec's path end up in the files kvplan emits. A line break in a name ends a comment line
and starts a command (`x<LF>touch PWNED<LF>#.kvp`), a carriage return or U+2028 ends a line for Python and YAML,
and a bidirectional override shows code in an order other than the one it runs in ("Trojan Source",
CVE-2021-42574). The language refuses these characters in every string (KV019); the writers escape them in
every value they place in a file, since the spec's path is not the language's to check.

    CONTROL          the characters, as a regular expression character class
    first(text)      the index of the first one in `text`, or None; count(text) how many
    describe(ch)     `U+000D (carriage return)`: a character named without printing it
    escaped(text)    `text` with each one written as a \\u escape (JSON, Python and YAML read it back)
    visible(text)    `text` with each one shown as a visible character in its place (a lint snippet)
    literal(text)    `text` where it is plain, else a JSON string literal of it (one line, ASCII)
    dumps(obj)       json.dumps with non-ASCII text as it is, but none of these characters
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Optional

#: C0 controls (NUL..US: TAB, LF, CR among them), DEL, the C1 controls (NEL among them), the Arabic letter mark,
#: the left-to-right and right-to-left marks, the line and paragraph separators, and the bidirectional embeddings,
#: overrides and isolates, and the noncharacters U+FFFE and U+FFFF (YAML's and XML's streams refuse them: PyYAML
#: will not load a file that holds one, even in a comment).
CONTROL = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufffe\uffff]"

_CONTROL = re.compile(CONTROL)
#: The ones json.dumps leaves as they are (it escapes those below U+0020 itself).
_BEYOND_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufffe\uffff]")

#: Names of the C0 and C1 controls, which unicodedata does not name.
_NAMES = {0: "NUL", 9: "tab", 10: "line feed", 11: "vertical tab", 12: "form feed", 13: "carriage return",
          27: "escape", 0x7F: "delete", 0x85: "next line", 0xFFFE: "noncharacter", 0xFFFF: "noncharacter"}


def first(text: str) -> Optional[int]:
    """The index of the first control or bidirectional-formatting character in `text`, or None."""
    m = _CONTROL.search(text)
    return None if m is None else m.start()


def count(text: str) -> int:
    """How many control or bidirectional-formatting characters `text` holds."""
    return len(_CONTROL.findall(text))


def describe(ch: str) -> str:
    """`U+000D (carriage return)`: the character's code point and name, never the character itself."""
    n = ord(ch)
    name = _NAMES.get(n) or unicodedata.name(ch, "").lower() or ("C0 control" if n < 0x20 else "C1 control")
    return f"U+{n:04X} ({name})"


def _u(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def escaped(text: str) -> str:
    """`text` with each control or bidirectional-formatting character written as `\\uXXXX`."""
    return _CONTROL.sub(_u, text)


def _picture(m: re.Match[str]) -> str:
    n = ord(m.group())
    if n == 0x09:
        return "\t"
    return chr(0x2400 + n) if n < 0x20 else "\u2421" if n == 0x7F else "\ufffd"


def visible(text: str) -> str:
    """`text` as a terminal may show it, one character for one: a C0 control as its Unicode control picture
    (U+240D for a carriage return), DEL as U+2421, the others as U+FFFD; tabs as they are."""
    return _CONTROL.sub(_picture, text)


def plain(text: str) -> bool:
    """Text a file may hold as it is: printable, no leading quote (a quote opens a literal), no ` · ` (the
    header's separator), no space at either end."""
    return (text.isprintable() and not text.startswith('"') and " · " not in text and text == text.strip()
            and first(text) is None)


def literal(text: str) -> str:
    """`text` where it is plain, else a JSON string literal of it: one line of ASCII, read back with json.loads."""
    return text if plain(text) else json.dumps(text, ensure_ascii=True)


def dumps(obj: object, indent: Optional[int] = None, allow_nan: bool = True, ascii: bool = False) -> str:
    """json.dumps(obj, ensure_ascii=ascii, ...) with the characters it would leave in a string escaped (DEL, C1,
    the marks, separators and bidirectional formatting): JSON and Python read the result as the same value, and
    no line of it is broken or reordered by what a string held. A string alone is a TOML basic string too (TOML
    refuses DEL in one, which json.dumps leaves as it is)."""
    text = json.dumps(obj, ensure_ascii=ascii, indent=indent, allow_nan=allow_nan)
    return _BEYOND_JSON.sub(_u, text)
