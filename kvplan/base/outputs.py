"""Every file kvplan writes: `emit -o DIR` and `report -o DIR` (one folder per scenario), and each single
file (`sweep -o`, `calibrate -o`, `import -o`, `map --plot/--roofline`, `pareto --plot`, `fmt`). One rule:

- Nothing is written through a link, a FIFO or a device. The file a write would replace may be
  absent or a regular file with one name; a symbolic link, a hard link (a second name of a file
  elsewhere), a FIFO, a device or a directory there is refused with one line (exit 2), and the
  file it points at is left untouched. The one exception is the null device itself (`-o
  /dev/null`, not a link to it), written as it is: it holds nothing a write could hijack. An
  output directory and every folder under it are opened relative to their parent with
  O_NOFOLLOW, so a link planted in the output tree (`out/chat -> /etc`) is refused too; the
  folders above the output path are the user's own and may be links.
- Every write is an atomic replace: the bytes go to a new temporary file beside the target
  (O_CREAT | O_EXCL | O_NOFOLLOW, relative to the folder's descriptor where the platform has
  dir_fd), which is renamed onto the name when it is complete. A reader sees the old file or the
  new one, never half of one; a failed or interrupted write leaves the old file as it was; a
  streamed write (`sweep -o`, 10^7 rows) streams into the temporary file. A replaced file keeps
  its permission bits.
- Folder names come from scenario names: NFKC-normalized, case-folded, every run of characters
  that is not a letter, digit or mark becomes one `-` (`Chat 70B` → `chat-70b`; letters of any
  script are kept, `Чат` → `чат`). Two scenarios whose names give the same folder (`Chat` and
  `chat`) are refused before anything is written, naming both: on a case-insensitive file system
  they are the same folder whatever kvplan does, and the second would overwrite the first.
- A name too long for one path component (more than `MAX_NAME` characters, or 255 bytes in UTF-8)
  is shortened deterministically: its first characters, `-`, and 10 hex digits of the SHA-256 of
  the whole name, so the same name always gives the same folder and two long names that share a
  beginning stay apart.
- An empty output path is refused (`-o ""` would write into the working directory).
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shlex
import stat
import unicodedata
from typing import BinaryIO, Iterator, Mapping, Optional, Protocol, Sequence

from kvplan.base.errors import KvplanError, Span
from kvplan.base.files import file_kind

#: Longest folder or file name kvplan writes, in characters (file systems allow 255 bytes).
MAX_NAME = 96
_NAME_BYTES = 255
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
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


_ELSEWHERE = "or write to another path"


def _refuse_link(path: str) -> OutputError:
    return OutputError(f"{path} is a symbolic link; kvplan does not write through links",
                       help=f"remove the link if it is yours, {_ELSEWHERE}")


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
            raise OutputError(f"{path} is not a directory", help=f"remove it, {_ELSEWHERE}") from None
        raise


def _lstat(name: str, parent: Optional[int]) -> Optional[os.stat_result]:
    try:
        return os.lstat(name, dir_fd=parent) if parent is not None else os.lstat(name)
    except FileNotFoundError:
        return None


def _is_link(name: str, parent: Optional[int]) -> bool:
    try:
        st = _lstat(name, parent)
    except OSError:
        return False
    return st is not None and stat.S_ISLNK(st.st_mode)


def _writable(shown: str, name: str, parent: Optional[int]) -> Optional[os.stat_result]:
    """The status of the file `name` in `parent` that a write will replace (None: there is none yet); refused when
    it is a link, a hard link, or not a regular file (a FIFO, a device, a directory)."""
    st = _lstat(name, parent)
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _refuse_link(shown)
    if not stat.S_ISREG(st.st_mode):
        device = stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
        raise OutputError(f"{shown} is {file_kind(st.st_mode)}, not a regular file; kvplan writes only regular "
                          "files", help="give the path of a regular file" if device else f"remove it, {_ELSEWHERE}")
    if st.st_nlink > 1:
        raise OutputError(f"{shown} is a hard link to another file ({st.st_nlink} names); kvplan does not write "
                          "through links", help=f"remove this name of it, {_ELSEWHERE}")
    return st


#: How many fresh names the temporary file may try before giving up (each is 64 random bits).
_TEMP_TRIES = 16


@contextlib.contextmanager
def _replacing(shown: str, name: str, parent: Optional[int], *, executable: bool = False) -> Iterator[BinaryIO]:
    """A new binary file that becomes `name` in `parent` (a dir fd; None: `name` is a path) when the block ends
    without an error, in one rename; on an error it is removed and `name` is left as it was.

    The file is made beside `name` (a rename does not cross file systems) with O_CREAT | O_EXCL | O_NOFOLLOW, so
    it is always a new regular file of kvplan's; the rename replaces the directory entry `name`, so even a link
    put there after the check is replaced, never written through."""
    old = _writable(shown, name, parent)
    kw = {} if parent is None else {"dir_fd": parent}
    folder, base = os.path.split(name) if parent is None else ("", name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_BINARY", 0)
    for _ in range(_TEMP_TRIES):
        temp = os.path.join(folder, f".{base[:32]}.{os.urandom(8).hex()}.kvplan-tmp")
        try:
            fd = os.open(temp, flags, 0o777 if executable else 0o666, **kw)
            break
        except FileExistsError:
            continue
        except PermissionError:  # the file may be writable, but a write makes a new one beside it
            raise OutputError(f"cannot write {shown}: its folder is not writable (kvplan writes a new file beside "
                              "it and renames it onto the name)", help=f"make the folder writable, {_ELSEWHERE}") \
                from None
    else:  # pragma: no cover - 16 collisions of 64 random bits
        raise OutputError(f"cannot make a temporary file beside {shown}", help="remove the *.kvplan-tmp files there")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            mode = 0o755 if executable else None if old is None else stat.S_IMODE(old.st_mode)
            if mode is not None and hasattr(os, "fchmod"):  # a replaced file keeps its permissions
                os.fchmod(fh.fileno(), mode)
        if parent is None:
            os.replace(temp, name)
        else:
            os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        try:
            os.unlink(temp, **kw)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def replaced_file(path: str, *, option: str = "-o", executable: bool = False) -> Iterator[BinaryIO]:
    """The one way kvplan writes a single file (`sweep -o`, `calibrate -o`, `map --plot`, `fmt`, ...): a binary file
    whose contents replace `path` when the block ends without an error (see `_replacing`).

    `path` must name a file in an existing folder; that folder may be reached through links (it is the user's own
    path), the file itself may not be one, nor a hard link, a FIFO, a device or a directory. `option` names the
    option the path came from in the messages about the path itself."""
    if not path.strip():
        raise OutputError(f"{option} names no file", help=f"give a file name, e.g. `{option} out.csv`")
    folder, name = os.path.split(path)
    if not name or name in (".", ".."):
        raise OutputError(f"{option} {path} names a directory, not a file", help=f"give {option} a file name in it")
    if _is_null_device(path):  # `-o /dev/null`: nothing to replace, and no file anywhere is written
        with open(path, "wb") as fh:
            yield fh
        return
    if not _DIR_FD:  # pragma: no cover - platforms without dir_fd / O_NOFOLLOW: checks by path
        with _replacing(path, path, None, executable=executable) as fh:
            yield fh
        return
    try:
        dfd = os.open(folder or ".", os.O_RDONLY | _DIRECTORY)
    except FileNotFoundError:
        raise OutputError(f"{folder} does not exist, so {path} cannot be written",
                          help=f"make the folder first (mkdir -p {shlex.quote(folder)}), {_ELSEWHERE}") from None
    except NotADirectoryError:
        raise OutputError(f"{folder} is not a directory, so {path} cannot be written",
                          help=f"remove it, {_ELSEWHERE}") from None
    try:
        with _replacing(path, name, dfd, executable=executable) as fh:
            yield fh
    finally:
        os.close(dfd)


def _is_null_device(path: str) -> bool:
    """Whether `path` is the null device itself (os.devnull, not a link to it): the one device kvplan writes to,
    since writing there hijacks nothing (a benchmark's `-o /dev/null`)."""
    try:
        st = os.lstat(path)
        return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat(os.devnull).st_rdev
    except (OSError, AttributeError):  # no such path; or no st_rdev (Windows, where os.devnull is `nul`)
        return False


def write_file(path: str, data: str | bytes, *, option: str = "-o", executable: bool = False) -> str:
    """Write `data` (text as UTF-8, newlines as given) to `path` through `replaced_file`; return `path`."""
    with replaced_file(path, option=option, executable=executable) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path


class OutputTree:
    """The files of one `-o DIR`: `write(("chat", "vllm.sh"), text)` writes DIR/chat/vllm.sh.

    Each write opens DIR and the folders below it one at a time, each relative to the one above
    and without following a link, and replaces the file as `replaced_file` does."""

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
        blob = data.encode("utf-8") if isinstance(data, str) else data
        if not _DIR_FD:  # no dir_fd / O_NOFOLLOW on this platform: check each component, then write
            self._check_dirs(tuple(dirs))
            with _replacing(shown, shown, None, executable=executable) as fh:
                fh.write(blob)
            return shown
        fds = self._open_dirs(dirs)
        try:
            with _replacing(shown, name, fds[-1], executable=executable) as fh:
                fh.write(blob)
        finally:
            for dfd in fds:
                os.close(dfd)
        return shown

    def _check_dirs(self, dirs: tuple[str, ...]) -> None:  # pragma: no cover - platforms without O_NOFOLLOW
        path = os.path.normpath(self.root)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        for part in ("", *dirs):
            path = os.path.join(path, part) if part else path
            if os.path.islink(path):
                raise _refuse_link(path)
            os.makedirs(path, exist_ok=True)


__all__ = ["MAX_NAME", "OutputError", "OutputTree", "check_out_dir", "file_name", "folder_name", "folder_names",
           "replaced_file", "scenario_folders", "write_file"]
