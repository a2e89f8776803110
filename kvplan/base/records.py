"""`record`: kvplan's frozen record classes, `attrs.frozen(slots=True)` with shared methods.

attrs writes each class's `__init__`, `__repr__`, `__eq__` and `__hash__` as Python source and
compiles it when the class is made: ~370 µs a class, 85% of it compiling, and `kvplan advise`
makes ~85 classes at start-up (bench/bench_coldstart.py). A `record` is made by attrs with its
`__init__` alone (`repr=False, eq=False`), and then given one `__repr__`, `__eq__` and `__hash__`
shared by every record, which read the class's fields; that halves the cost of making a class.

They behave as attrs' own (tests/unit/base/test_records.py compares them with attrs' on the same
classes):

* `repr`: `Name(a=1, b='x')`, the class's `__qualname__` after its last `>.`, each field's
  repr, `...` for a record already being printed further up (a cycle);
* `==`: only with an instance of the very same class (else NotImplemented), fields compared in
  order with `==`, stopping at the first false result, which is returned (as attrs' `a == b and
  c == d` does);
* `hash`: of a number naming the class and of the field values, so equal records hash equal, and
  hashes are as reproducible as attrs' (both follow PYTHONHASHSEED).

Field options that change those three (`repr=`, `eq=`, `order=`, `hash=` on a field) are
refused when the class is made: use `attrs.frozen` for such a class.
For mypy, `record` is `attrs.frozen` itself: the attrs plugin types the classes, and the shared
methods have the signatures attrs' generated ones have.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Optional, TypeVar

import attrs

__all__ = ["record"]

_C = TypeVar("_C", bound=type)

#: Ids of the records being printed, per thread (attrs keeps the same set for its cycle check).
_printing = threading.local()


def _names(cls: type) -> tuple[str, ...]:
    names: tuple[str, ...] = cls.__record_fields__  # type: ignore[attr-defined]  # set by _finish
    return names


def _repr(self: object) -> str:
    try:
        active: set[int] = _printing.ids
    except AttributeError:
        active = _printing.ids = set()
    if id(self) in active:
        return "..."
    active.add(id(self))
    try:
        cls = self.__class__
        body = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(cls))
        return f"{cls.__qualname__.rsplit('>.', 1)[-1]}({body})"
    finally:
        active.discard(id(self))


def _eq(self: object, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    result: Any = True
    for n in _names(self.__class__):
        result = getattr(self, n) == getattr(other, n)
        if not result:
            return result
    return result


def _ne(self: object, other: object) -> Any:
    result = _eq(self, other)
    return result if result is NotImplemented else not result


def _hash(self: object) -> int:
    cls = self.__class__
    seed: int = cls.__record_hash__  # type: ignore[attr-defined]  # set by _finish
    return hash((seed, *(getattr(self, n) for n in _names(cls))))


def _finish(cls: _C) -> _C:
    """Give an attrs class made with repr=False, eq=False the shared methods."""
    fields = attrs.fields(cls)
    odd = [a.name for a in fields if a.repr is not True or a.eq is not True or a.eq_key is not None
           or a.hash is not None or a.order is not True]
    if odd:
        raise TypeError(f"record {cls.__qualname__}: fields {odd} set repr/eq/order/hash: use attrs.frozen")
    cls.__record_fields__ = tuple(a.name for a in fields)  # type: ignore[attr-defined]
    # attrs seeds a class's hashes with the hash of a string naming it: as stable as str hashes (PYTHONHASHSEED)
    cls.__record_hash__ = hash(f"kvplan record {cls.__module__}.{cls.__qualname__}")  # type: ignore[attr-defined]
    cls.__repr__ = _repr  # type: ignore[assignment]
    cls.__eq__ = _eq  # type: ignore[assignment]
    cls.__ne__ = _ne  # type: ignore[assignment]
    cls.__hash__ = _hash  # type: ignore[assignment]
    return cls


if TYPE_CHECKING:
    from attrs import frozen as record
else:
    def record(maybe_cls: Optional[type] = None, *, kw_only: bool = False) -> Any:
        """`@record` or `@record(kw_only=True)` on a class: see the module's docstring."""

        def wrap(cls: type) -> type:
            return _finish(attrs.frozen(cls, slots=True, kw_only=kw_only, repr=False, eq=False))

        return wrap if maybe_cls is None else wrap(maybe_cls)
