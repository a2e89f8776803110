"""Lint settings: [tool.kvplan] of the nearest pyproject.toml (select, ignore, fail-on, allow-paths).

Its own module, apart from kvplan.lang.lint, so that the commands that only need the settings
(advise, emit, report: the allow-paths of a spec's config paths) do not import the linter at
start-up (bench/bench_coldstart.py). kvplan.lang.lint re-exports every name.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Iterable, Optional, Sequence

import attrs

from kvplan.base import files, limits
from kvplan.base.codes import CODES, Severity
from kvplan.base.errors import ConfigError, Span
from kvplan.base.near import close_matches
from kvplan.base.records import record

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: Patterns compiled on first use (re caches them), not at import: a start-up without select/ignore, or with a
#: pyproject.toml that parses, needs neither.
_PREFIX = r"KV[0-9]{0,3}"


def _severity(text: str, where: str) -> Severity:
    try:
        return Severity(text)
    except ValueError:
        raise ConfigError(f"{where}: fail-on must be error, warning or info, got {text!r}") from None


@record
class LintSettings:
    """Which codes to report and which severity fails the run.

    `select` and `ignore` hold code prefixes (`KV2`, `KV201`); an empty select means
    every code. When both match a code, the longer prefix wins, and ignore wins a tie.
    """

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fail_on: Severity = Severity.ERROR
    check_digest: bool = False          # reserved for the backend issue
    config_path: Optional[str] = None   # the pyproject.toml the settings came from
    allow_paths: tuple[str, ...] = ()   # folders outside a spec's own its config paths may name

    def wants(self, code: str) -> bool:
        if code.startswith("KV0"):
            return True
        sel = max((len(p) for p in self.select if code.startswith(p)), default=-1 if self.select else 0)
        ign = max((len(p) for p in self.ignore if code.startswith(p)), default=-1)
        return sel >= 0 and sel > ign

    def with_overrides(self, *, select: Optional[Sequence[str]] = None, ignore: Sequence[str] = (),
                       fail_on: Optional[str] = None, allow_paths: Sequence[str] = ()) -> "LintSettings":
        """Command-line flags over file settings: --select replaces the file's select and ignore,
        --ignore adds to them, --fail-on replaces, --allow-path adds."""
        added = tuple(_check_prefixes(ignore, "--ignore"))
        return attrs.evolve(
            self,
            select=self.select if select is None else tuple(_check_prefixes(select, "--select")),
            ignore=(self.ignore if select is None else ()) + added,
            fail_on=_severity(fail_on, "--fail-on") if fail_on is not None else self.fail_on,
            allow_paths=self.allow_paths + tuple(_folders(allow_paths, ".", "--allow-path")),
        )


def split_codes(values: Iterable[str]) -> list[str]:
    """`KV1,KV2` `KV3` -> [KV1, KV2, KV3]."""
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def _check_prefixes(prefixes: Iterable[str], where: str) -> list[str]:
    known = CODES
    out = []
    for p in prefixes:
        if not re.fullmatch(_PREFIX, p) or not any(code.startswith(p) for code in known):
            near = close_matches(p.upper(), list(known), n=1)
            hint = f"; did you mean {near[0]}?" if near else "; codes look like KV2 or KV201"
            raise ConfigError(f"{where}: no diagnostic code starts with {p!r}{hint}")
        out.append(p)
    return out


def _folders(values: Iterable[str], base: str, where: str) -> list[str]:
    """Each folder of --allow-path or allow-paths, relative to `base`; it must exist."""
    out = []
    for v in values:
        full = os.path.join(base, v)
        if not os.path.isdir(full):
            raise ConfigError(f"{where}: {v!r} is not a directory", help="name a folder that holds model configs")
        out.append(os.path.normpath(full))
    return out


_TOML_AT = r"\s*\(at line (\d+), column (\d+)\)$"


def _load_toml(path: str, *, explicit: bool = False) -> dict[str, Any]:
    """A TOML file read the one way kvplan reads input (kvplan.base.files: a regular file, bounded, UTF-8 with a
    located error). `explicit`: named by --config, so an empty or comments-only file is an error."""
    text = files.read_text(path, what="the lint config" if explicit else "pyproject.toml")
    if explicit:
        files.refuse_blank(text, path, what="the lint config",
                           holds='a [tool.kvplan] table, e.g. `select = ["KV2"]` under it (docs/cli-lint.md)')
    deep = limits.toml_too_deep(text)
    if deep is not None:  # tomllib recurses once per level: RecursionError past about a thousand
        line, col = limits.line_col(text, deep)
        raise ConfigError(f"nests arrays and tables more than {limits.MAX_JSON_DEPTH} levels deep",
                          span=Span(path, line, col, line, col + 1),
                          help="[tool.kvplan] takes lists of codes and paths, one level deep (docs/cli-lint.md)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = re.search(_TOML_AT, message)
        span = None
        if at is not None:
            line, col = int(at.group(1)), int(at.group(2))
            span, message = Span(path, line, col, line, col + 1), message[:at.start()]
        raise ConfigError(f"{'' if span else f'{path}: '}not valid TOML: {message}", span=span) from None


def find_pyproject(start_dir: str) -> Optional[str]:
    """The nearest pyproject.toml with a [tool.kvplan] table, from start_dir upward (its absolute path)."""
    d = os.path.realpath(start_dir)
    while True:
        candidate = os.path.join(d, "pyproject.toml")
        if os.path.isfile(candidate) and "kvplan" in _load_toml(candidate).get("tool", {}):  # no FIFO, no device
            return candidate
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def load_settings(start_dir: str = ".", config: Optional[str] = None) -> LintSettings:
    """Settings from [tool.kvplan] (keys select, ignore, fail-on) of `config` or the nearest pyproject."""
    path = files.pure_path(config) if config is not None else find_pyproject(start_dir)
    if path is None:
        return LintSettings()
    if not os.path.exists(path):
        raise ConfigError(f"{path}: no such file (--config takes a pyproject.toml)")
    table = _load_toml(path, explicit=config is not None).get("tool", {}).get("kvplan", {})
    shown = _display(str(path))
    if not isinstance(table, dict):
        raise ConfigError(f"{shown}: [tool.kvplan] must be a table")

    def codes(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f'{shown}: [tool.kvplan] {key} must be a list of code prefixes, e.g. ["KV2"]')
        return tuple(_check_prefixes(value, f"{shown}: [tool.kvplan] {key}"))

    fail_on = table.get("fail-on", "error")
    if not isinstance(fail_on, str):
        raise ConfigError(f"{shown}: [tool.kvplan] fail-on must be a string: error, warning or info")
    allowed = table.get("allow-paths", [])
    if not isinstance(allowed, list) or not all(isinstance(v, str) for v in allowed):
        raise ConfigError(f'{shown}: [tool.kvplan] allow-paths must be a list of folders, e.g. ["../models"]')
    return LintSettings(select=codes("select"), ignore=codes("ignore"),
                        fail_on=_severity(fail_on, f"{shown}: [tool.kvplan]"), config_path=shown,
                        allow_paths=tuple(_folders(allowed, files.parent(path), f"{shown}: [tool.kvplan] allow-paths")))



def _display(path: str) -> str:
    """Relative to the working directory when inside it; forward slashes; no `./`."""
    p = os.path.normpath(path)
    if os.path.isabs(p):
        rel = os.path.relpath(p)
        if not rel.startswith(".."):
            p = rel
    return p.replace(os.sep, "/")
