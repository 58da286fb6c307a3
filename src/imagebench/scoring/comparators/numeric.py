"""Comparators of numbers within a tolerance: ``abs_tolerance``, ``vector_abs_tolerance`` (leaf by
leaf, at any nesting) and ``circular_tolerance`` (on a modular scale).

Numbers are compared exactly, as the decimals they were written as, so
``|predicted - gold| <= tolerance`` includes equality and 1.6 is within 0.1 of 1.5.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Helpers are bound under the names the comparator bodies have always used: the registry hash
# pins each comparator's source text from its ``def`` line, so a body reads the same wherever
# its helpers live.
from imagebench.scoring.registry import ContractError, Example, FieldResult, comparator
from imagebench.scoring.registry import check_config as _config
from imagebench.scoring.registry import is_tolerance as _is_tolerance
from imagebench.scoring.registry import no as _no
from imagebench.scoring.registry import ok as _ok
from imagebench.scoring.values import frac as _frac
from imagebench.scoring.values import is_number as _is_number
from imagebench.scoring.values import kind as _kind
from imagebench.scoring.values import plain as _plain
from imagebench.scoring.values import short as _short


def _prep_abs(gold: Any, config: Mapping[str, Any] | None) -> tuple[int | float, dict[str, Any]]:
    cfg = _config("abs_tolerance", config, {"tolerance": _is_tolerance}, required=("tolerance",))
    gold = _plain(gold)
    if not _is_number(gold):
        raise ContractError(f"abs_tolerance: gold must be a finite number, got {_short(gold)}")
    return gold, cfg


@comparator(prepare=_prep_abs, example=Example(1.5, {"tolerance": 0.1}, 1.6, 1.7))
def abs_tolerance(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """A finite number (int or float, never a boolean or string) with ``|predicted - gold| <= tolerance``.

    Config: ``tolerance`` (required, a number >= 0, in the field's unit).
    """
    gold, cfg = _prep_abs(gold, config)
    predicted = _plain(predicted)
    if not _is_number(predicted):
        return _no(f"expected a finite number, got {_short(predicted)}")
    diff = abs(_frac(predicted) - _frac(gold))
    if diff <= _frac(cfg["tolerance"]):
        return _ok(f"off by {float(diff):.10g} (tolerance {cfg['tolerance']:g})")
    return _no(f"off by {float(diff):.10g}, tolerance {cfg['tolerance']:g}")


def _same_shape_numbers(gold: Any, tol: Any, path: str) -> None:
    """Check a gold vector (numbers nested in lists/objects) and, if structured, its tolerance."""
    if isinstance(gold, list):
        if not gold:
            raise ContractError(f"vector_abs_tolerance: gold{path} is an empty list")
        if isinstance(tol, list):
            if len(tol) != len(gold):
                raise ContractError(f"vector_abs_tolerance: tolerance{path} has {len(tol)} entries, gold {len(gold)}")
            for i, (g, t) in enumerate(zip(gold, tol, strict=True)):
                _same_shape_numbers(g, t, f"{path}[{i}]")
        elif _is_tolerance(tol):
            for i, g in enumerate(gold):
                _same_shape_numbers(g, tol, f"{path}[{i}]")
        else:
            raise ContractError(f"vector_abs_tolerance: tolerance{path} must be a number >= 0 or a list like the gold")
    elif isinstance(gold, dict):
        if not gold:
            raise ContractError(f"vector_abs_tolerance: gold{path} is an empty object")
        if isinstance(tol, dict):
            if set(tol) != set(gold):
                raise ContractError(f"vector_abs_tolerance: tolerance{path} names other keys than the gold")
            for k in gold:
                _same_shape_numbers(gold[k], tol[k], f"{path}[{k!r}]")
        elif _is_tolerance(tol):
            for k in gold:
                _same_shape_numbers(gold[k], tol, f"{path}[{k!r}]")
        else:
            raise ContractError(
                f"vector_abs_tolerance: tolerance{path} must be a number >= 0 or an object like the gold"
            )
    elif _is_number(gold):
        if not _is_tolerance(tol):
            raise ContractError(f"vector_abs_tolerance: tolerance{path} must be a number >= 0")
    else:
        raise ContractError(f"vector_abs_tolerance: gold{path} is a {_kind(gold)}, expected a number or a vector")


def _prep_vector(gold: Any, config: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]]:
    cfg = _config(
        "vector_abs_tolerance",
        config,
        {"tolerance": lambda v: _is_tolerance(v) or isinstance(v, (list, dict))},
        required=("tolerance",),
    )
    gold = _plain(gold)
    _same_shape_numbers(gold, cfg["tolerance"], "")
    return gold, cfg


@comparator(
    prepare=_prep_vector,
    example=Example([1.0, -2.0], {"tolerance": [0.5, 0.25]}, [1.4, -2.2], [-2.0, 1.0]),
)
def vector_abs_tolerance(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Leaf by leaf, at any nesting of lists and objects: every leaf a finite number within its
    tolerance of the gold leaf at the same place. The shape must match exactly (same list
    lengths, same object keys); order is kept, so ``[dy, dx]`` is not ``[dx, dy]``.

    Config: ``tolerance`` (required): one number for every component, or a structure shaped
    like the gold with a tolerance per component (a list may also hold one number for a whole
    sub-list).
    """
    gold, cfg = _prep_vector(gold, config)
    predicted = _plain(predicted)
    failures: list[str] = []

    def walk(p: Any, g: Any, t: Any, path: str) -> str | None:
        if isinstance(g, list):
            if not isinstance(p, list):
                return f"{path or 'value'} is a {_kind(p)}, expected a list of {len(g)}"
            if len(p) != len(g):
                return f"{path or 'value'} has {len(p)} components, expected {len(g)}"
            for i, (pi, gi) in enumerate(zip(p, g, strict=True)):
                why = walk(pi, gi, t[i] if isinstance(t, list) else t, f"{path}[{i}]")
                if why:
                    return why
            return None
        if isinstance(g, dict):
            if not isinstance(p, dict):
                return f"{path or 'value'} is a {_kind(p)}, expected an object"
            if set(p) != set(g):
                return f"{path or 'value'} has keys {sorted(p)}, expected {sorted(g)}"
            for k in g:
                why = walk(p[k], g[k], t[k] if isinstance(t, dict) else t, f"{path}[{k!r}]")
                if why:
                    return why
            return None
        if not _is_number(p):
            return f"{path or 'value'} is {_short(p)}, expected a finite number"
        diff = abs(_frac(p) - _frac(g))
        if diff > _frac(t):
            failures.append(f"{path or 'value'} off by {float(diff):.10g} (tolerance {t:g})")
        return None

    shape_error = walk(predicted, gold, cfg["tolerance"], "")
    if shape_error:
        return _no(shape_error)
    if failures:
        more = f" and {len(failures) - 1} more" if len(failures) > 1 else ""
        return _no(failures[0] + more)
    return _ok("every component within tolerance")


def _prep_circular(gold: Any, config: Mapping[str, Any] | None) -> tuple[int | float, dict[str, Any]]:
    cfg = _config(
        "circular_tolerance",
        config,
        {"tolerance": _is_tolerance, "modulus": lambda v: _is_number(v) and v > 0},
        required=("tolerance",),
    )
    cfg.setdefault("modulus", 360)
    if _frac(cfg["tolerance"]) * 2 >= _frac(cfg["modulus"]):
        raise ContractError(
            f"circular_tolerance: tolerance {cfg['tolerance']:g} is at least half the modulus {cfg['modulus']:g}, "
            "so every answer would match"
        )
    gold = _plain(gold)
    if not _is_number(gold):
        raise ContractError(f"circular_tolerance: gold must be a finite number, got {_short(gold)}")
    return gold, cfg


@comparator(prepare=_prep_circular, example=Example(179.0, {"tolerance": 3, "modulus": 180}, 1.0, 90.0))
def circular_tolerance(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """A finite number whose distance to the gold on a circle of circumference ``modulus`` is at
    most ``tolerance``: the distance is ``min(d, modulus - d)`` with ``d = (predicted - gold) mod
    modulus`` (so 359 and 1 are 2 apart at modulus 360, and 179 and 1 are 2 apart at modulus 180).

    Config: ``tolerance`` (required, >= 0 and less than half the modulus), ``modulus`` (> 0,
    default 360).
    """
    gold, cfg = _prep_circular(gold, config)
    predicted = _plain(predicted)
    if not _is_number(predicted):
        return _no(f"expected a finite number, got {_short(predicted)}")
    m = _frac(cfg["modulus"])
    d = (_frac(predicted) - _frac(gold)) % m
    dist = min(d, m - d)
    if dist <= _frac(cfg["tolerance"]):
        return _ok(f"{float(dist):.10g} apart on the circle (tolerance {cfg['tolerance']:g})")
    return _no(f"{float(dist):.10g} apart on a circle of {cfg['modulus']:g}, tolerance {cfg['tolerance']:g}")
