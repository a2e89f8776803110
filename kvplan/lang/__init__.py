"""The .kvp language front end: text → syntax tree → checked scenarios, with every problem as a Diagnostic.

    check_file(path)          read and check a file; never raises for bad input
    check_source(text, path)  the same for text in hand
    parse(text, path)         the syntax tree only; raises KvplanError on the first syntax error

Stages: kvplan.lang.syntax (grammar, parser, syntax errors), kvplan.lang.spec
(the typed tree), kvplan.lang.check (meaning, defaults, expansion),
kvplan.model.scenario (what the planner consumes), kvplan.lang.codes (KV0xx,
KV1xx, KV9xx).
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

from kvplan.base import codes, files
from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.errors import KvplanError, Span
from kvplan.base.records import record
from kvplan.lang.check import check
from kvplan.lang.fixes import syntax_fix
from kvplan.lang.spec import Comment, SpecFile
from kvplan.lang.syntax import KvpSyntaxError, parse, parse_all
from kvplan.model.scenario import Choice, DeviceCount, Expectation, Pin, Scenario

__all__ = [
    "CheckResult", "Choice", "Comment", "DeviceCount", "Expectation", "KvpSyntaxError", "MAX_FILE_BYTES",
    "MAX_FILE_CHARS", "Pin", "Scenario", "SpecFile", "SpecFileError", "check_file", "check_source", "parse",
    "read_spec",
]

#: A spec is written by hand (LANGUAGE.md's complete example has 2.5k characters); a larger
#: file is not one, and would take seconds to parse (about 3 µs a character).
MAX_FILE_CHARS = 256 * 1024
#: The most bytes read of a spec: a UTF-8 character has at most 4, so a larger file has more than
#: MAX_FILE_CHARS characters and is refused unread.
MAX_FILE_BYTES = 4 * MAX_FILE_CHARS


@record
class CheckResult:
    """A checked file: its text, syntax tree (None after a syntax error), scenarios and diagnostics."""

    path: str
    source: str
    file: SpecFile | None
    scenarios: tuple[Scenario, ...]
    diagnostics: tuple[Diagnostic, ...]
    comments: tuple[Comment, ...]

    @property
    def ok(self) -> bool:
        """No error (warnings allowed)."""
        return not any(d.severity.value == "error" for d in self.diagnostics)


def check_source(text: str, path: str, allow_paths: Sequence[str] = ()) -> CheckResult:
    """Parse and check .kvp text. Never raises for bad input: every problem is a Diagnostic.

    `path` names the file in spans; model configs are read relative to its folder, and must lie
    in it (or below it) or in one of `allow_paths`.
    """
    if len(text) > MAX_FILE_CHARS:
        lines = text.count("\n") + 1
        diag = make(codes.FILE_TOO_LARGE, f"the file has {len(text):,} characters; a spec has at most "
                    f"{MAX_FILE_CHARS:,} characters", Span(path, 1, 1, 1, 1),
                    help=f"split it; is it a .kvp file? ({lines:,} lines)")
        return CheckResult(path, text, None, (), (diag,), ())
    if text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark is not part of line 1's columns
    spec, errors = parse_all(text, path)
    if spec is None:
        diags = tuple(_syntax_diagnostic(e, path, text) for e in errors)
        return CheckResult(path, text, None, (), tuple(sorted(diags, key=Diagnostic.sort_key)), ())
    if not spec.declarations and not spec.versions:
        said = "is empty" if files.blank(text) == "empty" else "holds only comments"
        diag = make(codes.EMPTY_FILE, f"the file {said}: it declares no deployment", Span(path, 1, 1, 1, 1),
                    help='a .kvp file declares `deployment "name" { ... }` (docs/language.md)')
        return CheckResult(path, text, spec, (), (diag,), spec.comments)
    scenarios, diagnostics = check(spec, os.path.dirname(path) or ".", text, allow_paths)
    return CheckResult(path, text, spec, scenarios, diagnostics, spec.comments)


class SpecFileError(KvplanError):
    """A spec file that cannot be read as text: `code` is its KV001 (unreadable), KV002 (not UTF-8) or
    KV015 (too large) diagnostic code."""

    def __init__(self, code: str, message: str, *, span: Span, help: Optional[str] = None) -> None:
        super().__init__(message, help=help, span=span)
        self.code = code


def read_spec(path: str, found_in: Optional[str] = None) -> str:
    """The text of the spec file `path`, read the one way every command reads a spec (kvplan.base.files):
    a regular file only (never a FIFO or a device), at most MAX_FILE_CHARS characters, UTF-8.

    `found_in` is the directory a walk found the file in: a symbolic link out of it is not followed
    (a pull request can add `x.kvp -> ~/.ssh/id_rsa`, and lint would print its first line).
    Raises SpecFileError with the diagnostic code and the place of the problem.
    """
    here = files.start(path)
    if found_in is not None and os.path.islink(path) and not files.within(path, (found_in,)):
        raise SpecFileError(codes.UNREADABLE_FILE, f"cannot read {path}: it is a symbolic link to a file outside "
                            f"{found_in}, and kvplan follows no link out of a directory it searches", span=here,
                            help="name the file itself if it is meant to be linted")
    try:
        data = files.read_bytes(path, limit=MAX_FILE_BYTES, what="the spec")
    except files.InputFileError as exc:
        if exc.reason == "size":
            raise SpecFileError(codes.FILE_TOO_LARGE, f"the file has more than {MAX_FILE_CHARS:,} characters "
                                f"(it was not read past {MAX_FILE_BYTES // 2**20} MiB); a spec has at most "
                                f"{MAX_FILE_CHARS:,} characters", span=here,
                                help="is it a .kvp file?") from None
        raise SpecFileError(codes.UNREADABLE_FILE, f"cannot read {path}: {exc.message}", span=here,
                            help=exc.help) from None
    except OSError as exc:
        raise SpecFileError(codes.UNREADABLE_FILE, f"cannot read {path}: {exc.strerror or exc}", span=here) from None
    try:
        text = files.decode(data, path)
    except files.InputFileError as exc:
        raise SpecFileError(codes.NOT_UTF8, exc.message, span=exc.span or here, help=exc.help) from None
    if len(text) > MAX_FILE_CHARS:
        raise SpecFileError(codes.FILE_TOO_LARGE, f"the file has {len(text):,} characters; a spec has at most "
                            f"{MAX_FILE_CHARS:,} characters", span=here,
                            help=f"split it; is it a .kvp file? ({text.count(chr(10)) + 1:,} lines)")
    return text


def check_file(path: str, allow_paths: Sequence[str] = (), found_in: Optional[str] = None) -> CheckResult:
    """Read (`read_spec`) and check a .kvp file; a file that cannot be read is a KV001/KV002/KV015 diagnostic.

    `allow_paths` are folders outside the spec's own that its `config = "..."` paths may name;
    `found_in` is the directory a walk found the file in (see `read_spec`).
    """
    try:
        text = read_spec(path, found_in)
    except SpecFileError as exc:
        assert exc.span is not None
        return CheckResult(path, "", None, (), (make(exc.code, exc.message, exc.span, help=exc.help),), ())
    return check_source(text, path, allow_paths)


def _syntax_diagnostic(exc: KvpSyntaxError, path: str, text: str = "") -> Diagnostic:
    span = exc.span or Span(path, 1, 1, 1, 1)
    fix = exc.fix or (syntax_fix(exc.code, span, exc.help, text) if exc.help and text else None)
    return make(exc.code, exc.message, span, exc.help, fixes=[fix])
