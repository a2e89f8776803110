"""kvplan.base.files' path text helpers give what pathlib.PurePosixPath gives (advise runs without pathlib)."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from kvplan.base import files

CASES = ["", ".", "./", "./.", "a", "a/", "a//b", "./a/./b/", "a/.", "/", "//", "///", "//a", "///a/b",
         "/a/b.json", "../x.json", "..", "a/..", "a/b/..", ".hidden", "x.", "...", "a.b.c", "dir/config.json",
         "config.json", "/config.json", "models/llama/config.json", "//srv/share/m.json"]


@pytest.mark.parametrize("path", CASES)
def test_path_text_as_pathlib_writes_it(path: str) -> None:
    p = PurePosixPath(path)
    assert files.pure_path(path) == str(p)
    assert files.name(path) == p.name
    assert files.stem(path) == p.stem
    assert files.parent(path) == str(p.parent)
