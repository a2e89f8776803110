"""`record` and `field`: the decorator of kvplan's frozen record classes and its field, attrs' own.

`record` is `attrs.frozen` (slotted, frozen, compared and hashed by field) and `field` is `attrs.field`;
the names stay so that a record reads as kvplan's kind of value, and mypy's attrs plugin types them.

One difference from `attrs.frozen` as it comes: a record's `__repr__` is `record_repr`, one function shared by
every record (attrs' own `repr=False`, and the class's `__repr__` set before attrs builds it), not a method attrs
writes and compiles per class. It prints what attrs' would, `Name(field=value, ...)` over the fields attrs lists
with `repr=True` (`attrs.fields`), so that a record shows the same in a traceback, a test's diff and the REPL. Why:
compiling the generated `__repr__` was about a sixth of `kvplan advise`'s own start-up work (about 140 records
are built at import; bench/bench_coldstart.py, README "Reading the cold-start figures"). The `__init__`, `__eq__`
and `__hash__` attrs writes are kept: they are what makes a record a value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
from attrs import AttrsInstance, field

__all__ = ["field", "record", "record_repr"]


def record_repr(self: AttrsInstance) -> str:
    """`Name(field=value, ...)`: attrs' own repr of a record, its class's name and each field shown (attrs.fields)."""
    cls = type(self)
    shown = ", ".join(f"{a.name}={(a.repr if callable(a.repr) else repr)(getattr(self, a.name))}"
                      for a in attrs.fields(cls) if a.repr)
    return f"{cls.__qualname__.rsplit('>.', 1)[-1]}({shown})"


if TYPE_CHECKING:  # mypy's attrs plugin knows attrs.frozen by name: to it, a record is an attrs.frozen class
    from attrs import frozen as record
else:
    def record(maybe_cls=None, **options):
        """`attrs.frozen(cls, **options)` with `record_repr` as the class's `__repr__` (unless it has its own)."""
        def build(cls):
            if "__repr__" not in cls.__dict__:
                cls.__repr__ = record_repr
            return attrs.frozen(cls, repr=False, **options)

        return build if maybe_cls is None else build(maybe_cls)
