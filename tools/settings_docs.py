"""Write the key tables of docs/language.md and docs/engines.md from the settings table.

    python tools/settings_docs.py           rewrite both pages between their markers (after editing a row of
                                            kvplan/catalog/settings.py)

Each page holds its table between `<!-- BEGIN settings.NAME() -->` and `<!-- END settings.NAME() -->`;
tests/unit/catalog/test_settings.py fails while a page's copy differs from what the table generates.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvplan.catalog import settings  # noqa: E402  (the checkout's kvplan, not an installed one)

PAGES = {"language.md": settings.language_table, "engines.md": settings.engines_table}


def rewritten(text: str, name: str, table: str) -> str:
    """`text` with the block between the markers of `name` replaced by `table`."""
    marks = re.compile(rf"(<!-- BEGIN settings\.{name}\(\) -->\n).*?(<!-- END settings\.{name}\(\) -->)", re.S)
    if not marks.search(text):
        raise SystemExit(f"no <!-- BEGIN settings.{name}() --> ... <!-- END ... --> markers")
    return marks.sub(lambda m: m.group(1) + table + m.group(2), text)


def main() -> None:
    for page, make in PAGES.items():
        path = ROOT / "docs" / page
        text = path.read_text(encoding="utf-8")
        new = rewritten(text, make.__name__, make())
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"wrote docs/{page}")


if __name__ == "__main__":
    main()
