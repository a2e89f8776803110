"""kvplan.base.records.record: the same classes as attrs.frozen(slots=True) makes, method for method."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import Any, Optional

import attrs
import pytest

from kvplan.base.records import record


def _pair(kw_only: bool = False) -> tuple[Any, Any]:
    """One class body made twice: by `record` and by `attrs.frozen(slots=True)`."""

    def body() -> type:
        class Point:
            x: float
            label: str = "p"
            tags: list[object] = attrs.Factory(list)
            parent: Optional[object] = None

        return Point

    made = record(kw_only=True)(body()) if kw_only else record(body())
    return made, attrs.frozen(body(), slots=True, kw_only=kw_only)


VALUES: list[dict[str, Any]] = [
    {"x": 1.0}, {"x": 1}, {"x": 2.0}, {"x": 1.0, "label": "q"}, {"x": math.nan}, {"x": -0.0}, {"x": 0.0},
    {"x": 1.0, "tags": [1, "a"]}, {"x": 1.0, "tags": [1, "b"]}, {"x": "é\n", "label": "'\""},
]


def test_repr_is_attrs_repr() -> None:
    ours, theirs = _pair()
    for v in VALUES:
        assert repr(ours(**v)) == repr(theirs(**v)).replace(theirs.__qualname__, ours.__qualname__)
    nested_ours, nested_theirs = ours(1.0, parent=ours(2.0)), theirs(1.0, parent=theirs(2.0))
    assert repr(nested_ours) == repr(nested_theirs)
    assert repr(nested_ours) == "Point(x=1.0, label='p', tags=[], parent=Point(x=2.0, label='p', tags=[], parent=None))"


def test_a_cycle_prints_as_attrs_prints_it() -> None:
    ours, theirs = _pair()
    a, b = ours(1.0), theirs(1.0)
    a.tags.append(a)
    b.tags.append(b)
    assert repr(a) == repr(b) == "Point(x=1.0, label='p', tags=[...], parent=None)"


def test_eq_ne_and_hash_as_attrs() -> None:
    ours, theirs = _pair()
    for v in VALUES:
        for w in VALUES:
            o1, o2, t1, t2 = ours(**v), ours(**w), theirs(**v), theirs(**w)
            assert (o1 == o2) == (t1 == t2), (v, w)
            assert (o1 != o2) == (t1 != t2), (v, w)
            h1, h2 = (ours(**{**u, "tags": tuple(u.get("tags", ()))}) for u in (v, w))  # hashable tags
            if h1 == h2:
                assert hash(h1) == hash(h2)
    same = ours(1.0)
    assert same == same and not (same != same)
    nan = ours(math.nan)
    assert (nan == nan) == (theirs(math.nan) == theirs(math.nan))  # field by field with ==: nan != nan


def test_only_the_same_class_compares() -> None:
    ours, theirs = _pair()
    other, _ = _pair()
    assert ours(1.0).__eq__(theirs(1.0)) is NotImplemented
    assert ours(1.0) != theirs(1.0) and ours(1.0) != other(1.0)
    assert ours(1.0).__eq__((1.0, "p", [], None)) is NotImplemented

    @record
    class Child(ours):  # type: ignore[misc, valid-type]
        extra: int = 0

    assert ours(1.0) != Child(1.0)
    assert Child(1.0, extra=2) == Child(1.0, extra=2) != Child(1.0, extra=3)
    assert repr(Child(1.0)) == "Child(x=1.0, label='p', tags=[], parent=None, extra=0)"
    assert hash(Child(1.0, tags=())) == hash(Child(1.0, tags=()))


def test_eq_returns_the_first_false_comparison() -> None:
    # As attrs' `a == b and c == d`: the first falsy result, else the last one.
    class Vote:
        def __init__(self, result: object) -> None:
            self.result = result

        def __eq__(self, other: object) -> Any:
            return self.result

        __hash__ = None  # type: ignore[assignment]

    ours, theirs = _pair()
    for first, last in [(0, "yes"), ("", 0), (1, "yes"), ([], None)]:
        got = ours(Vote(first), tags=Vote(last)) == ours(1.0)  # type: ignore[arg-type]
        want = theirs(Vote(first), tags=Vote(last)) == theirs(1.0)
        assert got == want and type(got) is type(want)


def test_the_rest_is_attrs() -> None:
    ours, theirs = _pair(kw_only=True)
    with pytest.raises(TypeError):
        ours(1.0)
    p = ours(x=1.0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.x = 2.0
    assert attrs.evolve(p, label="q") == ours(x=1.0, label="q")
    assert attrs.asdict(p) == attrs.asdict(theirs(x=1.0))
    assert [a.name for a in attrs.fields(ours)] == [a.name for a in attrs.fields(theirs)]
    assert ours.__slots__ == theirs.__slots__
    assert ours.__match_args__ == theirs.__match_args__
    assert {ours(x=1.0, tags=()), ours(x=1.0, tags=())} == {ours(x=1.0, tags=())}  # type: ignore[arg-type]


@pytest.mark.parametrize("option", [{"repr": False}, {"eq": False}, {"hash": False}, {"eq": str.lower}])
def test_field_options_it_does_not_implement_are_refused(option: dict[str, Any]) -> None:
    class Odd:
        x: str = attrs.field(**option)

    with pytest.raises(TypeError, match="use attrs.frozen"):
        record(Odd)


def test_hashes_are_as_reproducible_as_attrs() -> None:
    # attrs seeds a class's hashes with a string's hash: fixed by PYTHONHASHSEED, so set order is too.
    code = ("from kvplan.base.records import record\n"
            "@record\nclass P:\n    x: int\n    y: float = 0.5\n"
            "print(hash(P(3)), [p.x for p in {P(i) for i in range(20)}])")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                           env={**os.environ, "PYTHONHASHSEED": "0"}).stdout for _ in range(2)}
    assert len(runs) == 1
