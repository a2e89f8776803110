"""kvplan.base.records: a record is attrs.frozen, its repr the one attrs would write (issue 20, item 4)."""

from __future__ import annotations

from typing import Optional

import attrs
import pytest

from kvplan.base.records import field, record, record_repr


def _pair() -> tuple[type, type]:
    """The same class body built twice: as a record, and by attrs.frozen as it comes (attrs' own __repr__)."""
    def body() -> dict[str, object]:
        return {"__annotations__": {"a": "int", "b": "Optional[str]", "hidden": "float", "shown": "tuple[int, ...]"},
                "a": field(), "b": field(default=None), "hidden": field(default=0.5, repr=False),
                "shown": field(default=(), repr=lambda t: f"<{len(t)} items>")}
    return record(type("Thing", (), body())), attrs.frozen(type("Thing", (), body()))


@pytest.mark.parametrize("args", [(1,), (2, "x"), (3, "it's \"quoted\"", 1.5, (1, 2, 3)), (-7, None, 0.0, ())])
def test_repr_is_attrs_own(args: tuple[object, ...]) -> None:
    ours, theirs = _pair()
    assert repr(ours(*args)) == repr(theirs(*args))
    assert "hidden" not in repr(ours(*args))


def test_nested_and_kw_only_records() -> None:
    @record(kw_only=True)
    class Outer:
        inner: object
        n: int = 0

    @record
    class Inner:
        x: Optional[float] = None

    assert repr(Outer(inner=Inner(2.0), n=3)) == "Outer(inner=Inner(x=2.0), n=3)"
    with pytest.raises(TypeError):
        Outer(Inner())  # type: ignore[call-arg]  # kw_only passed through to attrs


def test_still_a_frozen_value() -> None:
    @record
    class P:
        x: int
        y: int = 0

    p = P(1, 2)
    assert p == P(1, 2) and p != P(2, 1) and hash(p) == hash(P(1, 2))
    assert attrs.has(P) and attrs.fields(P).x.name == "x"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    assert type(p).__repr__ is record_repr and "__dict__" not in dir(p)  # slotted, as attrs.frozen makes it


def test_own_repr_kept() -> None:
    @record
    class Q:
        x: int

        def __repr__(self) -> str:
            return "q"

    assert repr(Q(1)) == "q"
