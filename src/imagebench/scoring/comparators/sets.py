"""``canonical_set_equal``: equal as multisets of canonical elements (order ignored,
multiplicity counted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

# Helpers are bound under the names the comparator bodies have always used: the registry hash
# pins each comparator's source text from its ``def`` line, so a body reads the same wherever
# its helpers live.
from imagebench.scoring.canonical import (
    canonical_asset_id,
    canonical_atom_id,
    canonical_enum,
    canonical_residue,
    canonical_space_group,
    canonical_string,
)
from imagebench.scoring.canonical import require_str as _require_str
from imagebench.scoring.registry import ContractError, Example, FieldResult, comparator
from imagebench.scoring.registry import check_config as _config
from imagebench.scoring.registry import no as _no
from imagebench.scoring.registry import ok as _ok
from imagebench.scoring.values import exact_key as _exact_key
from imagebench.scoring.values import is_json as _is_json
from imagebench.scoring.values import kind as _kind
from imagebench.scoring.values import plain as _plain
from imagebench.scoring.values import short as _short


def _json_element(value: Any) -> str:
    value = _plain(value)
    if not _is_json(value):
        raise ValueError(f"{_short(value)} is not JSON")
    return _exact_key(value)


# How canonical_set_equal keys each element: the canonical forms of the comparators of those names.
_ELEMENT_KEYS: dict[str, Callable[[Any], Any]] = {
    "exact": _json_element,
    "string": lambda v: _require_str(v, canonical_string, "a string"),
    "enum": lambda v: _require_str(v, canonical_enum, "an enumeration value"),
    "asset_id": lambda v: _require_str(v, canonical_asset_id, "an asset id"),
    "atom_id": canonical_atom_id,
    "residue": canonical_residue,
    "space_group": lambda v: _exact_key(canonical_space_group(v)),
}


def _prep_set(gold: Any, config: Mapping[str, Any] | None) -> tuple[Counter[Any], dict[str, Any]]:
    cfg = _config("canonical_set_equal", config, {"element": lambda v: v in _ELEMENT_KEYS})
    gold = _plain(gold)
    if not isinstance(gold, list):
        raise ContractError(f"canonical_set_equal: gold must be a list, got {_kind(gold)}")
    key = _ELEMENT_KEYS[cfg.get("element", "exact")]
    try:
        return Counter(key(g) for g in gold), cfg
    except ValueError as exc:
        raise ContractError(f"canonical_set_equal: gold element: {exc}") from None


@comparator(
    prepare=_prep_set,
    example=Example(["a", "b", "b"], {"element": "string"}, ["B", "a", "b"], ["a", "b"]),
)
def canonical_set_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal as multisets of canonical elements: order is ignored, multiplicity counts
    (``["a", "a", "b"]`` is not ``["a", "b"]``).

    Config: ``element``, how each element is canonicalised: ``"exact"`` (default: type-strict
    JSON), ``"string"``, ``"enum"``, ``"asset_id"``, ``"atom_id"``, ``"residue"`` or
    ``"space_group"`` (the canonical forms of the comparators of those names).
    """
    gold_counts, cfg = _prep_set(gold, config)
    predicted = _plain(predicted)
    if not isinstance(predicted, list):
        return _no(f"expected a list, got a {_kind(predicted)}")
    key = _ELEMENT_KEYS[cfg.get("element", "exact")]
    try:
        got = Counter(key(p) for p in predicted)
    except ValueError as exc:
        return _no(f"an element is unreadable: {exc}")
    if got == gold_counts:
        return _ok(f"the same {sum(got.values())} element(s)")
    missing = sum((gold_counts - got).values())
    extra = sum((got - gold_counts).values())
    return _no(f"{missing} expected element(s) missing and {extra} unexpected")
