"""`emit -o` and `report -o`: the unit tests that need the base layer.

Split by layer from the tests of the same subject in tests/acceptance/test_outputs.py;
tests/acceptance/test_outputs.py says what they check.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from kvplan.base.outputs import MAX_NAME, OutputError, file_name, folder_name, replaced_file, write_file

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


# ------------------------------------------------------------------ one file, replaced in one rename

def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    target.write_bytes(b"old\n")
    with pytest.raises(RuntimeError):
        with replaced_file(str(target)) as fh:
            fh.write(b"half of the new")
            raise RuntimeError("the sweep failed")
    assert target.read_bytes() == b"old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_a_write_is_a_new_file_renamed_onto_the_name(tmp_path: Path) -> None:
    """A reader that opened the old file keeps reading the old bytes: the name now points at a new file."""
    target = tmp_path / "out.csv"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o600)
    with open(target, "rb") as reader:
        inode = os.fstat(reader.fileno()).st_ino
        assert write_file(str(target), "new\n") == str(target)
        assert reader.read() == b"old\n"
    assert target.read_bytes() == b"new\n" and target.stat().st_ino != inode
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # the replaced file's permissions are kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_an_executable_is_written_with_its_mode(tmp_path: Path) -> None:
    write_file(str(tmp_path / "run.sh"), "#!/bin/sh\n", executable=True)
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o755


@pytest.mark.parametrize("make,words", [
    (lambda p, v: p.symlink_to(v), "is a symbolic link"),
    (lambda p, v: p.symlink_to(p.parent / "missing"), "is a symbolic link"),  # a dangling link: no file made there
    (lambda p, v: os.link(v, p), "is a hard link to another file (2 names)"),
    (lambda p, v: os.mkfifo(p), "is a named pipe (FIFO), not a regular file"),
    (lambda p, v: p.mkdir(), "is a directory, not a regular file"),
])
def test_what_is_not_a_regular_file_of_one_name_is_refused(tmp_path: Path, make: Any, words: str) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep\n")
    target = tmp_path / "out"
    make(target, victim)
    with pytest.raises(OutputError, match=re.escape(words)):
        write_file(str(target), "new\n")
    assert victim.read_bytes() == b"keep\n" and not (tmp_path / "missing").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".kvplan-tmp")]


def test_a_path_without_a_file_name_or_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="names no file"):
        write_file("", "x")
    with pytest.raises(OutputError, match="names a directory"):
        write_file(str(tmp_path) + os.sep, "x")
    with pytest.raises(OutputError, match="does not exist"):
        write_file(str(tmp_path / "no" / "out.csv"), "x")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into any folder")
def test_a_read_only_folder_is_one_clear_error_and_the_file_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "ro" / "out.csv"
    target.parent.mkdir()
    target.write_bytes(b"old\n")
    os.chmod(target.parent, 0o555)
    try:
        with pytest.raises(OutputError, match="its folder is not writable"):
            write_file(str(target), "new\n")
    finally:
        os.chmod(target.parent, 0o755)
    assert target.read_bytes() == b"old\n"
