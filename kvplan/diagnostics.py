"""Diagnostics: coded findings with a span, collected and handed to a renderer.

Codes never change meaning. Ranges: KV0xx syntax, KV1xx meaning, KV2xx pinned
choices that break a design rule, KV3xx failed expectations and unmeetable
SLOs, KV9xx suppressions. Every code has a page under docs/rules/.
"""

from __future__ import annotations

import enum
from typing import Mapping, Optional, Sequence

import attrs

from kvplan.errors import Span


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1}[self.value]


@attrs.frozen(slots=True)
class Rule:
    """A registry entry: what a code means, forever."""

    code: str
    name: str           # kebab-case, e.g. "unknown-model"
    summary: str        # one line, used as SARIF shortDescription
    severity: Severity


@attrs.frozen(slots=True)
class Edit:
    """Replace the text of `span` with `text`; an empty span (end = start) inserts at it."""

    span: Span
    text: str


@attrs.frozen(slots=True)
class Fix:
    """A concrete change a diagnostic suggests, as data a tool (or a test) can apply.

    `title` is the human text (it also appears in the help line); `edits` change the file.
    Every fix kvplan prints is verified by tests/test_suggestions.py: applied to the file,
    the finding it addresses is gone and no new error appears.
    """

    title: str
    edits: tuple[Edit, ...]


@attrs.frozen(slots=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: Optional[Span]
    help: Optional[str] = None
    fixes: tuple[Fix, ...] = ()

    @property
    def rule(self) -> Rule:
        return RULES[self.code]

    def sort_key(self) -> tuple[str, int, int, str]:
        s = self.span
        return (s.file, s.line, s.column, self.code) if s else ("", 0, 0, self.code)


RULES: dict[str, Rule] = {}


def register(code: str, name: str, summary: str, severity: Severity = Severity.ERROR) -> Rule:
    """Add a code to the registry; a code is registered once, at import."""
    if code in RULES and RULES[code] != Rule(code, name, summary, severity):
        raise ValueError(f"diagnostic code {code} registered twice with different meanings")
    rule = Rule(code, name, summary, severity)
    RULES[code] = rule
    return rule


def make(code: str, message: str, span: Optional[Span], help: Optional[str] = None,
         severity: Optional[Severity] = None, fixes: Sequence[Optional[Fix]] = ()) -> Diagnostic:
    rule = RULES[code]
    return Diagnostic(code, severity or rule.severity, message, span, help,
                      tuple(f for f in fixes if f is not None))


def registry() -> Mapping[str, Rule]:
    """All codes, after importing every module that registers some."""
    import kvplan.lang.codes  # noqa: F401  (registers KV0xx, KV1xx, KV9xx)
    try:
        import kvplan.planner.codes  # noqa: F401  (registers KV2xx, KV3xx)
    except ImportError:  # the planner registers its codes once it exists
        pass
    import kvplan.backends.digest  # noqa: F401  (registers KV401)
    return dict(sorted(RULES.items()))
