"""kvplan.base.records.record: the same classes as attrs.frozen(slots=True) makes, method for method."""

from __future__ import annotations

import copy
import math
import os
import pickle
import subprocess
import sys
import weakref
from typing import Any, Optional

import attrs
import pytest

from kvplan.base import records
from kvplan.base.records import field, record


@pytest.fixture(autouse=True, params=["generic", "compiled"])
def init_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with both `__init__`s a record has: the generic one it starts with, and the compiled
    one it is given after COMPILE_AFTER calls (here, from the first call)."""
    monkeypatch.setattr(records, "COMPILE_AFTER", 10**9 if request.param == "generic" else 1)
    return str(request.param)


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


@pytest.mark.parametrize("option", [{}, {"default": 1}, {"repr": False}, {"eq": False}, {"eq": str.lower}])
def test_attrs_fields_are_refused(option: dict[str, Any]) -> None:
    # attrs.field's options are attrs' to read: a record takes its own `field`, and says so.
    class Odd:
        x: str = attrs.field(**option)

    with pytest.raises(TypeError, match=r"'x' is an attrs.field: use kvplan.base.records.field, or attrs.frozen"):
        record(Odd)


def test_field_is_attrs_field() -> None:
    # default, factory, validators (one or a list, called with the field), kw_only: as attrs.field does.
    seen: list[tuple[str, object]] = []

    def positive(instance: object, attribute: Any, value: int) -> None:
        seen.append((attribute.name, value))
        if value <= 0:
            raise ValueError(f"{attribute.name} must be positive")

    def body(make_field: Any) -> type:
        class Box:
            n: int = make_field(validator=positive)
            items: list[int] = make_field(factory=list)
            size: int = make_field(default=3, validator=[positive, positive])
            key: str = make_field(default="k", kw_only=True)

        return Box

    ours, theirs = record(body(field)), attrs.frozen(body(attrs.field), slots=True)
    for cls in (ours, theirs):
        seen.clear()
        box = cls(2, key="z")
        assert (box.n, box.items, box.size, box.key) == (2, [], 3, "z")
        assert seen == [("n", 2), ("size", 3), ("size", 3)]
        assert cls(1).items is not cls(1).items  # a new list each time
        with pytest.raises(ValueError, match="n must be positive"):
            cls(0)
        with pytest.raises(TypeError):
            cls(1, [], 3, "z")  # key is keyword-only
    assert [(a.name, a.kw_only) for a in attrs.fields(ours)] == [(a.name, a.kw_only) for a in attrs.fields(theirs)]
    assert repr(ours(2)) == repr(theirs(2)).replace(theirs.__qualname__, ours.__qualname__)
    with pytest.raises(ValueError, match="default or factory"):
        field(default=1, factory=list)


def test_init_as_attrs_init() -> None:
    # a takes_self factory sees the fields before it; a private field's parameter has no `_`;
    # validators run after every field is set, then __attrs_post_init__; inherited fields come first.
    def make(deco: Any) -> type:
        @deco
        class Base:
            code: str
            page: str = attrs.Factory(lambda self: f"docs/{self.code}.md", takes_self=True)

        @deco
        class Leaf(Base):
            _secret: int = 0
            page: str = "p"  # redefined: moves after the other fields, as attrs does

            def __attrs_post_init__(self) -> None:
                object.__setattr__(self, "_secret", self._secret + 1)

            def shout(self) -> str:
                return super().__repr__().upper()  # a method using super() keeps working

        return Leaf

    ours, theirs = make(record), make(lambda c: attrs.frozen(c, slots=True))
    for cls in (ours, theirs):
        leaf = cls("c", secret=4)
        assert (leaf.code, leaf._secret, leaf.page) == ("c", 5, "p")
        assert leaf.shout().startswith("LEAF(CODE='C'")
        assert cls.__mro__[1]("y").page == "docs/y.md"
    assert [a.name for a in attrs.fields(ours)] == [a.name for a in attrs.fields(theirs)] == ["code", "_secret", "page"]
    assert repr(ours("c")) == repr(theirs("c")).replace(theirs.__qualname__, ours.__qualname__)
    assert ours.__slots__ == theirs.__slots__


def test_every_field_given_in_order_binds_as_attrs() -> None:
    # The generic __init__'s path for a call that gives every field positionally (kvplan.base.records: names):
    # a private field set by position, a field with a factory given a value, validators after every field is set,
    # then __attrs_post_init__.
    seen: list[tuple[str, object]] = []

    def make(deco: Any, fld: Any) -> type:
        @deco
        class Row:
            code: str = fld(validator=lambda self, a, v: seen.append((a.name, (v, self._n))))
            _n: int = 0
            tags: list[int] = attrs.Factory(list)

            def __attrs_post_init__(self) -> None:
                seen.append(("post", self.tags))

        return Row

    runs = []
    for cls in (make(record, field), make(lambda c: attrs.frozen(c, slots=True), attrs.field)):
        seen.clear()
        row = cls("c", 2, [7])
        runs.append(((row.code, row._n, row.tags), list(seen)))
        with pytest.raises(TypeError):
            cls("c", 2, [7], 8)
    assert runs[0] == runs[1] == (("c", 2, [7]), [("code", ("c", 2)), ("post", [7])])


def test_a_mandatory_field_after_a_default_is_refused() -> None:
    class Bad:
        a: int = 1
        b: int

    with pytest.raises(ValueError, match="no mandatory attributes allowed after an attribute with a default"):
        record(Bad)


@record
class Pickled:
    x: float
    tags: list[int] = attrs.Factory(list)
    parent: Optional[Pickled] = None


def test_pickle_copy_and_weakref() -> None:
    p = Pickled(1.0, tags=[1], parent=Pickled(2.0))
    for clone in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p), copy.copy(p)):
        assert clone == p and clone is not p
    assert weakref.ref(p)() is p
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del p.x


def test_init_is_compiled_after_compile_after_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "COMPILE_AFTER", 3)
    ours, _ = _pair()
    generic = ours.__init__
    made = [ours(1.0), ours(x=1.0)]
    assert ours.__init__ is generic
    made.append(ours(1.0, "p"))  # the third call compiles, and is made by the compiled one
    assert ours.__init__ is not generic
    assert ours.__init__.__code__.co_varnames[:5] == ("self", "x", "label", "tags", "parent")
    assert made == [ours(1.0)] * 3


BAD_CALLS: list[tuple[tuple[object, ...], dict[str, object]]] = [
    ((), {}), ((1.0, "p", [], None, 5), {}), ((1.0,), {"x": 2.0}), ((1.0,), {"nope": 1}), ((), {"label": "q"}),
]


@pytest.mark.parametrize(("args", "kwargs"), BAD_CALLS)
def test_a_bad_call_is_the_type_error_python_gives(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    # The generic __init__ words its TypeError as Python words the compiled one's (after the function name).
    def words(cls: Any) -> str:
        with pytest.raises(TypeError) as caught:
            cls(*args, **kwargs)
        return str(caught.value).split("__init__() ", 1)[1]

    ours, theirs = _pair()
    assert words(ours) == words(theirs)


def test_a_missing_keyword_only_argument_is_worded_as_python_words_it() -> None:
    ours, theirs = _pair(kw_only=True)
    for cls in (ours, theirs):
        with pytest.raises(TypeError, match=r"missing 1 required keyword-only argument: 'x'"):
            cls()


def test_hashes_are_as_reproducible_as_attrs() -> None:
    # attrs seeds a class's hashes with a string's hash: fixed by PYTHONHASHSEED, so set order is too.
    code = ("from kvplan.base.records import field, record\n"
            "@record\nclass P:\n    x: int\n    y: float = 0.5\n"
            "print(hash(P(3)), [p.x for p in {P(i) for i in range(20)}])")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                           env={**os.environ, "PYTHONHASHSEED": "0"}).stdout for _ in range(2)}
    assert len(runs) == 1
