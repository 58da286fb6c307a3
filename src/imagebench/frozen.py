"""Read-only values for a fixture: its truth must survive a subject that goes looking for it.

A ``python:`` subject runs in the bench's own process, so it can reach the live ``Fixture``
(through ``gc``, a stack frame, a module global) and, if the truth were an ordinary dict of
ordinary arrays, rewrite the answer it is about to be scored against. :func:`freeze` turns a
value into one that refuses every ordinary mutation:

- a mapping becomes a :class:`FrozenDict` (a ``dict``, so code that checks ``isinstance(x, dict)``
  or serialises it still works, whose mutators raise);
- a list or tuple becomes a tuple, a set a frozenset;
- a numeric ndarray becomes a copy whose memory is an immutable ``bytes`` object. Only clearing
  ``flags.writeable`` is not enough: an array that owns its memory lets anyone set the flag back,
  while one backed by ``bytes`` refuses to (``ValueError: cannot set WRITEABLE flag``).

Anything else (numbers, strings, lazy array references that read their file on each access) is
kept as it is. In-process Python cannot be made tamper-proof: ``dict.__setitem__`` or
``object.__setattr__`` still get through. Freezing turns an accident or a casual edit into an
exception; a digest of the truth taken before and after each sample catches the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

import numpy as np

__all__ = ["FrozenDict", "freeze", "is_locked"]


class FrozenDict(dict):  # type: ignore[type-arg]
    """A ``dict`` whose contents cannot be changed after construction. Values are kept as given
    (use :func:`freeze` for a deep copy that is read-only all the way down)."""

    __slots__ = ()

    def __new__(cls, source: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = (), /) -> FrozenDict:
        self = super().__new__(cls)
        dict.update(self, source)
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Filled in __new__; calling __init__ again on a live instance must not refill it.
        pass

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("this mapping is read-only (a fixture's data, truth and tolerance cannot be changed)")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through freeze(): an array comes back from a pickle writeable, and is locked again.
        return (freeze, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


def is_locked(arr: np.ndarray) -> bool:
    """Whether nobody can make ``arr`` writeable again: its memory is an immutable buffer."""
    if arr.flags.writeable:
        return False
    root: Any = arr
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    if isinstance(root, np.ndarray):  # owns its memory: its flag can be set back
        return False
    try:
        return memoryview(root).readonly  # bytes, or a file mapped read-only
    except TypeError:
        return False


def _lock(arr: np.ndarray) -> np.ndarray:
    if is_locked(arr):
        return arr
    if arr.dtype.hasobject:  # no byte image to share: a flagged copy is the best there is
        out = arr.copy()
        out.flags.writeable = False
        return out
    out = np.frombuffer(np.ascontiguousarray(arr).tobytes(), dtype=arr.dtype).reshape(arr.shape)
    return out


def freeze(value: Any) -> Any:
    """A read-only version of ``value`` (see the module docstring); a frozen value is returned as it is."""
    if isinstance(value, np.ndarray):
        return _lock(value)
    if isinstance(value, FrozenDict):
        if all(freeze(v) is v for v in value.values()):
            return value
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, Mapping):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        items = tuple(freeze(v) for v in value)
        if isinstance(value, tuple) and type(value) is tuple and all(a is b for a, b in zip(items, value)):
            return value
        return items
    if isinstance(value, (set, frozenset)):
        return frozenset(freeze(v) for v in value)
    return value
