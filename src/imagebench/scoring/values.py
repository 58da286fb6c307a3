"""JSON values as the comparators see them: plain Python, their kind, short quotes, exact numbers.

Every comparator reads a prediction and a gold value through these, so that a numpy scalar, a
tuple and a list compare alike, a boolean is never a number, and a tolerance boundary means what
it says (numbers are compared as the decimals they were written as).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """numpy scalars/arrays and tuples to plain Python (lists, ints, floats, bools); else unchanged."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def short(value: Any, limit: int = 60) -> str:
    """The value as compact JSON (``repr`` when it is not JSON), cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_number(value: Any) -> bool:
    """A finite int or float; never a boolean."""
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value)
    )


def kind(value: Any) -> str:
    """The JSON type of a value, in words (``"integer"`` and ``"float"`` kept apart)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def is_json(value: Any, depth: int = 0) -> bool:
    """Plain JSON: null, booleans, strings, integers, finite floats, lists and string-keyed objects."""
    if depth > 64:
        return False
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json(v, depth + 1) for k, v in value.items())
    return False


def frac(value: int | float) -> Fraction:
    """The exact value of a JSON number as written: a float is read through its shortest
    round-trip decimal (``repr``), so ``1.6 - 1.5`` is exactly ``0.1``."""
    if isinstance(value, float):
        return Fraction(repr(value))
    return Fraction(value)


def exact_key(value: Any) -> str:
    """A type-preserving key: 1, 1.0, True and "1" all differ; -0.0 equals 0.0."""

    def norm(v: Any) -> Any:
        if isinstance(v, float) and v == 0.0:
            return 0.0
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    return json.dumps(norm(plain(value)), sort_keys=True, ensure_ascii=True, allow_nan=True)


def strict_equal(a: Any, b: Any) -> bool:
    """Same JSON type and equal, recursively (a bool is never a number, an int never a float)."""
    if kind(a) != kind(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return set(a) == set(b) and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
        return False
    return bool(a == b)
