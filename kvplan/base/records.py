"""`record`: kvplan's frozen record classes, made as `attrs.frozen(slots=True)` makes them, at a tenth of the cost.

`kvplan advise` defines ~90 record classes at start-up. attrs spends ~180 µs making each (it analyses the
class, writes each method as Python source and compiles it): 16 ms of a 60 ms start-up
(bench/bench_coldstart.py). A `record` class is made here in ~15 µs:

* the slotted class is made once, as attrs makes it (`__slots__` of the fields and `__weakref__`);
* `__repr__`, `__eq__`, `__ne__`, `__hash__`, `__setattr__`, `__delattr__` and the pickling methods are
  functions shared by every record, which read the class's fields;
* `__init__` is a generic one, which binds the arguments as Python would, until the class has been called
  `COMPILE_AFTER` times; then one written for the class is compiled (as attrs writes it), so only the classes
  a run makes many of are compiled.

The classes behave as attrs' own, and speak attrs' protocol (`__attrs_attrs__`), so `attrs.fields`,
`attrs.evolve`, `attrs.asdict` and `attrs.has` work on them (tests/unit/base/test_records.py compares
them with attrs' classes made from the same bodies):

* `__init__`: the fields in order, inherited ones first; a field with a default or factory is optional,
  `kw_only` fields are keyword-only, a private field's parameter drops its leading `_`; validators run
  after every field is set, then `__attrs_post_init__` if the class has one;
* `repr`: `Name(a=1, b='x')`, the class's `__qualname__` after its last `>.`, each field's repr, `...`
  for a record already being printed further up (a cycle);
* `==`: only with an instance of the very same class (else NotImplemented), fields compared in order
  with `==`, stopping at the first false result, which is returned (as attrs' `a == b and c == d`);
* `hash`: of a number naming the class and of the field values, so equal records hash equal, and
  hashes are as reproducible as attrs' (both follow PYTHONHASHSEED);
* setting or deleting a field raises `attrs.exceptions.FrozenInstanceError`.

A field is declared with an annotation, optionally with a default: a value, `attrs.Factory(f)` (also
with `takes_self=True`) or `field(default=..., factory=..., validator=..., kw_only=...)` from this
module. attrs' own `attrs.field` is refused, as are the options this module does not implement (repr,
eq, order, hash, converters, init=False, cached_property): use `attrs.frozen` for such a class.
For mypy, `record` is `attrs.frozen` and `field` is `attrs.field`: the attrs plugin types the classes.
"""

from __future__ import annotations

import sys
import threading
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, TypeVar, Union

from attrs import NOTHING, Factory
from attrs.exceptions import FrozenInstanceError

__all__ = ["field", "record"]

_C = TypeVar("_C", bound=type)

#: Ids of the records being printed, per thread (attrs keeps the same set for its cycle check).
_printing = threading.local()

#: An argument not given (a field's default may be None or NOTHING itself).
_UNSET = object()

#: attrs.Factory's class (attrs' stubs type `Factory` as a function).
_FACTORY: type = type(Factory(list))

#: How attrs recognises a ClassVar annotation written as a string (attrs._make._CLASSVAR_PREFIXES).
_CLASSVAR = ("typing.ClassVar", "t.ClassVar", "ClassVar", "typing_extensions.ClassVar")


class Field:
    """One field of a record, with the attributes of `attrs.Attribute` that attrs' functions and validators read.

    What is the same for every record field (in `__init__`, in repr and eq, no converter, no metadata) is held
    by the class, read-only: only the attributes that differ are set on each of the ~600 fields advise makes."""

    __slots__ = ("name", "default", "validator", "kw_only", "alias", "type", "inherited")

    init = repr = eq = order = True
    eq_key = order_key = hash = converter = on_setattr = None
    metadata: Mapping[object, object] = MappingProxyType({})

    def __init__(self, name: str, default: object, validator: Optional[Callable[..., object]], kw_only: bool,
                 type: object, inherited: bool = False) -> None:
        self.name, self.default, self.validator, self.kw_only = name, default, validator, kw_only
        self.alias = name.lstrip("_")  # attrs' default alias: `_x` is set by the parameter `x`
        self.type, self.inherited = type, inherited

    def inherit(self) -> Field:
        return Field(self.name, self.default, self.validator, self.kw_only, self.type, inherited=True)

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, kw_only={self.kw_only!r})"


class _Spec:
    """What `field(...)` leaves in a class body, read when the class is made."""

    __slots__ = ("default", "validator", "kw_only")

    def __init__(self, default: object, validator: Optional[Callable[..., object]], kw_only: bool) -> None:
        self.default, self.validator, self.kw_only = default, validator, kw_only


def _field(*, default: object = NOTHING, factory: Optional[Callable[[], object]] = None,
           validator: Union[None, Callable[..., object], list[Callable[..., object]]] = None,
           kw_only: bool = False) -> Any:
    """A field with a default, a factory, validators (one callable or a list, each called as
    `validator(instance, field, value)`) or keyword-only, as `attrs.field` takes them."""
    if factory is not None:
        if default is not NOTHING:
            raise ValueError("field: give default or factory, not both")
        default = Factory(factory)
    if isinstance(validator, (list, tuple)):
        validator = _all(tuple(validator))
    return _Spec(default, validator, kw_only)


def _all(validators: tuple[Callable[..., object], ...]) -> Callable[..., None]:
    def run(instance: object, attribute: Field, value: object) -> None:
        for v in validators:
            v(instance, attribute, value)
    return run


# --- the shared methods ----------------------------------------------------------------------------------

def _names(cls: type) -> tuple[str, ...]:
    names: tuple[str, ...] = cls.__record_fields__  # type: ignore[attr-defined]  # set by _make
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
    seed: int = cls.__record_hash__  # type: ignore[attr-defined]  # set by _make
    return hash((seed, *(getattr(self, n) for n in _names(cls))))


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError()


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError()


def _getstate(self: object) -> dict[str, object]:
    return {n: getattr(self, n) for n in _names(self.__class__)}


def _setstate(self: object, state: dict[str, object]) -> None:
    for n, v in state.items():
        object.__setattr__(self, n, v)


def _replace(self: object, **changes: object) -> object:
    """copy.replace (Python 3.13), as attrs gives it."""
    cls = self.__class__
    for f in cls.__attrs_attrs__:  # type: ignore[attr-defined]  # set by _make
        changes.setdefault(f.alias, getattr(self, f.name))
    return cls(**changes)


_SHARED: dict[str, Callable[..., Any]] = {
    "__repr__": _repr, "__eq__": _eq, "__ne__": _ne, "__hash__": _hash, "__setattr__": _frozen_setattr,
    "__delattr__": _frozen_delattr, "__getstate__": _getstate, "__setstate__": _setstate, "__replace__": _replace,
}


# --- __init__, compiled on the first call -----------------------------------------------------------------

def _init_source(fields: tuple[Field, ...], post_init: bool) -> tuple[str, dict[str, object]]:
    """The source of a record's `__init__` and the globals it runs with."""
    params: list[str] = []
    keywords: list[str] = []
    body = ["    _set = _object_setattr.__get__(self)"]
    checks: list[str] = []
    env: dict[str, object] = {"_object_setattr": object.__setattr__, "NOTHING": NOTHING}
    for i, f in enumerate(fields):
        arg = f.alias
        if isinstance(f.default, _FACTORY):
            factory: Any = f.default  # an attrs.Factory: its stubs type it as a function
            env[f"_f{i}"] = factory.factory
            param = f"{arg}=NOTHING"
            made = f"_f{i}(self)" if factory.takes_self else f"_f{i}()"
            body.append(f"    _set({f.name!r}, {made} if {arg} is NOTHING else {arg})")
        else:
            env[f"_d{i}"] = f.default
            param = arg if f.default is NOTHING else f"{arg}=_d{i}"
            body.append(f"    _set({f.name!r}, {arg})")
        (keywords if f.kw_only else params).append(param)
        if f.validator is not None:
            env[f"_v{i}"], env[f"_a{i}"] = f.validator, f
            checks.append(f"    _v{i}(self, _a{i}, self.{f.name})")
    signature = ", ".join(["self", *params, *(["*", *keywords] if keywords else [])])
    lines = [f"def __init__({signature}):", *body, *checks]
    if post_init:
        lines.append("    self.__attrs_post_init__()")
    return "\n".join(lines) + "\n", env


#: Calls of a class made through the generic `__init__` before its own is compiled. Compiling costs ~200 µs; the
#: generic one costs ~0.6 µs more a call when every field is given in order, ~2.5 µs more with keywords. `kvplan
#: advise examples/w2-batch32.kvp` calls two classes more often than this (Value 521 times, Rejection 472, with
#: keywords) and the next ones under 90 times: at 16 it compiled 12 `__init__`s, ~2 ms for ~0.5 ms saved.
COMPILE_AFTER = 128


def _compiled_init(cls: type) -> Callable[..., None]:
    fields: tuple[Field, ...] = cls.__attrs_attrs__  # type: ignore[attr-defined]  # set by _make
    source, env = _init_source(fields, hasattr(cls, "__attrs_post_init__"))
    code = compile(source, f"<record {cls.__module__}.{cls.__qualname__}.__init__>", "exec")
    exec(code, env)  # noqa: S102 - kvplan's own generated source: the class's field names and defaults
    init: Callable[..., None] = env["__init__"]  # type: ignore[assignment]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _missing(what: str, names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" and {quoted[-1]}"
    return f"missing {len(names)} required {what} argument{'s' if len(names) > 1 else ''}: {listed}"


def _bound(cls: type, positional: tuple[str, ...], aliases: frozenset[str], args: tuple[object, ...],
           kwargs: dict[str, object]) -> dict[str, object]:
    """The arguments of a call by the names they set (aliases), or the TypeError Python words for the call (the
    generic `__init__` calls it only for a call that is wrong)."""
    fields: tuple[Field, ...] = cls.__attrs_attrs__  # type: ignore[attr-defined]  # set by _make
    if len(args) > len(positional):
        required = sum(1 for f in fields if not f.kw_only and f.default is NOTHING)
        takes = (f"{len(positional) + 1} positional argument{'s' if positional else ''}" if required == len(positional)
                 else f"from {required + 1} to {len(positional) + 1} positional arguments")  # as Python words it
        raise TypeError(f"{cls.__qualname__}.__init__() takes {takes} but {len(args) + 1} were given")
    given = dict(zip(positional, args))
    for key, value in kwargs.items():
        if key not in aliases:
            raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument '{key}'")
        if key in given:
            raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument '{key}'")
        given[key] = value
    lacking = [f for f in fields if f.default is NOTHING and f.alias not in given]
    if lacking:
        plain = [f.alias for f in lacking if not f.kw_only]
        raise TypeError(f"{cls.__qualname__}.__init__() " + _missing("positional", plain) if plain else
                        f"{cls.__qualname__}.__init__() " + _missing("keyword-only", [f.alias for f in lacking]))
    return given


def _generic_init(cls: type) -> Callable[..., None]:
    """The class's `__init__` until it has been called COMPILE_AFTER times, then the compiled one (`_init_source`):
    the same binding (TypeError as Python words it), defaults, factories, validators and post-init."""
    fields: tuple[Field, ...] = cls.__attrs_attrs__  # type: ignore[attr-defined]  # set by _make
    positional = tuple(f.alias for f in fields if not f.kw_only)
    names = tuple(f.name for f in fields) if len(positional) == len(fields) else None  # all positional: a fast path
    aliases = frozenset(f.alias for f in fields)
    checked = tuple(f for f in fields if f.validator is not None)
    post_init = getattr(cls, "__attrs_post_init__", None)
    calls = 0

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        nonlocal calls
        calls += 1
        if calls >= COMPILE_AFTER:
            init = _compiled_init(cls)
            type.__setattr__(cls, "__init__", init)
            init(self, *args, **kwargs)
            return
        if names is not None and not kwargs and len(args) == len(names):  # every field given, in order
            for key, value in zip(names, args):
                object.__setattr__(self, key, value)
        else:
            if len(args) > len(positional) or not aliases.issuperset(kwargs) or not kwargs.keys().isdisjoint(
                    positional[:len(args)]):
                _bound(cls, positional, aliases, args, kwargs)  # raises the TypeError Python words for the call
            given = dict(zip(positional, args))
            given.update(kwargs)
            for f in fields:
                value = given.get(f.alias, _UNSET)
                if value is _UNSET:
                    if f.default is NOTHING:
                        _bound(cls, positional, aliases, args, kwargs)  # raises: a required argument is missing
                    if isinstance(f.default, _FACTORY):
                        factory: Any = f.default  # an attrs.Factory: its stubs type it as a function
                        value = factory.factory(self) if factory.takes_self else factory.factory()
                    else:
                        value = f.default
                object.__setattr__(self, f.name, value)
        for f in checked:
            f.validator(self, f, getattr(self, f.name))  # type: ignore[misc]  # checked: not None
        if post_init is not None:
            post_init(self)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


# --- making the class -------------------------------------------------------------------------------------

def _is_class_var(annotation: object) -> bool:
    text = annotation if type(annotation) is str else str(annotation)
    if text[:1] in "'\"" and text[-1:] in "'\"":
        text = text[1:-1]
    return text.startswith(_CLASSVAR)


def _own_fields(cls: type, kw_only: bool) -> list[Field]:
    annotations: dict[str, object] = cls.__dict__.get("__annotations__", {})
    fields = []
    for name, annotation in annotations.items():
        if _is_class_var(annotation):
            continue
        value = cls.__dict__.get(name, NOTHING)
        if isinstance(value, _Spec):
            fields.append(Field(name, value.default, value.validator, kw_only or value.kw_only, annotation))
        else:
            fields.append(Field(name, value, None, kw_only, annotation))
    return fields


def _all_fields(cls: type, kw_only: bool) -> tuple[Field, ...]:
    own = _own_fields(cls, kw_only)
    own_names = {f.name for f in own}
    inherited: list[Field] = []
    seen: set[str] = set()
    for base in reversed(cls.__mro__[1:-1]):
        for f in base.__dict__.get("__attrs_attrs__", ()):
            if f.name not in own_names and f.name not in seen:
                seen.add(f.name)
                inherited.append(f.inherit())
    fields = (*inherited, *own)
    required_after_default = False
    for f in fields:
        if f.kw_only:
            continue
        if f.default is not NOTHING:
            required_after_default = True
        elif required_after_default:
            raise ValueError(f"record {cls.__qualname__}: no mandatory attributes allowed after an attribute "
                             f"with a default value or factory. Attribute in question: {f.name!r}")
    return fields


def _namespace(cls: type, names: tuple[str, ...]) -> tuple[dict[str, object], list[Callable[..., object]]]:
    """The class's own namespace less its fields' defaults, and its functions that hold the class in a closure
    cell (those using `super()` or `__class__`), in one pass; refuses what a record does not implement."""
    namespace: dict[str, object] = {}
    holding: list[Callable[..., object]] = []
    for key, value in cls.__dict__.items():
        kind = type(value)
        if kind.__name__ == "_CountingAttr":  # attrs.field(...): its options are attrs' to read
            raise TypeError(f"record {cls.__qualname__}: field {key!r} is an attrs.field: use "
                            "kvplan.base.records.field, or attrs.frozen for what it does not implement")
        if kind is cached_property:
            raise TypeError(f"record {cls.__qualname__}: cached_property is not implemented: use attrs.frozen")
        if key in names or key in ("__dict__", "__weakref__"):
            continue
        namespace[key] = value
        func = value.__func__ if kind in (classmethod, staticmethod) else value.fget if kind is property else value
        code = getattr(func, "__code__", None)
        if code is not None and "__class__" in code.co_freevars:
            holding.append(func)
    return namespace, holding


def _rebind_class_cells(old: type, new: type, functions: list[Callable[..., object]]) -> None:
    """Methods that use `super()` or `__class__` hold the class in a closure cell: point them at the new class."""
    for func in functions:
        for cell in getattr(func, "__closure__", None) or ():
            try:
                if cell.cell_contents is old:
                    cell.cell_contents = new
            except ValueError:  # an empty cell
                pass


def _make(cls: type, kw_only: bool) -> type:
    fields = _all_fields(cls, kw_only)
    names = tuple(f.name for f in fields)
    namespace, holding = _namespace(cls, names)
    if hasattr(sys, "_clear_type_descriptors"):  # Python 3.14, as attrs does
        sys._clear_type_descriptors(cls)
    base_slots: set[str] = set()
    weakref_inherited = False
    for base in cls.__mro__[1:-1]:
        weakref_inherited = weakref_inherited or base.__dict__.get("__weakref__") is not None
        base_slots.update(getattr(base, "__slots__", ()))
    slots = [n for n in names if n not in base_slots]
    if not weakref_inherited and "__weakref__" not in base_slots:
        slots.append("__weakref__")
    namespace["__slots__"] = tuple(slots)
    namespace.update(_SHARED)
    namespace["__attrs_attrs__"] = fields
    namespace["__match_args__"] = tuple(f.name for f in fields if not f.kw_only)
    namespace["__record_fields__"] = names
    # attrs seeds a class's hashes with the hash of a string naming it: as stable as str hashes (PYTHONHASHSEED)
    namespace["__record_hash__"] = hash(f"kvplan record {cls.__module__}.{cls.__qualname__}")
    made = type(cls)(cls.__name__, cls.__bases__, namespace)
    type.__setattr__(made, "__init__", _generic_init(made))
    _rebind_class_cells(cls, made, holding)
    return made


if TYPE_CHECKING:
    from attrs import field as field
    from attrs import frozen as record
else:
    field = _field

    def record(maybe_cls: Optional[type] = None, *, kw_only: bool = False) -> Any:
        """`@record` or `@record(kw_only=True)` on a class: see the module's docstring."""

        def wrap(cls: type) -> type:
            return _make(cls, kw_only)

        return wrap if maybe_cls is None else wrap(maybe_cls)
