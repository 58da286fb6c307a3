"""``nop``: leaves nothing. Every case must fail it: a case a do-nothing subject passes measures nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from imagebench.subjects.base import SubjectKind
from imagebench.subjects.registry import subject_kind

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.sandbox.policy import SandboxPolicy


@subject_kind
@dataclass(frozen=True)
class NopSubject(SubjectKind):
    """Leaves nothing."""

    prefix = "nop"
    forms = (("nop", "does nothing; a floor that never passes"),)
    given_name: str | None = None  # --subject-name

    @property
    def name(self) -> str:
        return self.given_name or "nop"

    @classmethod
    def parse(cls, spec: str, *, sandbox: SandboxPolicy | None, isolate: bool, mcp: bool) -> NopSubject:
        return cls()

    def spec(self) -> str:
        return "nop"

    def __call__(self, session: Session) -> None:
        return None
