"""The case browser's model: the fixture tree in use, the open skill bundles, the tree of cases
and the Detail tab's text of one of them. Qt-free.

Every case of the catalog (:mod:`imagebench.catalog`: the built-in cases, installed packages'
``imagebench.cases`` entry points, the cases declared in the fixture tree in use) is a row with
its source, then each open bundle's cases under its skill's namespace (a case that cannot run is
listed with the reason), then each fixture of the tree that no case uses (never runnable). Skill
bundles (:mod:`imagebench.bundle`) opened with :meth:`BrowserModel.open_bundle` load, run and
score exactly like built-in cases.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.case.model import Case
from imagebench.fixtures.fixture import FIXTURES_ENV, FixtureError
from napari_imagebench._answers import answer_slots
from napari_imagebench._base import Notices, PanelError
from napari_imagebench._cases import CaseDetail, CaseRow, files_listing, pixels_from, rooted, workspace_files

if TYPE_CHECKING:
    from imagebench.bundle.load import Bundle
    from imagebench.catalog import Catalog

#: How a catalog source's kind is shown in the source column.
_ROW_SOURCE = {
    "builtin": "built-in",
    "module": "module",
    "entry-point": "entry-point",
    "tree": "tree",
    "bundle": "bundle",
}


def row_matches(row: CaseRow, text: str) -> bool:
    """Whether ``row`` passes the case filter ``text``: every word of it (case-insensitive) is a
    substring of the row's label, kind or class; an empty filter passes every row."""
    haystack = f"{row.label}\n{row.kind}\n{row.case_class}".lower()
    return all(word in haystack for word in text.lower().split())


def builtin_cases() -> list[Case]:
    from imagebench.cases import all_cases

    return all_cases()


def catalog_cases(tree: Path | None) -> Catalog:
    """The panel's catalog: the built-in cases, installed packages' entry points and the cases
    declared in ``tree`` (the fixture tree in use), each with its source."""
    from imagebench.catalog import build_catalog

    return build_catalog(env_tree=tree if tree is not None else False)


class BrowserModel:
    """The case tree: its rows (cached until :meth:`refresh`), its fixture tree and its bundles."""

    def __init__(
        self,
        notices: Notices,
        *,
        cases: Callable[[], Iterable[Case]] | None = None,
        fixtures_root: str | os.PathLike[str] | None = None,
        plane_provider: Callable[[], Any] | None = None,
    ) -> None:
        """``cases``: the cases to list (a Catalog names each one's source); None: the catalog of
        the built-in cases, installed packages and the fixture tree in use (:func:`catalog_cases`)."""
        self.notices = notices
        self._cases = cases
        env = os.environ.get(FIXTURES_ENV)
        root = fixtures_root if fixtures_root is not None else env
        self.fixtures_root: Path | None = Path(root) if root else None
        self._plane_provider = plane_provider
        self.bundles: dict[str, Bundle] = {}  # open skill bundles by skill id
        self._rows: list[CaseRow] | None = None

    def set_fixtures_root(self, path: str | os.PathLike[str]) -> bool:
        """Use the fixture tree at ``path`` once every file its manifest lists is there with its
        size and sha256 (:func:`imagebench.fixtures.tree.verify_tree`); a folder that is not a tree, or a
        tree that drifted from its manifest, is refused with the reasons and the previous one kept."""
        from imagebench.fixtures.tree import verify_tree

        folder = Path(path)
        keeping = f"keeping {self.fixtures_root or 'no tree'}"
        try:
            findings = verify_tree(folder)
        except FixtureError as exc:
            self.notices.notify("error", f"not a fixture tree, {keeping}: {exc}")
            return False
        drift = [f for f in findings if f.problem != "unlisted"]
        for extra in (f for f in findings if f.problem == "unlisted"):
            self.notices.notify("warning", f"{folder}: {extra}")
        if drift:
            listed = "; ".join(str(f) for f in drift[:3]) + (f"; and {len(drift) - 3} more" if len(drift) > 3 else "")
            self.notices.notify("error", f"the fixture tree {folder} differs from its manifest, {keeping}: {listed}")
            return False
        self.fixtures_root = folder
        self._rows = None
        self.notices.notify("info", f"fixture tree: {folder}")
        return True

    def refresh(self) -> list[CaseRow]:
        self._rows = None
        return self.rows()

    def rows(self) -> list[CaseRow]:
        """Every case of the catalog, each open bundle's, then each fixture of the tree that no case
        uses (never runnable)."""
        if self._rows is not None:
            return self._rows
        from imagebench.catalog import Catalog
        from imagebench.runs.runner import TENSOR_SKIP_REASON, presents_tensor

        rows: list[CaseRow] = []
        catalog: Catalog | None = None
        try:
            listed = self._cases() if self._cases is not None else catalog_cases(self.fixtures_root)
            if isinstance(listed, Catalog):
                catalog = listed
                for warning in catalog.warnings:
                    self.notices.notify("warning", warning)
            cases = [rooted(c, self.fixtures_root) for c in listed]
        except Exception as exc:
            self.notices.notify("error", f"the case list could not be read: {type(exc).__name__}: {exc}")
            cases = []
        for case in cases:
            ok, why = case.available()
            if ok and presents_tensor(case):
                reason = self._plane_reason()
                if reason:
                    ok, why = False, f"{TENSOR_SKIP_REASON}: {reason}"
            origin = catalog.source_of(case.label) if catalog is not None else None
            kind: Any = _ROW_SOURCE[origin.kind] if origin is not None else "built-in"
            said = str(origin) if origin is not None else ""
            rows.append(
                CaseRow(case.namespace, case.case_id, case.kind, case.case_class, ok, why, kind, case, origin=said)
            )
        known = {(c.namespace, c.case_id) for c in cases}
        bundle_rows = self._bundle_rows({r.label for r in rows})
        if bundle_rows:
            from imagebench.bundle.cases import CuratedRef

            # a tree fixture a bundle case reads as its pixels is in use
            known |= {
                (r.case.fixture.skill, r.case.fixture.case_id)
                for r in bundle_rows
                if r.case is not None and isinstance(r.case.fixture, CuratedRef)
            }
        rows.extend(bundle_rows)
        rows.extend(self._tree_rows(known))
        self._rows = rows
        return rows

    def filtered(self, text: str) -> list[CaseRow]:
        """The rows the case filter ``text`` keeps (:func:`row_matches`), in the tree's order."""
        return [r for r in self.rows() if row_matches(r, text)]

    def _bundle_rows(self, taken: set[str]) -> list[CaseRow]:
        """Each open bundle's cases (runnable or not), under the bundle's skill as namespace."""
        from imagebench.runs.runner import TENSOR_SKIP_REASON, presents_tensor

        out: list[CaseRow] = []
        for bundle in self.bundles.values():
            skipped = dict(bundle.skipped)
            built = {c.case_id: rooted(c, self.fixtures_root) for c in bundle.cases}

            def row(folder_id: str, kind: str, cls: str, ok: bool, why: str, case: Case | None) -> CaseRow:
                return CaseRow(bundle.skill_id, folder_id, kind, cls, ok, why, "bundle", case, bundle.path)

            for folder in bundle.folders:
                label = f"{bundle.skill_id}/{folder.case_id}"
                case = built.get(folder.case_id)
                cls = folder.spec.case_class if folder.spec is not None else "-"
                if case is None:
                    why = skipped.get(folder.case_id) or folder.problem or "it could not be built"
                    pixels = folder.spec.pixels if folder.spec is not None else None
                    kind = "-" if pixels is None else "curated" if pixels.curated is not None else "synthetic"
                    out.append(row(folder.case_id, kind, cls, False, why, None))
                    continue
                if label in taken:
                    why = f"a built-in case is also labelled {label}; rename the bundle's case folder"
                    out.append(row(folder.case_id, case.kind, cls, False, why, None))
                    continue
                try:
                    ok, why = case.available()
                except Exception as exc:  # a broken spec is a reason, not a crash of the tree
                    ok, why = False, f"checking availability failed: {type(exc).__name__}: {exc}"
                if ok and presents_tensor(case):
                    reason = self._plane_reason()
                    if reason:
                        ok, why = False, f"{TENSOR_SKIP_REASON}: {reason}"
                out.append(row(folder.case_id, case.kind, case.case_class, ok, why, case))
        return out

    def _tree_rows(self, known: set[tuple[str, str]]) -> list[CaseRow]:
        if self.fixtures_root is None:
            return []
        from imagebench.fixtures.tree import load_manifest

        try:
            manifest = load_manifest(self.fixtures_root)
        except FixtureError as exc:
            self.notices.notify("warning", f"the fixture tree cannot be listed: {exc}")
            return []
        return [
            CaseRow(
                e.skill,
                e.case_id,
                "curated",
                "-",
                False,
                "the tree has this fixture, but no case in this suite uses it: nothing could verify a run",
                "tree",
            )
            for e in manifest.fixtures
            if (e.skill, e.case_id) not in known
        ]

    def _plane_reason(self) -> str:
        """Why no data plane can serve tensor layers here ('' when one can)."""
        if self._plane_provider is not None:
            return ""
        from imagebench.plane import flight_missing

        return flight_missing() or ""

    def row(self, label: str) -> CaseRow:
        for r in self.rows():
            if r.label == label:
                return r
        raise self.notices.fail(f"no case labelled {label!r}")

    # ---------------------------------------------------------------- skill bundles

    def open_bundle(self, path: str | os.PathLike[str]) -> Bundle:
        """Read the skill bundle at ``path`` and add its cases to the tree.

        Its runnable cases join the tree under the skill's namespace; a case that cannot run is
        listed with the reason. Every warning :func:`imagebench.bundle.load_bundle` raises becomes
        a warning notice (never a failure). A folder that is not a bundle is refused with a notice
        and PanelError, and the panel keeps what it had. Opening a bundle of a skill that already
        has one open replaces it (re-opening the same folder re-reads it).
        """
        from imagebench.bundle.load import BundleError, load_bundle

        folder = Path(path)
        try:
            bundle = load_bundle(folder)
        except BundleError as exc:
            raise self.notices.fail(f"not a skill bundle: {exc}") from None
        except Exception as exc:  # an unreadable folder: said, never a crash of the panel
            raise self.notices.fail(f"the bundle {folder} could not be read: {type(exc).__name__}: {exc}") from None
        if not bundle.folders and bundle.claims.source == "none":
            raise self.notices.fail(
                f"not a skill bundle: {folder} holds neither evals.json, evals/risk-map.md nor evals/fixtures/"
            )
        previous = self.bundles.get(bundle.skill_id)
        if previous is not None and previous.path.resolve() != folder.resolve():
            self.notices.notify("warning", f"bundle {bundle.skill_id}: {folder} replaces the bundle at {previous.path}")
        self.bundles[bundle.skill_id] = bundle
        self._rows = None
        for warning in bundle.warnings:
            self.notices.notify("warning", f"bundle {bundle.skill_id}: {warning}")
        self.notices.notify(
            "info",
            f"bundle {bundle.skill_id} from {folder}: {len(bundle.cases)} runnable case(s), "
            f"{len(bundle.skipped)} cannot run, {len(bundle.warnings)} warning(s)",
        )
        return bundle

    def detail(self, label: str) -> CaseDetail:
        r = self.row(label)
        if r.case is None:
            raise PanelError(f"{label}: {r.reason}")
        from imagebench.case.session import case_prompt
        from imagebench.executor.calibrated import calibration_line

        case = r.case
        return CaseDetail(
            label=case.label,
            about=case.about,
            kind=case.kind,
            case_class=case.case_class,
            available=r.available,
            reason=r.reason,
            prompt=case_prompt(case),
            persona=case.persona,
            layers=tuple(case.layers),
            collect=tuple(case.collect),
            limits=dict(case.tolerances),
            timeout_s=case.timeout_s,
            bundle=r.bundle,
            files=files_listing(workspace_files(case)),
            has_reference=case.reference is not None,
            at_viewer=tuple(f"{slot.name}: {slot.how()}" for slot in answer_slots(case)),
            pixels_from=pixels_from(case),
            citation=getattr(case.source(), "citation", None) or "",
            origin=r.origin,
            calibration=calibration_line(case),
        )
