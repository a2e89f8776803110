"""Reading an input file a user (or a pull request) hands kvplan: one way, bounded, located.

Every file kvplan reads as input goes through `read_bytes` / `read_text`: a spec,
`--model-config`, a spec's `config = "..."`, an imported command line or
TensorRT-LLM YAML (and the YAML its `--config` names), `lint --config` and the
pyproject.toml lint finds. They

* read regular files only: a FIFO, a device (/dev/zero), a socket or a directory
  is refused, also behind a symlink, and opening never blocks (O_NONBLOCK; the
  type is checked on the opened descriptor, so a swap after the check cannot
  slip one in);
* read at most `limit` bytes: a larger file is refused without reading it all;
* decode UTF-8 with the line and column of the first bad byte.

`blank` tells an empty or comments-only file, which callers refuse with a message
of their own (what the file should hold).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Optional, Sequence

from kvplan.base.errors import KvplanError, Span

#: The most bytes kvplan reads from a config.json, YAML, TOML or command-line file. A Hugging Face
#: config.json has a few kB (one with a 1,000-label id2label map, ~50 kB); a spec has its own limit
#: in characters (kvplan.lang.MAX_FILE_CHARS), checked on top of this one.
MAX_INPUT_BYTES = 1024 * 1024


class InputFileError(KvplanError):
    """An input file that is not a readable regular UTF-8 file of bounded size, or holds nothing.

    `reason` is "type" (not a regular file), "link" (a symbolic link where none is followed), "size", "utf8" or
    "blank".
    """

    def __init__(self, message: str, *, reason: str, span: Span, help: Optional[str] = None) -> None:
        super().__init__(message, help=help, span=span)
        self.reason = reason


def file_kind(mode: int) -> str:
    """What a file of `mode` (st_mode) is, for a message: "a named pipe (FIFO)", "a directory", ..."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def start(path: str) -> Span:
    """The first character of `path`, where a message about the whole file points."""
    return Span(path, 1, 1, 1, 1)


def read_bytes(path: str, *, limit: int = MAX_INPUT_BYTES, what: str = "the file", follow_links: bool = True) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; InputFileError otherwise.

    `what` names the file in messages ("the model config"); the error's span names its path.
    Without `follow_links`, a symbolic link is refused too (reason "link"), not read through.
    OSError (no such file, no permission) is left to the caller, which knows how to name it.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    if not follow_links:
        if os.path.islink(path):  # also where O_NOFOLLOW is missing; the flag closes the race on the rest
            raise _a_link(path, what)
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise InputFileError(f"{what} is a directory; kvplan reads only regular files", reason="type",
                             span=start(path), help="give the path of a file in it") from None
    except OSError as exc:
        if not follow_links and exc.errno == errno.ELOOP:
            raise _a_link(path, what) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(f"{what} is {file_kind(info.st_mode)}; kvplan reads only regular files",
                                 reason="type", span=start(path), help="give the path of a regular file")
        if info.st_size > limit:
            raise _too_large(path, what, limit)
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while we read
        raise _too_large(path, what, limit)
    return data


def _a_link(path: str, what: str) -> InputFileError:
    return InputFileError(f"{what} is a symbolic link; kvplan does not read through links here", reason="link",
                          span=start(path), help="put the file itself there")


def _too_large(path: str, what: str, limit: int) -> InputFileError:
    return InputFileError(f"{what} has more than {limit:,} bytes, the most kvplan reads", reason="size",
                          span=start(path), help="is it the right file?")


def decode(data: bytes, path: str, *, what: str = "the file") -> str:
    """UTF-8 text; a byte that is not UTF-8 is an InputFileError at its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = location(data, exc.start)
        raise InputFileError(f"byte 0x{data[exc.start]:02x} is not UTF-8 text", reason="utf8",
                             span=Span(path, line, col, line, col + 1), help="save the file as UTF-8") from None


def location(data: bytes, offset: int) -> tuple[int, int]:
    """Line and column (from 1, columns in characters) of byte `offset` of UTF-8 `data`."""
    good = data[:offset].decode("utf-8", errors="replace")
    line = good.count("\n") + 1
    return line, len(good) - (good.rfind("\n") + 1) + 1


def read_text(path: str, *, limit: int = MAX_INPUT_BYTES, what: str = "the file") -> str:
    """`read_bytes` then `decode`."""
    return decode(read_bytes(path, limit=limit, what=what), path, what=what)


def blank(text: str, comment: Optional[str] = "#") -> Optional[str]:
    """'empty' for a file of nothing but white space, 'comments only' for one of comments and white
    space (lines starting with `comment`), else None."""
    lines = [ln.strip(_SPACE) for ln in text.split("\n")]
    if not any(lines):
        return "empty"
    if comment is not None and all(not ln or ln.startswith(comment) for ln in lines):
        return "comments only"
    return None


_SPACE = " \t\r\f\v\ufeff"


def refuse_blank(text: str, path: str, *, holds: str, what: str = "the file", comment: Optional[str] = "#") -> None:
    """InputFileError at the file's start when it is empty or holds only comments; `holds` says what it should."""
    kind = blank(text, comment)
    if kind is not None:
        said = "is empty" if kind == "empty" else "holds only comments"
        raise InputFileError(f"{what} {said}", reason="blank", span=start(path), help=f"it should hold {holds}")


def within(path: str, roots: Sequence[str]) -> bool:
    """Whether `path`, symlinks resolved, lies in one of the folders `roots` (or below it)."""
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        try:
            if os.path.commonpath([real, top]) == top:
                return True
        except ValueError:  # another drive (Windows)
            continue
    return False


__all__ = ["InputFileError", "MAX_INPUT_BYTES", "blank", "decode", "file_kind", "location", "read_bytes",
           "read_text", "refuse_blank", "start", "within"]


# ------------------------------------------------------------------ path text without pathlib
# pathlib (with the urllib.parse and ipaddress it imports) costs kvplan's cold start ~3 ms
# (bench/bench_coldstart.py); the commands on that path need only these few operations, each
# giving the text `pathlib.PurePosixPath` gives, so a message that prints a path is unchanged.


def pure_path(path: str | os.PathLike[str]) -> str:
    """`str(PurePosixPath(path))`: empty and `.` segments dropped, no trailing slash, `//` kept as
    a root only when exactly two slashes lead, `.` for an empty path."""
    text = os.fspath(path)
    root = ""
    if text.startswith("/"):
        root = "//" if text.startswith("//") and not text.startswith("///") else "/"
    return root + "/".join(p for p in text.split("/") if p and p != ".") or "."


def _parts(path: str) -> list[str]:
    return [p for p in pure_path(path).split("/") if p]


def name(path: str) -> str:
    """`PurePosixPath(path).name`: the last segment, "" for a root or `.`."""
    parts = _parts(path)
    return parts[-1] if parts and pure_path(path) != "." else ""


def stem(path: str) -> str:
    """`PurePosixPath(path).stem`: the name without its last suffix (a leading dot is no suffix)."""
    last = name(path)
    dot = last.rfind(".")
    return last[:dot] if 0 < dot < len(last) - 1 else last


def parent(path: str) -> str:
    """`str(PurePosixPath(path).parent)`: the path without its last segment (a root or `.` is its own)."""
    pure = pure_path(path)
    root = "//" if pure.startswith("//") else "/" if pure.startswith("/") else ""
    parts = _parts(pure)
    if not parts or pure == ".":
        return pure
    return root + "/".join(parts[:-1]) or "."
