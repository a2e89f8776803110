"""Writing `emit -o DIR` and `report -o DIR`: one folder per scenario, nothing written through a link.

- Folder names come from scenario names: NFKC-normalized, case-folded, every run of characters
  that is not a letter, digit or mark becomes one `-` (`Chat 70B` → `chat-70b`; letters of any
  script are kept, `Чат` → `чат`). Two scenarios whose names give the same folder (`Chat` and
  `chat`) are refused before anything is written, naming both: on a case-insensitive file system
  they are the same folder whatever kvplan does, and the second would overwrite the first.
- A name too long for one path component (more than `MAX_NAME` characters, or 255 bytes in UTF-8)
  is shortened deterministically: its first characters, `-`, and 10 hex digits of the SHA-256 of
  the whole name, so the same name always gives the same folder and two long names that share a
  beginning stay apart.
- Nothing is written through a symbolic link: the output directory and every folder and file under
  it are opened relative to their parent with O_NOFOLLOW, so a link planted in the output tree
  (`out/chat -> /etc`, `out/chat/vllm.sh -> ~/.bashrc`) is refused with one line instead of
  followed. A file is written only over a regular file with a single link (not a FIFO, a device
  or a hard link to a file elsewhere).
- An empty output path is refused (`-o ""` would write into the working directory).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import unicodedata
from typing import Mapping, Optional, Protocol, Sequence

from kvplan.base.errors import KvplanError, Span

#: Longest folder or file name kvplan writes, in characters (file systems allow 255 bytes).
MAX_NAME = 96
_NAME_BYTES = 255
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIR_FD = os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd and bool(_NOFOLLOW)


class OutputError(KvplanError):
    """An output path kvplan will not write to."""


def _fit(name: str, whole: str, room: int = 0) -> str:
    """`name` if it fits one path component with `room` characters to spare, else its start, '-'
    and a hash of `whole`."""
    chars, size = MAX_NAME - room, _NAME_BYTES - room
    if len(name) <= chars and len(name.encode("utf-8")) <= size:
        return name
    digest = hashlib.sha256(whole.encode("utf-8")).hexdigest()[:10]
    head = name[:chars - len(digest) - 1]
    while len(head.encode("utf-8")) > size - len(digest) - 1:
        head = head[:-1]
    return f"{head.rstrip('-')}-{digest}"


def folder_name(name: str) -> str:
    """The folder a scenario's files go in (see the module docstring); never empty."""
    text = unicodedata.normalize("NFKC", name).casefold()
    kept = "".join(c if unicodedata.category(c)[0] in "LNM" else "-" for c in text)
    slug = "-".join(part for part in kept.split("-") if part) or "plan"
    return _fit(slug, name)


def file_name(name: str) -> str:
    """A file name kvplan made (`09-re-evaluation.md`), shortened like a folder if it is too long;
    the suffix is kept."""
    stem, dot, suffix = name.rpartition(".")
    if not dot or len(suffix) > 8:
        return _fit(name, name)
    return f"{_fit(stem, name, len(suffix) + 1)}.{suffix}"


def folder_names(names: Sequence[tuple[str, Optional[Span]]], out_dir: str) -> dict[str, str]:
    """Scenario name → folder, refusing two scenarios that would share a folder."""
    taken: dict[str, str] = {}
    out: dict[str, str] = {}
    for name, span in names:
        folder = folder_name(name)
        other = taken.get(folder)
        if other is not None and other != name:
            raise OutputError(
                f"deployments {other!r} and {name!r} would both write {os.path.join(out_dir, folder)}/ "
                "(folder names are case-folded and Unicode-normalized, punctuation becomes '-')",
                help="rename one of them", span=span)
        taken[folder] = name
        out[name] = folder
    return out


class _Named(Protocol):
    """What the folders are named from: a scenario's name and the span of its deployment."""

    @property
    def name(self) -> str: ...

    @property
    def spans(self) -> Mapping[str, Span]: ...


class _HasScenario(Protocol):
    """A plan, as far as folder naming needs it (the planner's Plan is a layer above)."""

    @property
    def scenario(self) -> _Named: ...


def scenario_folders(plans: Sequence[_HasScenario], out_dir: Optional[str]) -> dict[str, str]:
    """Each plan's scenario name → its folder under `out_dir`; with `out_dir` (files will be
    written) two scenarios sharing a folder are refused, and an empty `out_dir` is."""
    if out_dir is None:
        return {p.scenario.name: folder_name(p.scenario.name) for p in plans}
    check_out_dir(out_dir)
    return folder_names([(p.scenario.name, p.scenario.spans.get("deployment")) for p in plans], out_dir)


def check_out_dir(out_dir: str, option: str = "-o") -> None:
    if not out_dir.strip():
        raise OutputError(f"{option} names no directory (an empty path would write into the current one)",
                          help=f"give a directory, e.g. `{option} out`, or `{option} .` for this one")


def _refuse_link(path: str) -> OutputError:
    return OutputError(f"{path} is a symbolic link; kvplan does not write through links",
                       help="remove it, or give -o a directory without links in it")


def _open_dir(path: str, parent: Optional[int], name: str) -> int:
    """Open (creating it if missing) the directory `name` in `parent` (a dir fd, None: the CWD)."""
    kw = {} if parent is None else {"dir_fd": parent}
    try:
        os.mkdir(name, 0o777, **kw)
    except FileExistsError:
        pass
    try:
        return os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, **kw)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) or (exc.errno == errno.ENOTDIR and _is_link(name, parent)):
            raise _refuse_link(path) from None
        if exc.errno == errno.ENOTDIR:
            raise OutputError(f"{path} is not a directory", help="remove it or give -o another directory") from None
        raise


def _is_link(name: str, parent: Optional[int]) -> bool:
    try:
        st = os.lstat(name, dir_fd=parent) if parent is not None else os.lstat(name)
    except OSError:
        return False
    return stat.S_ISLNK(st.st_mode)


class OutputTree:
    """The files of one `-o DIR`: `write(("chat", "vllm.sh"), text)` writes DIR/chat/vllm.sh.

    Each write opens DIR and the folders below it one at a time, each relative to the one above
    and without following a link, and closes them again."""

    def __init__(self, out_dir: str, option: str = "-o") -> None:
        check_out_dir(out_dir, option)
        self.root = out_dir

    def _open_dirs(self, dirs: Sequence[str]) -> list[int]:
        """File descriptors of DIR, DIR/dirs[0], ... (created where missing); the caller closes them."""
        root = os.path.normpath(self.root)
        parent = os.path.dirname(root)
        if parent:
            os.makedirs(parent, exist_ok=True)  # above the output directory: the user's own path
        if _is_link(root, None):
            raise _refuse_link(root)
        fds = [_open_dir(root, None, root)]
        try:
            for i, part in enumerate(dirs):
                fds.append(_open_dir(self.path(*dirs[:i + 1]), fds[-1], part))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def path(self, *parts: str) -> str:
        return os.path.normpath(os.path.join(self.root, *parts))

    def write(self, parts: Sequence[str], data: str | bytes, *, executable: bool = False) -> str:
        """Write `data` (text as UTF-8, newlines as given) at DIR/parts...; return the path written."""
        *dirs, name = parts
        for p in parts:
            if not p or p in (".", "..") or "/" in p or os.sep in p:
                raise OutputError(f"{p!r} is not a file or folder name kvplan writes")  # a kvplan bug
        shown = self.path(*parts)
        if not _DIR_FD:  # no dir_fd / O_NOFOLLOW on this platform: check each component, then write
            return self._write_checked(shown, tuple(dirs), name, data, executable)
        fds = self._open_dirs(dirs)
        try:
            fd = self._open_file(shown, name, fds[-1], 0o777 if executable else 0o666)
        finally:
            for dfd in fds:
                os.close(dfd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OutputError(f"{shown} exists and is not a regular file", help="remove it")
            if st.st_nlink > 1:
                raise OutputError(f"{shown} is a hard link to another file; kvplan does not write through links",
                                  help="remove it")
            os.ftruncate(fd, 0)
            blob = data.encode("utf-8") if isinstance(data, str) else data
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view):]
            if executable and hasattr(os, "fchmod"):
                os.fchmod(fd, 0o755)
        finally:
            os.close(fd)
        return shown

    @staticmethod
    def _open_file(shown: str, name: str, dfd: int, mode: int) -> int:
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK, mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK) or _is_link(name, dfd):
                raise _refuse_link(shown) from None
            if exc.errno in (errno.ENXIO, errno.EISDIR):
                raise OutputError(f"{shown} exists and is not a regular file", help="remove it") from None
            raise

    def _write_checked(self, shown: str, dirs: tuple[str, ...], name: str, data: str | bytes,
                       executable: bool) -> str:  # pragma: no cover - platforms without O_NOFOLLOW
        path = os.path.normpath(self.root)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        for part in ("", *dirs):
            path = os.path.join(path, part) if part else path
            if os.path.islink(path):
                raise _refuse_link(path)
            os.makedirs(path, exist_ok=True)
        target = os.path.join(path, name)
        if os.path.islink(target):
            raise _refuse_link(target)
        if os.path.exists(target) and not os.path.isfile(target):
            raise OutputError(f"{shown} exists and is not a regular file", help="remove it")
        with open(target, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        if executable:
            os.chmod(target, 0o755)
        return shown


__all__ = ["MAX_NAME", "OutputError", "OutputTree", "check_out_dir", "file_name", "folder_name", "folder_names",
           "scenario_folders"]
