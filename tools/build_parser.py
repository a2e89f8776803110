"""Write kvplan/grammar/kvp_parser.py, the .kvp parser, with lark's standalone generator.

    python tools/build_parser.py            write the file (after editing kvplan/grammar/kvp.lark)

The module is what `python -m lark.tools.standalone` writes for the grammar with the options
kvplan parses with (LALR, the contextual lexer, propagated positions): lark's own runtime and
the parser's tables as Python literals, so kvplan loads no pickle and no cache, and does not
analyse the grammar at start-up (~250 ms). One line is put before lark's output: its
`Transformer_NonRecursive`, which kvplan uses, calls `typing.cast`, which the generator's
import list lacks (lark 1.1 to 1.3.1).

lark numbers the parser's states in set-iteration order, so two runs write different tables
for the same grammar: run this only when the grammar changes. tests/unit/lang/test_security.py
checks that the module's rules and terminals are the grammar's, and that it parses like a
parser built from the grammar.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRAMMAR = ROOT / "kvplan" / "grammar" / "kvp.lark"
OUTPUT = ROOT / "kvplan" / "grammar" / "kvp_parser.py"

#: The generator's command line, less the grammar: the options kvplan parses with.
GENERATOR = [sys.executable, "-m", "lark.tools.standalone", "--lexer", "contextual", "--propagate_positions"]

#: What goes before lark's output (see the module's docstring).
PREAMBLE = ("# kvplan: written by tools/build_parser.py from kvp.lark with lark's standalone generator; do not edit.\n"
            "# The generator's imports lack typing.cast, which Transformer_NonRecursive calls (lark 1.1-1.3.1).\n"
            "from typing import cast\n")


def main() -> int:
    done = subprocess.run([*GENERATOR, str(GRAMMAR)], capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0:
        print(f"build_parser: lark's standalone generator failed:\n{done.stderr}", file=sys.stderr)
        return 2
    OUTPUT.write_text(PREAMBLE + done.stdout, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
