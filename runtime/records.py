"""Frozen dataclasses whose comparison, hash and repr are shared functions.

``dataclasses.dataclass(frozen=True)`` writes six methods of each class as Python source
and compiles them when the class is created (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__``, ``__delattr__``): 0.5-0.6 ms of CPU per class on Python
3.12, and the library creates about a hundred such classes on the way to a first
partitioned step (``benchmarks/import_cost.py``). ``frozen`` lets ``dataclasses`` write
``__init__`` and the frozen guards, and gives the class ``__eq__``, ``__hash__`` and
``__repr__`` that read its fields through one ``operator.attrgetter`` made per class:
three of the six methods compiled, and the same behaviour as the dataclass's own ones:

- ``==`` holds between instances of the same class whose compared fields are equal
  (``field(compare=False)`` left out), and is ``NotImplemented`` against anything else;
- the hash is that of the hashed fields (``field(hash=...)``, else those compared), so
  equal records hash alike and a field that cannot be hashed raises as before;
- the repr is ``QualName(field=value, ...)`` over the fields with ``repr=True``, and
  ``...`` where a record contains itself;
- a method the class body defines itself is kept, as ``dataclasses`` keeps it.

Everything else is ``dataclasses``' (``fields``, ``replace``, ``asdict``, ``is_dataclass``,
``FrozenInstanceError`` on assignment, ``__match_args__``, ``slots=True``).
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar, overload

T = TypeVar("T", bound=type)


@overload
def frozen(cls: T, /) -> T: ...


@overload
def frozen(*, slots: bool = False) -> Callable[[T], T]: ...


def frozen(cls: T | None = None, /, *, slots: bool = False) -> T | Callable[[T], T]:
    """``@dataclasses.dataclass(frozen=True[, slots=True])`` with shared ``__eq__``,
    ``__hash__`` and ``__repr__`` (see the module's docstring)."""

    def make(cls: T) -> T:
        return share_methods(
            dataclasses.dataclass(frozen=True, eq=False, repr=False, slots=slots)(cls)
        )

    return make if cls is None else make(cls)


def share_methods(cls: T) -> T:
    """Gives the dataclass ``cls`` the shared ``__eq__``, ``__hash__`` and ``__repr__`` that
    its body does not define."""
    fields = dataclasses.fields(cls)
    compared = _getter([f.name for f in fields if f.compare])
    hashed = _getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    shown = tuple(f.name for f in fields if f.repr)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        shown_fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({shown_fields})"

    body = cls.__dict__
    if "__eq__" not in body:
        cls.__eq__ = __eq__
    # A body that defines __eq__ alone gets __hash__ = None from Python: dataclasses
    # counts that as no hash of its own, and so does this.
    own_hash = body.get("__hash__")
    if own_hash is None:
        cls.__hash__ = __hash__
    if "__repr__" not in body:
        cls.__repr__ = __repr__
    for method in (__eq__, __hash__, __repr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    return cls


def _getter(names: list[str]) -> Callable[[Any], Any]:
    """The values of ``names`` of an object, as one value to compare or hash."""
    if not names:
        return _nothing
    if len(names) == 1:  # attrgetter of one name returns the value, not a 1-tuple
        name = names[0]
        return lambda obj: (getattr(obj, name),)
    return operator.attrgetter(*names)


def _nothing(_obj: Any) -> tuple[()]:
    return ()
