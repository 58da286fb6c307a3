"""Comparators of strings and citations: ``canonical_string_equal``, ``canonical_enum_equal``,
``cited_clause_equal`` and ``ordered_string_vector_equal`` (where the index carries meaning).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# Helpers are bound under the names the comparator bodies have always used: the registry hash
# pins each comparator's source text from its ``def`` line, so a body reads the same wherever
# its helpers live.
from imagebench.scoring.canonical import (
    canonical_citation,
    canonical_enum,
    canonical_string,
)
from imagebench.scoring.registry import ContractError, Example, FieldResult, comparator
from imagebench.scoring.registry import check_config as _config
from imagebench.scoring.registry import is_str_list as _is_str_list
from imagebench.scoring.registry import no as _no
from imagebench.scoring.registry import ok as _ok
from imagebench.scoring.values import kind as _kind
from imagebench.scoring.values import plain as _plain


def _prep_string(
    name: str,
    gold: Any,
    config: Mapping[str, Any] | None,
    extra: Mapping[str, Callable[[Any], bool]] | None = None,
) -> tuple[str, dict[str, Any]]:
    allowed: dict[str, Callable[[Any], bool]] = {"accepted": _is_str_list}
    allowed.update(extra or {})
    cfg = _config(name, config, allowed)
    gold = _plain(gold)
    if not isinstance(gold, str):
        raise ContractError(f"{name}: gold must be a string, got {_kind(gold)}")
    return gold, cfg


def _prep_canonical_string(gold: Any, config: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    return _prep_string("canonical_string_equal", gold, config)


@comparator(
    prepare=_prep_canonical_string,
    canonical=canonical_string,
    example=Example("Mitochondrion", {"accepted": ["mitochondria"]}, "  MITOCHONDRIA ", "nucleus"),
)
def canonical_string_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_string` form, or equal to one of the declared accepted spellings.

    Config: ``accepted`` (list of strings; each also counts as the gold, in canonical form).
    """
    gold, cfg = _prep_string("canonical_string_equal", gold, config)
    if not isinstance(predicted, str):
        return _no(f"expected a string, got a {_kind(predicted)}")
    want = {canonical_string(gold), *(canonical_string(a) for a in cfg.get("accepted", []))}
    got = canonical_string(predicted)
    if got in want:
        return _ok(f"matched as {got!r}")
    return _no(f"{got!r} (canonical) is not the expected string")


def _prep_enum(gold: Any, config: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    gold, cfg = _prep_string("canonical_enum_equal", gold, config, {"choices": _is_str_list})
    if "choices" in cfg:
        choices = {canonical_enum(c) for c in cfg["choices"]}
        if not choices:
            raise ContractError("canonical_enum_equal: 'choices' is empty")
        if canonical_enum(gold) not in choices:
            raise ContractError(f"canonical_enum_equal: gold {gold!r} is not one of the declared choices")
    return gold, cfg


@comparator(
    prepare=_prep_enum,
    canonical=canonical_enum,
    example=Example("cell_cycle", {"choices": ["cell_cycle", "apoptosis"]}, "Cell-Cycle", "apoptosis"),
)
def canonical_enum_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_enum` form (or to an accepted spelling) and, when ``choices`` are
    declared, one of them.

    Config: ``accepted`` (list of strings), ``choices`` (list of strings: the enumeration; the
    gold must be one of them, and a prediction outside them is reported as such).
    """
    gold, cfg = _prep_enum(gold, config)
    if not isinstance(predicted, str):
        return _no(f"expected a string, got a {_kind(predicted)}")
    got = canonical_enum(predicted)
    if "choices" in cfg and got not in {canonical_enum(c) for c in cfg["choices"]} | {
        canonical_enum(a) for a in cfg.get("accepted", [])
    }:
        return _no(f"{got!r} (canonical) is not one of the declared choices")
    if got in {canonical_enum(gold), *(canonical_enum(a) for a in cfg.get("accepted", []))}:
        return _ok(f"matched as {got!r}")
    return _no(f"{got!r} (canonical) is not the expected value")


def _prep_citation(gold: Any, config: Mapping[str, Any] | None) -> tuple[tuple[str, tuple[str, ...]], dict[str, Any]]:
    cfg = _config("cited_clause_equal", config, {})
    try:
        return canonical_citation(gold), cfg
    except ValueError as exc:
        raise ContractError(f"cited_clause_equal: gold: {exc}") from None


@comparator(
    prepare=_prep_citation,
    canonical=canonical_citation,
    example=Example(["ISO 9001:2015", "7.1"], {}, "iso 9001:2015 § 7.1.2", ["ISO 9001:2015", "7"]),
)
def cited_clause_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Both cite the same standard and clause (:func:`canonical_citation`). A gold clause without a
    sub-clause does not constrain one: gold ``7.1`` accepts ``7.1`` and ``7.1.2``, never ``7``.

    Config: none.
    """
    (g_std, g_clause), _ = _prep_citation(gold, config)
    try:
        p_std, p_clause = canonical_citation(predicted)
    except ValueError as exc:
        return _no(f"not a citation: {exc}")
    if p_std != g_std:
        return _no(f"cites standard {p_std!r}, expected another")
    if p_clause[: len(g_clause)] != g_clause:
        return _no(f"cites clause {'.'.join(p_clause)!r}, which is not the expected clause or inside it")
    return _ok(f"cites {p_std} § {'.'.join(p_clause)}")


def _prep_ordered(gold: Any, config: Mapping[str, Any] | None) -> tuple[list[str], dict[str, Any]]:
    cfg = _config(
        "ordered_string_vector_equal", config, {"canonical": lambda v: v in ("string", "enum", "exact")}
    )
    gold = _plain(gold)
    if not _is_str_list(gold):
        raise ContractError("ordered_string_vector_equal: gold must be a list of strings")
    return gold, cfg


@comparator(
    prepare=_prep_ordered,
    example=Example(["x", "y", "z"], {}, ["X", "y", " z"], ["y", "x", "z"]),
)
def ordered_string_vector_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """A list of strings of the gold's length, equal position by position (the index carries
    meaning, so order matters).

    Config: ``canonical``: ``"string"`` (default, :func:`canonical_string`), ``"enum"``
    (:func:`canonical_enum`) or ``"exact"`` (no canonicalisation).
    """
    gold, cfg = _prep_ordered(gold, config)
    predicted = _plain(predicted)
    if not _is_str_list(predicted):
        return _no("expected a list of strings")
    if len(predicted) != len(gold):
        return _no(f"has {len(predicted)} entries, expected {len(gold)}")
    form = cfg.get("canonical", "string")
    canon: Callable[[str], str] = {"string": canonical_string, "enum": canonical_enum, "exact": lambda s: s}[form]
    wrong = [i for i, (p, g) in enumerate(zip(predicted, gold, strict=True)) if canon(p) != canon(g)]
    if wrong:
        return _no(f"{len(wrong)} position(s) differ, first at index {wrong[0]}")
    return _ok(f"all {len(gold)} positions equal")
