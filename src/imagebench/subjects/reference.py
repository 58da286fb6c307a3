"""``reference``: the case's own reference solution, in this process (the bench's own code)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imagebench.subjects.base import SubjectError, SubjectKind, UnitContext
from imagebench.subjects.registry import subject_kind

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.case.session import Session
    from imagebench.sandbox.policy import SandboxPolicy


@subject_kind
@dataclass(frozen=True)
class ReferenceSubject(SubjectKind):
    """The case's own reference solution (``case.reference(session)``)."""

    prefix = "reference"
    forms = (("reference", "the case's own reference solution"),)
    given_name: str | None = None  # --subject-name

    @property
    def name(self) -> str:
        return self.given_name or "reference"

    @classmethod
    def parse(cls, spec: str, *, sandbox: SandboxPolicy | None, isolate: bool, mcp: bool) -> ReferenceSubject:
        return cls()

    def spec(self) -> str:
        return "reference"

    def cannot_work(self, case: Case) -> str | None:
        return f"case {case.label} has no reference solution" if case.reference is None else None

    def bind(self, case: Case, context: UnitContext) -> Callable[[Session], None]:
        why = self.cannot_work(case)
        if why is not None:
            raise SubjectError(why)
        return case.reference

    def __call__(self, session: Session) -> Any:
        raise SubjectError(
            f"the reference subject works through the case it is bound to; call bind(case, context) first "
            f"(session {session.label})"
        )
