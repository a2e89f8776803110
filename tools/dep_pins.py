"""Exact pins of the declared minimums, read from pyproject.toml: what tools/test-deps.sh min installs.

    python tools/dep_pins.py min            # name==lower-bound, one a line, for this Python
    python tools/dep_pins.py check          # exit 2 unless every dependency declares >=LOW,<HIGH

Every runtime dependency and every test-extra dependency must declare a range with a lower bound (`>=`) and an
upper bound (`<`). A requirement may carry a marker of the form `python_version OP "X.Y"` (several joined with
`and`); one that does not hold for this interpreter is left out, so the minimums can differ per Python (the
first release with wheels for a newer Python is that Python's minimum). Anything else is refused with one line
naming the requirement, exit 2. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import operator
import re
import sys
from pathlib import Path
from typing import Callable, NamedTuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # tools/test-deps.sh installs tomli first on 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
EXTRAS = ("test",)

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_CLAUSE = re.compile(r"(>=|<=|==|!=|~=|<|>)\s*([0-9][0-9A-Za-z.]*)")
_MARKER = re.compile(r"""python_version\s*(>=|<=|==|!=|<|>)\s*(['"])(\d+(?:\.\d+)*)\2""")
_OPS: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}


class DepError(Exception):
    """A requirement this tool cannot turn into a pin; the message names it."""


class Requirement(NamedTuple):
    text: str
    name: str
    lower: str
    upper: str
    applies: bool  # its marker holds for the interpreter it is read for


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _marker_holds(marker: str, req: str, python: tuple[int, int]) -> bool:
    holds = True
    for part in (p.strip() for p in marker.split(" and ")):
        m = _MARKER.fullmatch(part)
        if m is None:
            raise DepError(f"{req!r}: only `python_version OP \"X.Y\"` markers (joined with `and`) are understood, "
                           f"got {part!r}")
        holds = holds and _OPS[m.group(1)](python, _version(m.group(3)))
    return holds


def parse(req: str, python: tuple[int, int]) -> Requirement:
    spec, _, marker = req.partition(";")
    name = _NAME.match(spec.strip())
    if name is None:
        raise DepError(f"{req!r}: no distribution name")
    rest = spec.strip()[name.end():].strip()
    if rest.startswith("["):
        raise DepError(f"{req!r}: extras of a dependency are not supported here")
    clauses = [c.strip() for c in rest.split(",")] if rest else []
    found: dict[str, str] = {}
    for clause in clauses:
        m = _CLAUSE.fullmatch(clause)
        if m is None or m.group(1) not in (">=", "<"):
            raise DepError(f"{req!r}: a range is `>=LOW,<HIGH`; {clause!r} is not one of its two bounds")
        if m.group(1) in found:
            raise DepError(f"{req!r}: two {m.group(1)} bounds")
        found[m.group(1)] = m.group(2)
    if ">=" not in found or "<" not in found:
        missing = " and ".join(what for op, what in ((">=", "lower bound (>=)"), ("<", "upper bound (<)"))
                               if op not in found)
        raise DepError(f"{req!r}: declares no {missing}; every dependency declares its supported range "
                       f"as `>=LOW,<HIGH`")
    applies = _marker_holds(marker.strip(), req, python) if marker.strip() else True
    return Requirement(req, name.group(0), found[">="], found["<"], applies)


def declared(pyproject: Path = PYPROJECT, python: tuple[int, int] | None = None) -> list[Requirement]:
    """The runtime and test-extra requirements, each parsed; raises DepError on the first one out of form."""
    py = python or (sys.version_info[0], sys.version_info[1])
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    reqs = list(project.get("dependencies", []))
    for extra in EXTRAS:
        reqs += project.get("optional-dependencies", {}).get(extra, [])
    return [parse(r, py) for r in reqs]


def minimum_pins(pyproject: Path = PYPROJECT, python: tuple[int, int] | None = None) -> list[str]:
    """`name==LOW` for every requirement whose marker holds; one name pinned twice is refused."""
    pins: dict[str, str] = {}
    for r in declared(pyproject, python):
        if not r.applies:
            continue
        key = re.sub(r"[-_.]+", "-", r.name).lower()
        if key in pins and pins[key] != r.lower:
            raise DepError(f"{r.text!r}: {r.name} is declared twice with different lower bounds")
        pins[key] = r.lower
    return [f"{name}=={low}" for name, low in sorted(pins.items())]


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("min", "check"):
        print("usage: python tools/dep_pins.py min|check", file=sys.stderr)
        return 2
    try:
        pins = minimum_pins()
    except DepError as exc:
        print(f"{PYPROJECT.name}: {exc}", file=sys.stderr)
        return 2
    if argv[0] == "min":
        print("\n".join(pins))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
