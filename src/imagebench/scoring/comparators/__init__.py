"""The seventeen field comparators and their registry.

Each comparator is declared once, in the module of its family, with
:func:`~imagebench.scoring.registry.comparator`, which registers its function together with its
check of gold and config (the *preparer*), its canonical form, how a gold is fed back as an
answer, and a worked example. Importing this package imports every family, so
:data:`REGISTRY` is complete here; the mappings below are read-only live views of it, kept
under the names callers have always used:

- :data:`COMPARATORS`: name -> ``(predicted, gold, config) -> FieldResult``;
- :data:`PREPARERS`: name -> ``(gold, config)`` check, raising :class:`ContractError`;
- :data:`CANONICAL_FORMS`: name -> canonical form, for the comparators that match on one;
- :data:`EXAMPLES`: name -> :class:`~imagebench.scoring.registry.Example`
  ``(gold, config, match, mismatch)``.

Each comparator checks its gold and config first (a broken contract is blocked, never scored),
then compares; a prediction of the wrong type or form is a mismatch, with the reason. A reason
never states a gold value (summaries of earlier samples sit beside later ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from imagebench.scoring.canonical import (
    canonical_asset_id,
    canonical_atom_id,
    canonical_atom_identity,
    canonical_citation,
    canonical_enum,
    canonical_residue,
    canonical_space_group,
    canonical_string,
    resolve_boolean,
)

# The families register their comparators as they are imported.
from imagebench.scoring.comparators import (
    identifiers,
    numeric,
    region,
    sets,
    text,
    typed,
)
from imagebench.scoring.comparators.identifiers import (
    canonical_asset_id_equal,
    canonical_atom_id_equal,
    canonical_atom_identity_equal,
    canonical_residue_equal,
    canonical_space_group_equal,
)
from imagebench.scoring.comparators.numeric import (
    abs_tolerance,
    circular_tolerance,
    vector_abs_tolerance,
)
from imagebench.scoring.comparators.region import voxel_member_of_set
from imagebench.scoring.comparators.sets import canonical_set_equal
from imagebench.scoring.comparators.text import (
    canonical_enum_equal,
    canonical_string_equal,
    cited_clause_equal,
    ordered_string_vector_equal,
)
from imagebench.scoring.comparators.typed import boolean_equal, exact, integer_equal
from imagebench.scoring.regions import pack_region, unpack_region
from imagebench.scoring.registry import (
    ENTRIES,
    Comparator,
    ComparatorEntry,
    ContractError,
    Example,
    FieldResult,
    Preparer,
    RegistryView,
)

FAMILIES = (typed, text, numeric, identifiers, sets, region)

REGISTRY: dict[str, ComparatorEntry] = ENTRIES
COMPARATORS: RegistryView[Comparator] = RegistryView(REGISTRY, "compare")
PREPARERS: RegistryView[Preparer] = RegistryView(REGISTRY, "prepare")
CANONICAL_FORMS: RegistryView[Callable[..., Any]] = RegistryView(REGISTRY, "canonical")
EXAMPLES: RegistryView[Example] = RegistryView(REGISTRY, "example")


def exemplar_answer(comparator: str, gold: Any) -> Any:
    """A prediction that the comparator must accept for this gold: the gold itself, except for
    ``voxel_member_of_set``, whose gold is a region (the answer is its first voxel in C order)."""
    return REGISTRY[comparator].exemplar(gold)


__all__ = [
    "CANONICAL_FORMS",
    "COMPARATORS",
    "EXAMPLES",
    "FAMILIES",
    "PREPARERS",
    "REGISTRY",
    "Comparator",
    "ComparatorEntry",
    "ContractError",
    "Example",
    "FieldResult",
    "Preparer",
    "abs_tolerance",
    "boolean_equal",
    "canonical_asset_id",
    "canonical_asset_id_equal",
    "canonical_atom_id",
    "canonical_atom_id_equal",
    "canonical_atom_identity",
    "canonical_atom_identity_equal",
    "canonical_citation",
    "canonical_enum",
    "canonical_enum_equal",
    "canonical_residue",
    "canonical_residue_equal",
    "canonical_set_equal",
    "canonical_space_group",
    "canonical_space_group_equal",
    "canonical_string",
    "canonical_string_equal",
    "circular_tolerance",
    "cited_clause_equal",
    "exact",
    "exemplar_answer",
    "integer_equal",
    "ordered_string_vector_equal",
    "pack_region",
    "resolve_boolean",
    "unpack_region",
    "vector_abs_tolerance",
    "voxel_member_of_set",
]
