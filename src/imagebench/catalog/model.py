"""A catalog of cases: every case with the source it came from, one label one case.

A :class:`Source` says where a case comes from (the built-in suite, a module given with
``--cases``, a module an installed package names in the ``imagebench.cases`` entry-point group, a
skill bundle, the cases declared in a fixture tree) and how to give it again; a :class:`Catalog`
holds the cases in order, refuses a label two sources provide, and keeps the skills and builders
the modules declared and the warnings met while gathering them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from imagebench.records import CaseSourceRecord, SourceKind

if TYPE_CHECKING:
    from imagebench.case.model import Case, Skill

#: The entry-point group an installed package names its case modules in.
ENTRY_POINT_GROUP = "imagebench.cases"

#: The built-in suite's source name (imagebench.cases).
BUILTIN_NAME = "imagebench.cases"


class CatalogError(ValueError):
    """The cases cannot be gathered: a label two sources provide, a module that fails to import or
    does not follow the protocol, a bundle or tree that cannot be read (names the source)."""


@dataclass(frozen=True)
class Source:
    """Where a case comes from, and enough to open that place again.

    ``name`` is the module's name (builtin, module), the entry point's name, the bundle's skill id
    or the tree's root; ``module`` the module imported (module, entry-point); ``path`` the file of a
    module given as a ``.py`` file (its folder is put on ``sys.path``), the bundle's folder or the tree's root;
    ``dist`` the distribution that declares an entry point.
    """

    kind: SourceKind
    name: str
    module: str | None = None
    path: str | None = None
    dist: str | None = None

    def __str__(self) -> str:
        if self.kind == "builtin":
            return "the built-in cases"
        if self.kind == "module":
            return f"module {self.module}" + (f" (from {self.path})" if self.path else "")
        if self.kind == "entry-point":
            return f"entry point {self.name} = {self.module}" + (f" (distribution {self.dist})" if self.dist else "")
        if self.kind == "bundle":
            return f"bundle {self.name} ({self.path})"
        return f"tree {self.path}"

    @property
    def short(self) -> str:
        """One word or two for a table column: ``built-in``, ``module my_cases``, ``tree /data``."""
        if self.kind == "builtin":
            return "built-in"
        if self.kind in ("module", "entry-point"):
            return f"{self.kind} {self.name if self.kind == 'entry-point' else self.module}"
        return f"{self.kind} {self.path if self.kind == 'tree' else self.name}"

    @property
    def flag(self) -> str:
        """The command-line flag that opens this source again ('' for the built-in cases)."""
        if self.kind == "builtin":
            return ""
        if self.kind == "module":
            return f"--cases {self.path or self.module}"
        if self.kind == "entry-point":
            return f"--cases {self.module} (or install {self.dist or 'the package that declares it'} again)"
        if self.kind == "bundle":
            return f"--bundle {self.path}"
        return f"--tree {self.path}"

    def record(self, cases: Sequence[str] = ()) -> CaseSourceRecord:
        return CaseSourceRecord(
            kind=self.kind, name=self.name, module=self.module, path=self.path, dist=self.dist, cases=list(cases)
        )

    @classmethod
    def from_record(cls, record: CaseSourceRecord) -> Source:
        return cls(kind=record.kind, name=record.name, module=record.module, path=record.path, dist=record.dist)


@dataclass
class Catalog:
    """Cases in order, each with its :class:`Source`; iterating yields the cases."""

    sources: list[Source] = field(default_factory=list)
    skills: dict[str, Skill] = field(default_factory=dict)
    builders: dict[str, Callable[..., Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # label -> why a source holds that case but cannot build it (a bundle's skipped cases)
    unavailable: dict[str, str] = field(default_factory=dict)
    # the sources given by name (--cases, --bundle, --tree), in order: what `run` selects from
    named: list[Source] = field(default_factory=list)
    _cases: dict[str, Case] = field(default_factory=dict)
    _origin: dict[str, Source] = field(default_factory=dict)

    def add_source(self, source: Source) -> None:
        if source not in self.sources:
            self.sources.append(source)

    def add(self, case: Case, source: Source) -> None:
        """Add ``case`` from ``source``; a label another source (or this one) already gave is a CatalogError."""
        label = case.label
        if label in self._cases:
            first = self._origin[label]
            where = f"{first} and {source}" if first != source else f"{source}, twice"
            raise CatalogError(f"case {label} is provided by {where}; a label names one case: rename one of them")
        self.add_source(source)
        self._cases[label] = case
        self._origin[label] = source

    @property
    def cases(self) -> list[Case]:
        return list(self._cases.values())

    @property
    def labels(self) -> list[str]:
        return list(self._cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self._cases)

    def __contains__(self, label: object) -> bool:
        return label in self._cases

    def offered(self) -> list[Case]:
        """The cases of the sources given by name when there are any, else every case."""
        if not self.named:
            return self.cases
        return [c for c in self._cases.values() if self._origin[c.label] in self.named]

    def get(self, label: str) -> Case | None:
        return self._cases.get(label)

    def source_of(self, label: str) -> Source:
        """The source of the case ``label`` (KeyError when the catalog has no such case)."""
        return self._origin[label]

    def records(self, labels: Sequence[str]) -> list[CaseSourceRecord]:
        """What ``run.json`` keeps of where ``labels`` came from: each source that gave one, in the
        catalog's order, with the labels it gave (KeyError for a label the catalog lacks)."""
        given: dict[Source, list[str]] = {}
        for label in labels:
            given.setdefault(self._origin[label], []).append(label)
        return [s.record(given[s]) for s in self.sources if s in given]
