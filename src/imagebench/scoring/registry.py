"""What a comparator is, and the one place each registers itself with everything that belongs to it.

A comparator is a pure function ``(predicted, gold, config) -> FieldResult``. It is declared with
:func:`comparator`, which records, beside the function, its *preparer* (its own check of a gold
value and a config, run on a contract before any answer is looked at; it raises
:class:`ContractError` when either is malformed), its canonical form when it matches on one, how
a gold value is fed back as an answer that must match (:func:`exemplar_answer`), and a worked
:class:`Example`. The entries live in :data:`imagebench.scoring.comparators.REGISTRY`; that
package imports every comparator module, so ask it, never this module, for the registry.

Two comparators can never share a name: registering one twice raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from imagebench.scoring.values import is_number, kind, plain, short


class ContractError(ValueError):
    """A field's gold value or comparator config is malformed: the answer is blocked, not scored."""


@dataclass(frozen=True)
class FieldResult:
    """Whether one field matched, and why (or why not)."""

    matched: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"matched": self.matched, "reason": self.reason}


Comparator = Callable[[Any, Any, Mapping[str, Any] | None], FieldResult]
Preparer = Callable[[Any, Mapping[str, Any] | None], Any]

_MATCH = "matched"


def ok(reason: str = _MATCH) -> FieldResult:
    return FieldResult(True, reason)


def no(reason: str) -> FieldResult:
    return FieldResult(False, reason)


class Example(NamedTuple):
    """A worked example: a gold value and config, a prediction that matches and one that does not."""

    gold: Any
    config: dict[str, Any]
    match: Any
    mismatch: Any


@dataclass(frozen=True)
class ComparatorEntry:
    """One registered comparator and what belongs to it."""

    name: str
    compare: Comparator
    prepare: Preparer
    example: Example
    canonical: Callable[..., Any] | None = None
    exemplar: Callable[[Any], Any] = plain


# name -> entry, in the order the comparator modules register them. Filled as those modules are
# imported; read it through imagebench.scoring.comparators, which imports them all.
ENTRIES: dict[str, ComparatorEntry] = {}

_F = TypeVar("_F", bound=Callable[..., FieldResult])


def comparator(
    *,
    prepare: Preparer,
    example: Example,
    canonical: Callable[..., Any] | None = None,
    exemplar: Callable[[Any], Any] | None = None,
) -> Callable[[_F], _F]:
    """Register the decorated function as the comparator of its own name.

    ``prepare(gold, config)`` checks both and raises :class:`ContractError` when either is
    malformed; ``canonical`` is the canonical form the comparator matches on, if it has one;
    ``exemplar(gold)`` is an answer that must match ``gold`` (default: the gold itself, as plain
    JSON); ``example`` is run by the tests and the self-test.
    """
    if not isinstance(example, Example):
        raise TypeError(f"a comparator's example is an Example, got {type(example).__name__}")

    def register(func: _F) -> _F:
        name = func.__name__
        if name in ENTRIES:
            raise ValueError(f"comparator {name!r} is registered twice")
        ENTRIES[name] = ComparatorEntry(
            name=name,
            compare=func,
            prepare=prepare,
            example=example,
            canonical=canonical,
            exemplar=exemplar or plain,
        )
        return func

    return register


_V = TypeVar("_V")


class RegistryView(Mapping[str, _V], Generic[_V]):
    """A read-only, live view of one attribute of every entry (entries without it are left out)."""

    def __init__(self, entries: Mapping[str, ComparatorEntry], attr: str) -> None:
        self._entries = entries
        self._attr = attr

    def __getitem__(self, name: str) -> _V:
        value = getattr(self._entries[name], self._attr)
        if value is None:
            raise KeyError(name)
        return value  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return (n for n, e in self._entries.items() if getattr(e, self._attr) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"RegistryView({self._attr}: {', '.join(self)})"


# --------------------------------------------------------------------------- checking a config


def check_config(
    name: str,
    config: Mapping[str, Any] | None,
    allowed: Mapping[str, Callable[[Any], bool]],
    *,
    required: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Check a comparator config: known keys only, each passing its check, required keys present."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ContractError(f"{name}: config must be an object, got {kind(config)}")
    cfg = {str(k): plain(v) for k, v in config.items()}
    unknown = sorted(set(cfg) - set(allowed))
    if unknown:
        valid = ", ".join(sorted(allowed)) or "none"
        raise ContractError(f"{name}: unknown config key(s) {unknown}; valid keys: {valid}")
    for key in required:
        if key not in cfg:
            raise ContractError(f"{name}: config needs {key!r}")
    for key, value in cfg.items():
        if not allowed[key](value):
            raise ContractError(f"{name}: config {key!r} has an invalid value {short(value)}")
    return cfg


def is_tolerance(value: Any) -> bool:
    return is_number(value) and value >= 0


def is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def is_bool(value: Any) -> bool:
    return isinstance(value, bool)
