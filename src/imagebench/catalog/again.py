"""The cases a recorded run names, found again: what ``run --resume`` runs and a report reads.

A run since version 7 of ``run.json`` records its ``sources`` (each with the labels it gave); they
are opened again, and the catalog the command line gives may stand in for one that moved. An
older run is looked up among the built-in cases and the bundle it ran.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from imagebench.catalog.load import build_catalog, reopen
from imagebench.catalog.model import Catalog, CatalogError

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.records import RunRecord


def cases_of_run(
    record: RunRecord, given: Catalog | None = None, *, bundle: str | os.PathLike[str] | None = None
) -> list[Case]:
    """The cases ``record.cases`` names, in its order; CatalogError naming the field, the cases
    no source here provides, and where each was recorded from."""
    if record.sources is not None:
        base = given if given is not None else build_catalog(entry_points=False, env_tree=False)
        try:
            pool = reopen(record.sources, base)
        except CatalogError as exc:
            raise CatalogError(f"field 'sources': {exc}") from None
        missing = [label for label in record.cases if label not in pool]
        if missing:
            recorded = {label: s for s in record.sources for label in s.cases}
            said = "; ".join(
                f"{label} (recorded from {recorded[label].kind} {recorded[label].name})"
                if label in recorded
                else f"{label} (no source recorded)"
                for label in missing
            )
            raise CatalogError(f"field 'cases' names cases no source here provides: {said}")
        return [c for c in (pool.get(label) for label in record.cases) if c is not None]
    pool = given if given is not None else build_catalog(entry_points=False, env_tree=False)
    found: dict[str, Case] = {c.label: c for c in pool}
    folder = bundle or record.selection.get("bundle")
    if folder:
        from imagebench.bundle.load import BundleError, load_bundle

        try:
            loaded = load_bundle(folder)
        except BundleError as exc:
            raise CatalogError(f"its bundle cannot be loaded: {exc}") from None
        found.update({c.label: c for c in loaded.cases})
    missing = [label for label in record.cases if label not in found]
    if missing:
        place = (
            f"built-in cases or cases of bundle {folder}"
            if folder
            else "built-in cases (give --bundle DIR for a bundle's, --cases MODULE for a module's)"
        )
        raise CatalogError(f"field 'cases' names {missing}, which are not {place}")
    return [found[label] for label in record.cases]
