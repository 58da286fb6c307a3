"""The case tree's vocabulary: a row per case (and whether it can run here), and what the
Detail tab says about a case (everything a subject is told, never truth).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from imagebench.case.model import Case, Collect, Layer
from imagebench.fixtures.specs import OnDisk

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True)
class CaseRow:
    """One row of the case tree: a case (or a tree fixture no case uses) and whether it can run here."""

    namespace: str
    case_id: str
    kind: str
    case_class: str
    available: bool
    reason: str
    source: Literal["built-in", "module", "entry-point", "tree", "bundle"]
    case: Case | None = None
    bundle: Path | None = None  # the bundle folder a "bundle" row was read from
    origin: str = ""  # where the case comes from, in words (imagebench.catalog.Source)

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.case_id}"


@dataclass(frozen=True)
class CaseDetail:
    """What the detail pane shows about a case: everything a subject is told, never truth."""

    label: str
    about: str
    kind: str
    case_class: str
    available: bool
    reason: str
    prompt: str
    persona: str
    layers: tuple[Layer, ...]
    collect: tuple[Collect, ...]
    limits: Mapping[str, float]
    timeout_s: float
    bundle: Path | None = None
    files: tuple[str, ...] = ()  # what a bundle case hands the subject under session.workspace/files/
    has_reference: bool = True
    at_viewer: tuple[str, ...] = ()  # how a person gives each answer (the Answer tab)
    pixels_from: str = ""  # where the case's pixels come from: generated, the package's data, a tree
    citation: str = ""  # a curated case's citation (its provenance is shown in the report, after scoring)
    origin: str = ""  # where the case comes from: the built-in cases, a module, an installed package, a tree
    calibration: str = ""  # what its latest calibration says (imagebench.executor.calibrated.calibration_line)

    def text(self) -> str:
        lines = [
            f"{self.label}  ({self.kind}, {self.case_class})",
            "available" if self.available else f"unavailable: {self.reason}",
        ]
        if self.pixels_from:
            lines.append(f"pixels: {self.pixels_from}")
        if self.citation:
            lines.append(f"cite: {self.citation}")
        if self.bundle is not None:
            lines.append(f"from the bundle {self.bundle}")
        elif self.origin:
            lines.append(f"from {self.origin}")
        if not self.has_reference:
            lines.append("no reference solution: work it yourself or run a python: solver")
        if self.calibration:
            lines.append(self.calibration)
        if self.about:
            lines += ["", self.about]
        lines += ["", "Persona:", self.persona or "(none)", "", "Prompt:", self.prompt.rstrip(), "", "Layers:"]
        for layer in self.layers:
            extra = f", chunks {tuple(layer.chunks)}" if layer.chunks else ""
            lines.append(f"  {layer.name}: {layer.kind}, presented as {layer.presentation}{extra}")
        if self.at_viewer:
            lines += ["", "You, at the viewer (the Answer tab):"]
            lines += [f"  {line}" for line in self.at_viewer]
        lines += ["", "What is collected (a program binds these names or writes outputs/<name>):"]
        for c in self.collect:
            recorded = " [recorded by the harness from its skill tool or MCP session; never left by the subject]"
            lines.append(
                f"  {c.name} ({c.what})" + (f": {c.description}" if c.description else "") + (recorded if c.recorded else "")
            )
        lines += ["", "Metrics (pass when value <= limit):"]
        if self.limits:
            lines += [f"  {name} <= {limit:g}" for name, limit in self.limits.items()]
        else:
            lines.append("  (no limits declared)")
        lines.append(f"Time limit: {self.timeout_s:g} s")
        if self.files:
            lines += ["", "Files (a read-only copy under session.workspace/files/):"]
            lines += [f"  {name}" for name in self.files]
        return "\n".join(lines)


def rooted(case: Case, root: Path | None) -> Case:
    """``case`` reading its curated pixels from ``root`` when its spec follows $IMAGEBENCH_FIXTURES."""
    spec = case.fixture
    if root is None:
        return case
    if isinstance(spec, OnDisk) and spec.root is None:
        return replace(case, fixture=OnDisk(tolerance=dict(spec.tolerance), root=root))
    if case.meta.get("bundle") is not None:  # a bundle case whose pixels are a curated tree case
        from imagebench.bundle.cases import CuratedRef

        if isinstance(spec, CuratedRef) and spec.root is None:
            return replace(case, fixture=replace(spec, root=str(root)))
    return case


def pixels_from(case: Case) -> str:
    """Where ``case``'s pixels come from, in words: generated, the data shipped in the package, or
    a fixture tree (the tree shows which)."""
    spec = case.fixture
    builder = getattr(spec, "builder_name", None)
    if builder is not None:
        return f"generated by {builder} (seed {getattr(spec, 'seed', '?')})"
    root_of = getattr(spec, "tree_root", None)
    root = root_of() if callable(root_of) else getattr(spec, "root", None)
    if root is None:
        return "a fixture tree ($IMAGEBENCH_FIXTURES is not set)"
    root = Path(root).resolve()
    import imagebench

    packaged = (Path(imagebench.__file__).resolve().parent / "data").resolve()
    if root == packaged or packaged in root.parents:
        return f"the data shipped in the package ({root})"
    return f"the fixture tree {root}"


def workspace_files(case: Case) -> Path | None:
    """The folder a bundle case hands its subject as ``files/`` (``case.meta["workspace_files"]``)."""
    files = case.meta.get("workspace_files")
    return Path(files) if files else None


def files_listing(folder: Path | None) -> tuple[str, ...]:
    if folder is None or not folder.is_dir():
        return ()
    return tuple(
        p.relative_to(folder).as_posix() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".gitkeep"
    )
