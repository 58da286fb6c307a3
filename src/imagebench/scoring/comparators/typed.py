"""Comparators of one typed value: ``exact``, ``boolean_equal``, ``integer_equal``.

Types survive: ``3``, ``3.0``, ``"3"`` and ``true`` are four different answers (only
``boolean_equal`` reads the strings true/false/yes/no, and never a number).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Helpers are bound under the names the comparator bodies have always used: the registry hash
# pins each comparator's source text from its ``def`` line, so a body reads the same wherever
# its helpers live.
from imagebench.scoring.canonical import resolve_boolean
from imagebench.scoring.registry import ContractError, Example, FieldResult, comparator
from imagebench.scoring.registry import check_config as _config
from imagebench.scoring.registry import is_bool as _is_bool
from imagebench.scoring.registry import no as _no
from imagebench.scoring.registry import ok as _ok
from imagebench.scoring.values import is_json as _is_json
from imagebench.scoring.values import kind as _kind
from imagebench.scoring.values import plain as _plain
from imagebench.scoring.values import short as _short
from imagebench.scoring.values import strict_equal as _strict_equal


def _prep_exact(gold: Any, config: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]]:
    cfg = _config("exact", config, {})
    gold = _plain(gold)
    if not _is_json(gold):
        raise ContractError(f"exact: gold {_short(gold)} is not plain JSON")
    return gold, cfg


@comparator(prepare=_prep_exact, example=Example({"a": [1, 2.5]}, {}, {"a": [1, 2.5]}, {"a": [1.0, 2.5]}))
def exact(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Same JSON type and equal, recursively: ``3`` is not ``3.0``, not ``"3"`` and not ``true``.

    Canonical form: the value itself. Config: none.
    """
    gold, _ = _prep_exact(gold, config)
    predicted = _plain(predicted)
    if _strict_equal(predicted, gold):
        return _ok()
    if _kind(predicted) != _kind(gold):
        return _no(f"expected a {_kind(gold)}, got a {_kind(predicted)}")
    return _no(f"{_short(predicted)} differs from the expected value")


def _prep_boolean(gold: Any, config: Mapping[str, Any] | None) -> tuple[bool, dict[str, Any]]:
    cfg = _config("boolean_equal", config, {"strict": _is_bool})
    gold = _plain(gold)
    if not isinstance(gold, bool):
        raise ContractError(f"boolean_equal: gold must be a JSON boolean, got {_kind(gold)}")
    return gold, cfg


@comparator(prepare=_prep_boolean, example=Example(True, {}, "yes", 1))
def boolean_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Both resolve to the same boolean (:func:`resolve_boolean`).

    Config: ``strict`` (bool, default false: also read the strings true/false/yes/no).
    """
    gold, cfg = _prep_boolean(gold, config)
    try:
        got = resolve_boolean(predicted, strict=cfg.get("strict", False))
    except ValueError as exc:
        return _no(str(exc))
    return _ok() if got == gold else _no(f"answered {str(got).lower()}")


def _prep_integer(gold: Any, config: Mapping[str, Any] | None) -> tuple[int, dict[str, Any]]:
    cfg = _config("integer_equal", config, {})
    gold = _plain(gold)
    if not isinstance(gold, int) or isinstance(gold, bool):
        raise ContractError(f"integer_equal: gold must be an integer, got {_kind(gold)}")
    return gold, cfg


@comparator(prepare=_prep_integer, example=Example(3, {}, 3, "3"))
def integer_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Both are integers of equal value. A float (even ``3.0``), a string (``"3"``) or a boolean
    is never an integer. Config: none."""
    gold, _ = _prep_integer(gold, config)
    predicted = _plain(predicted)
    if not isinstance(predicted, int) or isinstance(predicted, bool):
        return _no(f"expected an integer, got a {_kind(predicted)}")
    return _ok() if predicted == gold else _no(f"answered {predicted}, which is not the expected integer")
