"""Comparators of identifiers, each matching on one canonical form: atom ids, qualified atoms,
asset ids, residues and space groups (the forms are in :mod:`imagebench.scoring.canonical`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# Helpers are bound under the names the comparator bodies have always used: the registry hash
# pins each comparator's source text from its ``def`` line, so a body reads the same wherever
# its helpers live.
from imagebench.scoring.canonical import (
    canonical_asset_id,
    canonical_atom_id,
    canonical_atom_identity,
    canonical_residue,
    canonical_space_group,
)
from imagebench.scoring.canonical import require_str as _require_str
from imagebench.scoring.registry import ContractError, Example, FieldResult, comparator
from imagebench.scoring.registry import check_config as _config
from imagebench.scoring.registry import no as _no
from imagebench.scoring.registry import ok as _ok

_ALPHABET: dict[str, Callable[[Any], bool]] = {"alphabet": lambda v: v in ("protein", "none")}

_Prep = Callable[[Any, Mapping[str, Any] | None], tuple[Any, dict[str, Any]]]
_Compare = Callable[[Any, Any, dict[str, Any]], FieldResult]


def _canonical_comparator(
    name: str,
    canon: Callable[[Any, dict[str, Any]], Any],
    what: str,
    allowed: Mapping[str, Callable[[Any], bool]] | None = None,
) -> tuple[_Prep, _Compare]:
    """The check and the comparison of a comparator that matches on one canonical form."""

    def prep(gold: Any, config: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        cfg = _config(name, config, allowed or {})
        try:
            return canon(gold, cfg), cfg
        except ValueError as exc:
            raise ContractError(f"{name}: gold: {exc}") from None

    def compare(predicted: Any, gold_canonical: Any, cfg: dict[str, Any]) -> FieldResult:
        try:
            got = canon(predicted, cfg)
        except ValueError as exc:
            return _no(f"not {what}: {exc}")
        if got == gold_canonical:
            return _ok(f"matched as {got!r}")
        return _no(f"{got!r} (canonical) differs from the gold")

    return prep, compare


_prep_atom_id, _cmp_atom_id = _canonical_comparator(
    "canonical_atom_id_equal", lambda v, cfg: canonical_atom_id(v), "an atom id"
)
_prep_atom_identity, _cmp_atom_identity = _canonical_comparator(
    "canonical_atom_identity_equal",
    lambda v, cfg: canonical_atom_identity(v, cfg.get("alphabet", "protein")),
    "an atom",
    _ALPHABET,
)
_prep_asset_id, _cmp_asset_id = _canonical_comparator(
    "canonical_asset_id_equal", lambda v, cfg: _require_str(v, canonical_asset_id, "an asset id"), "an asset id"
)
_prep_residue, _cmp_residue = _canonical_comparator(
    "canonical_residue_equal",
    lambda v, cfg: canonical_residue(v, cfg.get("alphabet", "protein")),
    "a residue",
    _ALPHABET,
)
_prep_space_group, _cmp_space_group = _canonical_comparator(
    "canonical_space_group_equal", lambda v, cfg: canonical_space_group(v), "a space group"
)


@comparator(
    prepare=_prep_atom_id,
    canonical=canonical_atom_id,
    example=Example("C1'", {}, "c1*", "C2'"),
)
def canonical_atom_id_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_atom_id` form: a serial number or an atom name (``"C1*"`` is
    ``"c1'"`` is ``"C1'"``; ``17`` is ``"17"``). A name never equals a serial. Config: none."""
    gold, cfg = _prep_atom_id(gold, config)
    return _cmp_atom_id(predicted, gold, cfg)


@comparator(
    prepare=_prep_atom_identity,
    canonical=canonical_atom_identity,
    example=Example("A:GLY12:CA", {}, {"chain": "A", "residue": "G12", "atom": "ca"}, "B:GLY12:CA"),
)
def canonical_atom_identity_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_atom_identity` form: the atom as in ``canonical_atom_id_equal``,
    optionally qualified by chain and residue; every qualifier is compared, so a qualifier
    given on one side only is a mismatch. Config: ``alphabet`` (``"protein"`` default, or
    ``"none"``: how a one-letter residue name is read)."""
    gold, cfg = _prep_atom_identity(gold, config)
    return _cmp_atom_identity(predicted, gold, cfg)


@comparator(
    prepare=_prep_asset_id,
    canonical=canonical_asset_id,
    example=Example("volumes/cell_01.tif", {}, "./Volumes//CELL_01.tif", "volumes/cell_02.tif"),
)
def canonical_asset_id_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_asset_id` form (case-folded, ``/`` separators, no ``./`` prefix
    or trailing ``/``). Config: none."""
    gold, cfg = _prep_asset_id(gold, config)
    return _cmp_asset_id(predicted, gold, cfg)


@comparator(
    prepare=_prep_residue,
    canonical=canonical_residue,
    example=Example("A:LYS57", {}, "A:k 57", "B:LYS57"),
)
def canonical_residue_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_residue` form: chain, name, number and insertion code all agree
    (a chain given on one side only is a mismatch). Config: ``alphabet`` (``"protein"``
    default: a one-letter amino-acid code reads as its three-letter name; ``"none"``: never)."""
    gold, cfg = _prep_residue(gold, config)
    return _cmp_residue(predicted, gold, cfg)


@comparator(
    prepare=_prep_space_group,
    canonical=canonical_space_group,
    example=Example("P 21 21 21", {}, 19, "P 21 21 2"),
)
def canonical_space_group_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_space_group` form. A number and a symbol agree only when the
    symbol is in the built-in table; otherwise symbols compare as canonical symbols. Config: none."""
    gold, cfg = _prep_space_group(gold, config)
    result = _cmp_space_group(predicted, gold, cfg)
    if not result.matched:
        try:
            got = canonical_space_group(predicted)
        except ValueError:
            return result
        if isinstance(got, int) != isinstance(gold, int):
            return _no(f"{got!r} and the expected group cannot be related: a symbol outside the built-in table")
    return result
