"""`emit -o` and `report -o`: the unit tests that need the base layer.

Split by layer from the tests of the same subject in tests/acceptance/test_outputs.py;
tests/acceptance/test_outputs.py says what they check.
"""

from __future__ import annotations

import re

from kvplan.base.outputs import MAX_NAME, file_name, folder_name

# ------------------------------------------------------------------ names

def test_folder_names_keep_the_old_ascii_names() -> None:
    """What main wrote for ASCII names (lower case, runs of other characters → '-') is unchanged."""
    old = lambda t: re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-") or "plan"  # noqa: E731
    for name in ("w2-batch32", "Chat 70B", "a_b", "!!!", "chat-70b/batch=32,context=128k", "  x  ", "--a--"):
        assert folder_name(name) == old(name), name


def test_file_names_keep_their_suffix_when_shortened() -> None:
    long = "regime-map-" + "m" * 300 + ".svg"
    short = file_name(long)
    assert short.endswith(".svg") and len(short) <= MAX_NAME and short == file_name(long)
    assert file_name("09-re-evaluation.md") == "09-re-evaluation.md"
