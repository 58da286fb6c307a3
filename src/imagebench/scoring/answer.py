"""Reading a structured answer: one JSON object, or a final marker line, and nothing out of prose.

:func:`parse_answer` takes what a subject left (a dict bound in its namespace, the text of
``outputs/answer.json`` already loaded, or its final message) and returns ``(answer, None)`` or
``(None, why_not)``. It never raises and never guesses:

- a ``dict`` is taken as it is, once it is checked to be plain JSON (string keys, finite
  numbers, within the size limits below). Tuples become lists and numpy scalars/arrays their
  Python values, exactly what a JSON round trip would make of them; anything else is refused;
- a string must be exactly one JSON object (surrounding whitespace allowed), or end with a
  line that starts with ``IMAGEBENCH_FINAL_JSON:`` followed by one JSON object that is the end
  of the text. Prose may come before that line, never after it; the marker may appear on one
  line only;
- ``NaN``, ``Infinity`` and numbers that overflow to infinity are refused, duplicate keys are
  refused, and types are kept: ``3`` stays an int, ``"3"`` a string, ``true`` a bool.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MARKER = "IMAGEBENCH_FINAL_JSON:"

MAX_TEXT_CHARS = 1_000_000  # a final message longer than this is not read at all
MAX_DEPTH = 32  # nesting of lists/objects
MAX_NODES = 100_000  # values (objects, lists, leaves) in one answer
MAX_STRING_CHARS = 100_000  # one string value or key
MAX_INT_ABS = 2**63  # integers must lie strictly inside (-2**63, 2**63)

_MARKER_LINE = re.compile(r"^[ \t]*" + re.escape(MARKER), re.MULTILINE)


class AnswerError(ValueError):
    """Why an answer cannot be read (the message is the reason recorded for the sample)."""


def _reject_constant(name: str) -> Any:
    raise AnswerError(f"the answer contains {name}, which is not a JSON number")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise AnswerError(f"the answer repeats the key {key!r}; an object may name each key once")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)


def _where(path: tuple[Any, ...]) -> str:
    if not path:
        return "the answer"
    return "answer" + "".join(f"[{p!r}]" for p in path)


def to_json_value(value: Any) -> Any:
    """Normalise ``value`` to plain JSON data, checked; raise :class:`AnswerError` naming the place.

    Allowed: ``None``, ``bool``, ``int`` (inside +-2**63), finite ``float``, ``str``, lists and
    tuples (become lists), dicts with string keys, numpy scalars and arrays (their Python
    values). Limits: depth :data:`MAX_DEPTH`, :data:`MAX_NODES` values, strings of at most
    :data:`MAX_STRING_CHARS` characters.
    """
    nodes = [0]

    def walk(v: Any, path: tuple[Any, ...], depth: int) -> Any:
        nodes[0] += 1
        if nodes[0] > MAX_NODES:
            raise AnswerError(f"the answer has more than {MAX_NODES} values")
        if depth > MAX_DEPTH:
            raise AnswerError(f"the answer is nested deeper than {MAX_DEPTH} levels (at {_where(path)})")
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, int):
            if not -MAX_INT_ABS < v < MAX_INT_ABS:
                raise AnswerError(f"{_where(path)} is an integer outside +-2**63")
            return int(v)
        if isinstance(v, float):
            if not math.isfinite(v):
                raise AnswerError(f"{_where(path)} is {v!r}; only finite numbers are JSON")
            return float(v)
        if isinstance(v, str):
            if len(v) > MAX_STRING_CHARS:
                raise AnswerError(f"{_where(path)} is a string longer than {MAX_STRING_CHARS} characters")
            return str(v)
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for key, item in v.items():
                if not isinstance(key, str):
                    raise AnswerError(f"{_where(path)} has a key of type {type(key).__name__}; JSON keys are strings")
                if len(key) > MAX_STRING_CHARS:
                    raise AnswerError(f"{_where(path)} has a key longer than {MAX_STRING_CHARS} characters")
                out[str(key)] = walk(item, (*path, key), depth + 1)
            return out
        if isinstance(v, (list, tuple)):
            return [walk(item, (*path, i), depth + 1) for i, item in enumerate(v)]
        np = _numpy()
        if np is not None:
            if isinstance(v, np.generic):
                if isinstance(v, (np.bool_, np.integer, np.floating)):
                    return walk(v.item(), path, depth)
                raise AnswerError(f"{_where(path)} is a numpy {v.dtype} scalar, not a JSON value")
            if isinstance(v, np.ndarray):
                if v.dtype.kind not in "biuf":
                    raise AnswerError(f"{_where(path)} is a numpy array of dtype {v.dtype}, not JSON numbers")
                if v.size > MAX_NODES:
                    raise AnswerError(f"the answer has more than {MAX_NODES} values")
                return walk(v.tolist(), path, depth)
        raise AnswerError(f"{_where(path)} is a {type(v).__name__}, which is not a JSON value")

    return walk(value, (), 0)


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is a dependency
        return None
    return numpy


def _decode_object(text: str, start: int) -> tuple[Any, int]:
    """Decode one JSON value at ``text[start:]``; raise AnswerError (never another error)."""
    try:
        return _DECODER.raw_decode(text, start)
    except AnswerError:
        raise
    except json.JSONDecodeError as exc:
        raise AnswerError(f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer with too many digits, absurd nesting
        raise AnswerError(f"the JSON cannot be read: {type(exc).__name__}: {exc}") from None


def _parse_text(text: str) -> dict[str, Any]:
    if len(text) > MAX_TEXT_CHARS:
        raise AnswerError(f"the message is {len(text)} characters long; at most {MAX_TEXT_CHARS} are read")
    stripped = text.strip()
    if not stripped:
        raise AnswerError("the message is empty")
    markers = list(_MARKER_LINE.finditer(text))
    if not markers:
        prose = AnswerError(
            f"the message is neither one JSON object nor ends with a line '{MARKER} {{...}}'; "
            "nothing is read out of prose"
        )
        if stripped[0] not in _JSON_START:
            raise prose
        try:
            value, end = _decode_object(stripped, 0)
        except AnswerError:
            if stripped[0] in "{[":  # an attempt at JSON: say what is wrong with it
                raise
            raise prose from None
        if end != len(stripped):
            raise AnswerError(
                "the message holds more than one JSON value, or text after the JSON; an answer is exactly one object"
            )
        if not isinstance(value, dict):
            raise AnswerError(f"expected a JSON object, got a JSON {_json_type(value)}")
        return value
    if stripped.startswith("{"):  # one object whose text merely mentions the marker
        try:
            value, end = _decode_object(stripped, 0)
        except AnswerError:
            end = -1
        if end == len(stripped) and isinstance(value, dict):
            return value
    if len(markers) > 1:
        raise AnswerError(f"the marker {MARKER!r} starts {len(markers)} lines; exactly one final answer is read")
    pos = markers[0].end()
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    if pos >= len(text) or text[pos] != "{":
        raise AnswerError(f"the marker {MARKER!r} is not followed by a JSON object on the same line")
    value, end = _decode_object(text, pos)
    if not isinstance(value, dict):  # pragma: no cover - a '{' always starts an object
        raise AnswerError(f"expected a JSON object after {MARKER!r}, got a JSON {_json_type(value)}")
    if text[end:].strip():
        raise AnswerError(
            f"there is text after the JSON object that follows {MARKER!r}; the object must end the message"
        )
    return value


_JSON_START = frozenset('{["-0123456789tfn')


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def parse_answer(obj_or_text: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Read a structured answer; return ``(answer, None)`` or ``(None, why_not)``. Never raises.

    See the module docstring for exactly what is accepted.
    """
    try:
        if obj_or_text is None:
            return None, "there is no answer"
        if isinstance(obj_or_text, (bytes, bytearray)):
            try:
                obj_or_text = bytes(obj_or_text).decode("utf-8")
            except UnicodeDecodeError as exc:
                return None, f"the message is not UTF-8 text ({exc.reason} at byte {exc.start})"
        if isinstance(obj_or_text, str):
            value: Any = _parse_text(obj_or_text)
        elif isinstance(obj_or_text, dict):
            value = obj_or_text
        else:
            return None, f"the answer is a {type(obj_or_text).__name__}; expected a JSON object (a dict) or text"
        answer = to_json_value(value)
        return answer, None
    except AnswerError as exc:
        return None, str(exc)
    except RecursionError:
        return None, f"the answer is nested deeper than {MAX_DEPTH} levels"
    except Exception as exc:  # never raise: an unreadable answer is a reason, not a crash
        return None, f"the answer could not be read: {type(exc).__name__}: {exc}"


def final_json_message(answer: dict[str, Any], preface: str = "") -> str:
    """Write ``answer`` the way a subject's final message should end (``preface`` first)."""
    body = json.dumps(to_json_value(answer), allow_nan=False, ensure_ascii=False)
    head = preface.rstrip("\n") + "\n" if preface else ""
    return f"{head}{MARKER} {body}\n"
