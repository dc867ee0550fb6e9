"""Kernel structs' scalar fields kept once, in memory both Python and machine code use.

A datapath object (a page pool, an rx ring, a device's counters) is read and
written by the Python reference path and, in place, by the native poll loop
and kthreads. Its integer fields therefore live in one ``int64`` buffer:
Python reads them as attributes (:class:`Field` over an ``array.array``,
fast for scalar access), native code gets :attr:`Record.words`, a numpy view
of the same memory. Nothing is copied before a native call or after it.
"""

from __future__ import annotations

import array
from typing import Any, ClassVar, Self, overload

import numpy as np
import numpy.typing as npt

__all__ = ["Alias", "Field", "Record"]


class Field:
    """An ``int64`` slot of the owner's buffer, as an attribute (numbered in the order
    the class defines its fields)."""

    __slots__ = ("index", "name")

    def __init__(self) -> None:
        self.index = -1
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Field: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> int: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return obj._w[self.index]

    def __set__(self, obj: Any, value: int) -> None:
        obj._w[self.index] = value


class Record:
    """Named ``int64`` fields (class attributes ``name = Field()``) in one buffer;
    ``words`` is the numpy view native code takes. Equal records have equal fields."""

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        names: list[str] = []
        for name, f in cls.__dict__.items():
            if isinstance(f, Field):
                f.index = len(names)
                names.append(name)
        cls.FIELDS = tuple(names)

    def __init__(self, **values: int) -> None:
        self._w = array.array("q", bytes(8 * max(len(self.FIELDS), 1)))
        self.words: npt.NDArray[np.int64] = np.frombuffer(self._w, np.int64)
        for k, v in values.items():
            if k not in self.FIELDS:
                raise TypeError(f"{type(self).__name__} has no field {k!r}")
            setattr(self, k, v)

    @classmethod
    def index(cls, name: str) -> int:
        """The slot of field ``name`` in :attr:`words` (for native code)."""
        return cls.FIELDS.index(name)

    def asdict(self) -> dict[str, int]:
        return dict(zip(self.FIELDS, self._w.tolist(), strict=False))

    def copy(self) -> Self:
        return type(self)(**self.asdict())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and type(other) is type(self) \
            and self.asdict() == other.asdict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in self.asdict().items())})"


class Alias:
    """Field ``name`` of the :class:`Record` an object keeps in its attribute ``via``,
    as an attribute of that object: the state has one definition (the record),
    and the object's code reads it under the names it uses."""

    __slots__ = ("index", "via")

    def __init__(self, record: type[Record], name: str, via: str = "state") -> None:
        self.index = record.index(name)
        self.via = via

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Alias: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> int: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj, self.via)._w[self.index]

    def __set__(self, obj: Any, value: int) -> None:
        getattr(obj, self.via)._w[self.index] = value
