"""Build the .kvp parser's tables from kvplan/grammar/kvp.lark into kvplan/grammar/kvp_parser.json.

    python tools/build_parser.py            write the file
    python tools/build_parser.py --check    exit 1 if the shipped file is not what this would write

kvplan loads the LALR tables from the JSON file at start-up instead of analysing
the grammar (about 250 ms) or keeping lark's pickle cache in the temporary
directory (a file another user can plant: unpickling it runs their code). JSON
loads no code. The file holds lark's own serialized form (Lark.memo_serialize,
what lark's standalone generator embeds and `Lark._load_from_dict` reads), made
independent of the run that wrote it:

* parser states are renumbered breadth-first from the start state, following
  actions in token-name order, and tokens are numbered by name (lark numbers
  both in set-iteration order, which varies with PYTHONHASHSEED);
* only the options kvplan passes are kept (each lark release adds options the
  older ones refuse);
* an unbounded regular-expression width is written as 2**64, what Python 3.11+
  reports (3.10 reports 2**32 - 1; lark uses the width only to order terminals);
* JSON has only string keys: a mapping whose keys are all decimal digits is an
  int-keyed mapping of lark's (states, tokens, the memo), and the loader turns
  its keys back into ints.

`grammar_sha256` is the hash of the grammar text the tables were built from:
kvplan checks it at load and builds from the grammar if the two differ, and
tests/unit/lang/test_security.py checks that the shipped file is exactly what this script
writes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GRAMMAR = ROOT / "kvplan" / "grammar" / "kvp.lark"
OUTPUT = ROOT / "kvplan" / "grammar" / "kvp_parser.json"

#: The options kvplan builds its parser with (kvplan/lang/syntax.py passes the same).
OPTIONS: dict[str, Any] = {"parser": "lalr", "lexer": "contextual", "propagate_positions": True}
FORMAT = 1


def _plain(value: Any) -> Any:
    """Tuples as lists (what JSON gives back), recursively."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _canonical_table(table: dict[str, Any]) -> dict[str, Any]:
    """lark's serialized ParseTable with tokens and states numbered independently of hash order."""
    old_tokens: dict[int, str] = table["tokens"]
    names = sorted(old_tokens.values())
    token_index = {name: i for i, name in enumerate(names)}
    states: dict[int, dict[int, Any]] = table["states"]

    def by_name(actions: dict[int, Any]) -> list[tuple[str, Any]]:
        return sorted(((old_tokens[t], a) for t, a in actions.items()), key=lambda item: item[0])

    order: list[int] = []
    seen: set[int] = set()
    roots = [table["start_states"][s] for s in sorted(table["start_states"])]
    queue = deque(roots)
    seen.update(roots)
    while queue:
        s = queue.popleft()
        order.append(s)
        for _, (kind, arg) in by_name(states[s]):
            if kind == 0 and arg not in seen:  # a shift: arg is the next state
                seen.add(arg)
                queue.append(arg)
    for name in sorted(table["end_states"]):
        end = table["end_states"][name]
        if end not in seen:
            seen.add(end)
            order.append(end)
    if len(order) != len(states):
        raise SystemExit(f"build_parser: {len(states) - len(order)} parser states are unreachable")
    renumber = {old: new for new, old in enumerate(order)}
    new_states = {}
    for old in order:
        actions = {}
        for name, (kind, arg) in by_name(states[old]):
            actions[token_index[name]] = (kind, renumber[arg] if kind == 0 else arg)
        new_states[renumber[old]] = actions
    return {
        "tokens": {i: name for i, name in enumerate(names)},
        "states": new_states,
        "start_states": {k: renumber[v] for k, v in sorted(table["start_states"].items())},
        "end_states": {k: renumber[v] for k, v in sorted(table["end_states"].items())},
    }


#: sre's MAXREPEAT, "no upper bound", on Python 3.10 and on 3.11+.
_UNBOUNDED_310, UNBOUNDED = 2**32 - 1, 2**64


def _canonical_widths(memo: dict[int, Any]) -> None:
    """Each terminal's (min, max) pattern width with an unbounded max written one way."""
    for entry in memo.values():
        pattern = entry.get("pattern") if isinstance(entry, dict) else None
        width = pattern.get("_width") if isinstance(pattern, dict) else None
        if width is not None and width[1] >= _UNBOUNDED_310:
            pattern["_width"] = [width[0], UNBOUNDED]


def _int_keys(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    """The loader's object hook, mirrored here to check the round trip."""
    if pairs and all(k.isdigit() for k, _ in pairs):
        return {int(k): v for k, v in pairs}
    return dict(pairs)


def build(grammar: str) -> str:
    """The JSON text for this grammar."""
    from lark import Lark
    from lark.grammar import Rule
    from lark.lexer import TerminalDef

    parser = Lark(grammar, **OPTIONS)
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    data["options"] = dict(OPTIONS)
    data["parser"]["parser"] = _canonical_table(data["parser"]["parser"])
    _canonical_widths(memo)
    payload = {
        "format": FORMAT,
        "grammar_sha256": hashlib.sha256(grammar.encode("utf-8")).hexdigest(),
        "data": data,
        "memo": memo,
    }
    text = json.dumps(payload, indent=None, separators=(",", ":"), sort_keys=True, ensure_ascii=True) + "\n"
    if json.loads(text, object_pairs_hook=_int_keys) != _plain(payload):
        raise SystemExit("build_parser: the tables do not survive a JSON round trip")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped file; write nothing")
    args = ap.parse_args(argv)
    text = build(GRAMMAR.read_text(encoding="utf-8"))
    if args.check:
        shipped = OUTPUT.read_text(encoding="utf-8") if OUTPUT.is_file() else ""
        if shipped != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run python tools/build_parser.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({len(text):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
