"""Lint: check many .kvp files, apply in-file suppressions and select/ignore, collect a report.

The pure core behind `kvplan lint`. Each file goes through `kvplan.lang.check_file`
(which never raises for bad input), then through the extra `checks` the caller
passes (the planner's KV2xx/KV3xx rules), then through suppression comments:

    kv_dtype = fp4            # kvplan: ignore[KV201] the vendor kernel is validated for fp4
    # kvplan: ignore[KV301, KV305] load test showed 48 ms at p99
    step_time <= 50 ms

A suppression applies to its own line when it follows code, else to the next
line that holds code. One without a reason, naming an unknown code, or
suppressing nothing is itself reported (KV9xx). Syntax errors (KV0xx) are never
suppressed nor filtered: a file that does not parse cannot be linted.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Mapping, Optional, Sequence

from kvplan.base.codes import CODES, SUPPRESSION_WITHOUT_REASON, UNKNOWN_SUPPRESSED_CODE, UNUSED_SUPPRESSION, Severity
from kvplan.base.diagnostics import Diagnostic, make
from kvplan.base.errors import KvplanError, Span
from kvplan.base.near import close_matches
from kvplan.base.records import record
from kvplan.lang import CheckResult, check_file

# The settings live in kvplan.lang.settings (commands that only need them do not import the linter);
# `X as X` re-exports them from here, where callers have always found them.
from kvplan.lang.settings import LintSettings as LintSettings
from kvplan.lang.settings import _display
from kvplan.lang.settings import find_pyproject as find_pyproject
from kvplan.lang.settings import load_settings as load_settings
from kvplan.lang.settings import split_codes as split_codes

Check = Callable[["CheckResult"], Sequence[Diagnostic]]

SUFFIX = ".kvp"
_SKIP_DIRS = {"node_modules", "__pycache__", "venv", "site-packages"}


# --------------------------------------------------------------------------- paths

def _skipped(dirname: str) -> bool:
    return dirname.startswith(".") or dirname in _SKIP_DIRS


def collect_paths(paths: Sequence[str]) -> tuple[str, ...]:
    """Files as given, directories expanded recursively to their *.kvp files; sorted, unique."""
    return tuple(p for p, _ in collect(paths))


def collect(paths: Sequence[str]) -> tuple[tuple[str, Optional[str]], ...]:
    """`collect_paths`, each file with the directory given that a walk found it in (None: named itself).

    The walk follows no symbolic link to a directory (os.walk's default); a linked file is listed,
    and `kvplan.lang.read_spec` refuses it when it points out of that directory.
    """
    if not paths:
        raise KvplanError("no paths given", help="name .kvp files or directories, e.g. `kvplan lint specs/`")
    found: dict[str, Optional[str]] = {}
    for given in paths:
        if os.path.isdir(given):
            inside = []
            for root, dirs, names in os.walk(given):
                dirs[:] = [d for d in dirs if not _skipped(d)]   # prune hidden and tool folders
                inside += [_display(os.path.join(root, f)) for f in names if f.endswith(SUFFIX)]
            if not inside:
                raise KvplanError(f"{_display(given)}: no {SUFFIX} files in this directory")
            for p in inside:
                found.setdefault(p, _display(given))
        elif os.path.exists(given):
            found[_display(given)] = None
        else:
            raise KvplanError(f"{given}: no such file or directory")
    return tuple(sorted(found.items()))


# --------------------------------------------------------------------------- suppressions

@record
class Comment:
    """A `#` comment found by the line scanner: where it starts and its text (with the `#`)."""

    line: int
    column: int
    text: str
    trailing: bool      # code precedes it on its line


def _holds_code(text: str) -> bool:
    """More than the grammar's whitespace: a byte-order mark is space to the parser, not to str.strip."""
    return bool(text.replace("\ufeff", "").strip())


def scan_comments(source: str) -> list[Comment]:
    """Comments line by line, skipping `#` inside double-quoted strings (with `\\"` escapes)."""
    out = []
    for lineno, line in enumerate(source.split("\n"), start=1):
        in_string = escaped = False
        for i, ch in enumerate(line):
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "#":
                out.append(Comment(lineno, i + 1, line[i:].rstrip("\r\n"), _holds_code(line[:i])))
                break
    return out


_SUPPRESSION = re.compile(r"#\s*kvplan\s*:\s*ignore\b(?P<rest>.*)", re.IGNORECASE)
_BRACKETS = re.compile(r"\s*\[(?P<codes>[^\]]*)\](?P<reason>.*)")


@record
class Suppression:
    """`# kvplan: ignore[CODES] reason` and the line it applies to (None: no code follows)."""

    comment: Comment
    codes: tuple[tuple[str, int], ...]   # each code with its column
    reason: str
    target: Optional[int]
    well_formed: bool


def find_suppressions(source: str) -> list[Suppression]:
    comments = scan_comments(source)
    lines = source.split("\n")
    comment_lines = {c.line: c for c in comments}

    def holds_code(n: int) -> bool:
        text = lines[n - 1]
        c = comment_lines.get(n)
        return _holds_code(text[: c.column - 1] if c else text)

    out = []
    for c in comments:
        m = _SUPPRESSION.match(c.text)
        if not m:
            continue
        body = _BRACKETS.match(m.group("rest"))
        codes: list[tuple[str, int]] = []
        reason = ""
        if body:
            start = c.column - 1 + m.start("rest") + body.start("codes")
            for piece in re.finditer(r"[^,\s]+", body.group("codes")):
                codes.append((piece.group(0), start + piece.start() + 1))
            reason = body.group("reason").strip().lstrip("-—–:").strip()
        target: Optional[int] = c.line
        if not c.trailing:
            target = next((n for n in range(c.line + 1, len(lines) + 1) if holds_code(n)), None)
        out.append(Suppression(c, tuple(codes), reason, target, bool(body) and bool(codes)))
    return out


def _span(path: str, line: int, column: int, length: int) -> Span:
    return Span(path, line, column, line, column + max(length, 1))


def apply_suppressions(path: str, source: str, diagnostics: Sequence[Diagnostic],
                       judged: Callable[[str], bool] = lambda code: True) -> tuple[list[Diagnostic], int]:
    """The diagnostics left after suppressions, plus KV9xx findings about the suppressions; and
    how many were suppressed. A suppression is called unused only for codes that `judged`
    accepts: the codes of checks that did not run could not have been reported."""
    known = CODES
    sups = find_suppressions(source)
    used: set[tuple[int, str]] = set()
    by_line: dict[int, list[tuple[int, Suppression]]] = {}
    for i, s in enumerate(sups):
        if s.target is not None:
            by_line.setdefault(s.target, []).append((i, s))

    kept, suppressed = [], 0
    for d in diagnostics:
        hit = None
        if d.span is not None and not d.code.startswith(("KV0", "KV9")):
            hit = next((i for i, s in by_line.get(d.span.line, ()) if any(c == d.code for c, _ in s.codes)), None)
        if hit is None:
            kept.append(d)
        else:
            used.add((hit, d.code))
            suppressed += 1

    for i, s in enumerate(sups):
        c = s.comment
        whole = _span(path, c.line, c.column, len(c.text))
        if not s.well_formed:
            kept.append(make(UNKNOWN_SUPPRESSED_CODE, "suppression names no code", whole,
                             help="write `# kvplan: ignore[KV201] reason`, naming the codes to ignore"))
            continue
        for code, col in s.codes:
            where = _span(path, c.line, col, len(code))
            if code not in known:
                near = close_matches(code.upper(), list(known), n=1)
                hint = f"did you mean {near[0]}?" if near else "docs/rules/ has a page for every code"
                kept.append(make(UNKNOWN_SUPPRESSED_CODE, f"suppression names unknown code {code!r}", where, help=hint))
            elif (i, code) not in used and judged(code):
                target = f"line {s.target}" if s.target is not None else "the end of the file"
                kept.append(make(UNUSED_SUPPRESSION, f"suppression of {code} is unused: {code} is not reported on "
                                 f"{target}", where, help="remove the code from the suppression"))
        if not s.reason:
            kept.append(make(SUPPRESSION_WITHOUT_REASON, "suppression gives no reason", whole,
                             help="say why after the brackets: `# kvplan: ignore[KV201] measured on our kernel`"))
    return kept, suppressed


# --------------------------------------------------------------------------- report

@record
class FileReport:
    """One linted file: its source and the diagnostics left to report, sorted."""

    path: str
    source: str
    diagnostics: tuple[Diagnostic, ...]
    suppressed: int = 0
    result: Optional[CheckResult] = None  # for callers that want the scenarios


@record
class LintReport:
    files: tuple[FileReport, ...]
    settings: LintSettings = LintSettings()

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return tuple(d for f in self.files for d in f.diagnostics)

    def counts(self) -> Mapping[Severity, int]:
        out = {s: 0 for s in Severity}
        for d in self.diagnostics:
            out[d.severity] += 1
        return out

    def exit_code(self, fail_on: Optional[Severity] = None) -> int:
        """0 when nothing reaches `fail_on` (default: the settings'), else 1."""
        floor = (fail_on or self.settings.fail_on).rank
        return 1 if any(d.severity.rank >= floor for d in self.diagnostics) else 0

    def summary(self) -> str:
        """`3 errors, 1 warning in 2 files`."""
        counts = self.counts()
        parts = [f"{n} {s.value}{'' if n == 1 else 's'}" for s, n in counts.items() if n]
        nfiles = len(self.files)
        where = f"in {nfiles} file{'' if nfiles == 1 else 's'}"
        found = ", ".join(parts) if parts else "no findings"
        hidden = sum(f.suppressed for f in self.files)
        return f"{found} {where}" + (f" ({hidden} suppressed)" if hidden else "")


def _sort_key(d: Diagnostic) -> tuple[int, int, str, str]:
    s = d.span
    return (s.line if s else 0, s.column if s else 0, d.code, d.message)


def lint_file(path: str, settings: LintSettings, checks: Sequence[Check] = (),
              found_in: Optional[str] = None) -> FileReport:
    result = check_file(path, settings.allow_paths, found_in)
    raw = list(result.diagnostics)
    parsed = result.file is not None and not any(d.code.startswith("KV0") for d in raw)
    # The extra checks plan the spec; a spec with errors cannot be planned.
    planned = parsed and not any(d.severity is Severity.ERROR for d in raw)
    if planned:
        for check in checks:
            raw.extend(check(result))
    return report(path, result, raw, settings, planned)


def report(path: str, result: CheckResult, raw: Sequence[Diagnostic], settings: LintSettings,
           planned: bool) -> FileReport:
    """What lint reports on a checked file: `raw` (its diagnostics and the checks' findings) after the file's
    suppressions and the settings' select and ignore. `planned`: whether the planner's checks ran (advise and
    emit report on their own plans through here, so they print what lint prints)."""
    parsed = result.file is not None and not any(d.code.startswith("KV0") for d in raw)
    suppressed = 0
    if parsed:
        # Without the checks, only the front end's own codes (KV1xx) can be judged unused.
        raw, suppressed = apply_suppressions(path, result.source, raw,
                                             judged=lambda code: planned or code.startswith("KV1"))
    kept = sorted((d for d in raw if settings.wants(d.code)), key=_sort_key)
    return FileReport(path, result.source, tuple(kept), suppressed, result)


def lint_paths(paths: Sequence[str], settings: LintSettings = LintSettings(),
               checks: Sequence[Check] = ()) -> LintReport:
    """Lint every file under `paths`; a file that does not parse does not stop the others."""
    return LintReport(tuple(lint_file(p, settings, checks, root) for p, root in collect(paths)), settings)
