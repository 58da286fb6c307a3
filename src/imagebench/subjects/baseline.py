"""``baseline``: the case's naive baseline, the first thing a person would try; it must fail."""

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
class BaselineSubject(SubjectKind):
    """The case's naive baseline (``case.baseline(session)``): the first thing a person would try.

    Every built-in case declares one, and every case must fail it (docs/cases.md, the calibration
    table): a limit that a naive answer meets does not measure the skill.
    """

    prefix = "baseline"
    forms = (("baseline", "the case's naive baseline (identity, a global threshold, no correction); it must fail"),)
    given_name: str | None = None  # --subject-name

    @property
    def name(self) -> str:
        return self.given_name or "baseline"

    @classmethod
    def parse(cls, spec: str, *, sandbox: SandboxPolicy | None, isolate: bool, mcp: bool) -> BaselineSubject:
        return cls()

    def spec(self) -> str:
        return "baseline"

    def cannot_work(self, case: Case) -> str | None:
        return f"case {case.label} has no naive baseline" if case.baseline is None else None

    def bind(self, case: Case, context: UnitContext) -> Callable[[Session], None]:
        why = self.cannot_work(case)
        if why is not None:
            raise SubjectError(why)
        return case.baseline

    def __call__(self, session: Session) -> Any:
        raise SubjectError(
            f"the baseline subject works through the case it is bound to; call bind(case, context) first "
            f"(session {session.label})"
        )
