"""Errors a user can cause: each carries what went wrong and what would be right."""

from __future__ import annotations

from typing import Optional

from kvplan.base.records import record


@record
class Span:
    """A place in a source file; lines and columns count from 1, columns in characters."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class KvplanError(Exception):
    """A problem in the user's input. The CLI prints it on one line and exits 2."""

    def __init__(self, message: str, *, help: Optional[str] = None, span: Optional[Span] = None) -> None:
        super().__init__(message)
        self.message = message
        self.help = help
        self.span = span

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span is not None else ""
        tail = f" ({self.help})" if self.help else ""
        return f"{where}{self.message}{tail}"


class UnitError(KvplanError):
    """A quantity with the wrong or an unknown unit."""


class CatalogError(KvplanError):
    """An unknown catalog id or a broken catalog entry."""


class ConfigError(KvplanError):
    """A Hugging Face config.json kvplan cannot read."""


class ModelInputError(KvplanError):
    """An out-of-range input to the model (a negative batch, a zero context)."""
