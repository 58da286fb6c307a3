"""What every subject is, and what a subject *kind* owns about its subjects.

A subject is anything with a ``name`` (usable as a folder name) that can be called with a
:class:`~imagebench.case.session.Session` and leaves what the case asks for in
``session.namespace`` (:class:`Subject`). A subject that needs more than the session (the case,
the sample folder, the time limit) defines ``bind(case, context) -> callable(session)``.

A built-in subject is also a :class:`SubjectKind`: its class owns its spec grammar
(:attr:`~SubjectKind.prefix`, :attr:`~SubjectKind.forms`, :meth:`~SubjectKind.parse`), its
spec string (:meth:`~SubjectKind.spec`), the options that rebuild it as confined as it is
(:meth:`~SubjectKind.options`), how it is confined (``sandbox_kind``, ``limits``,
``out_of_process``), its receipt entry (:meth:`~SubjectKind.describe`), what its identity digests
(:meth:`~SubjectKind.identity_parts`: the code it runs) and how it takes a display name
(:meth:`~SubjectKind.named`, ``--subject-name``). The executor, the receipt, the run record and
the panel ask the subject; none of them reads a spec's prefix.
:func:`~imagebench.subjects.registry.subject_kind` registers a kind for parsing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from imagebench.usage.budget import Budget

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.sandbox.policy import SandboxPolicy

Confinement = Literal["bubblewrap", "none", "in-process"]


class SubjectError(ValueError):
    """A subject spec is invalid, or a subject cannot work this case (a harness matter, never a score)."""


class SubjectTimeout(Exception):
    """The subject ran past its time limit."""


class SubjectResourceLimit(Exception):
    """The subject ran into one of its limits (memory, processes, /tmp, workspace, CPU, file size)
    and was ended for it; the message starts ``resource-limit: <which>``."""


class SubjectBudgetExceeded(Exception):
    """The subject spent more than its budget (``--max-tokens``/``--max-cost``) and its turn was
    ended for it; the message starts ``budget-exceeded:`` and names the budget and the figure."""


class SubjectInfraError(RuntimeError):
    """An agent's infrastructure failed as its own CLI reported it (the network, its login, a rate
    limit, the provider's outage): the sample ends ``infra-error``, excluded and counted, never a zero."""


class SubjectHarnessError(RuntimeError):
    """The harness itself failed while running a subject (workspace, disk, ...): never the subject's fault."""


class SubjectNotAttempted(RuntimeError):
    """The subject never took up the case (a served MCP client that called no case tool, e.g. a bare
    ``tools/list`` probe): the sample is ``not-attempted``, excluded from every figure and counted."""


@runtime_checkable
class Subject(Protocol):
    """Works one sample: reads the session, leaves its answers in ``session.namespace``."""

    name: str

    def __call__(self, session: Session) -> None: ...


@dataclass(frozen=True)
class UnitContext:
    """What the runner tells a subject about one sample beyond the session."""

    sample_dir: Path
    timeout_s: float
    tensor_url: str | None = None
    # the read token that goes with tensor_url ($IMAGEBENCH_TENSOR_TOKEN): its sample's ids only
    tensor_token: str | None = None
    # A folder every workspace gets a copy of as ``files/`` (a bundle case's files/), and
    # environment variables for a command (a bundle case's setup.env; never the withheld ones).
    files: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    # More paths a sandboxed command must not see where they lie inside what it is shown (the
    # run folder, a bundle); the checkout, the packages and $IMAGEBENCH_FIXTURES always are.
    hidden: tuple[Path, ...] = ()
    # What the sample may spend (imagebench.usage.Budget: --max-tokens, --max-cost); None: no
    # budget. A kind that can watch its agent's usage as it goes ends the turn at it
    # (SubjectBudgetExceeded); the runner checks the usage it was left with in any case.
    budget: Budget | None = None


@dataclass(frozen=True)
class AgentOptions:
    """What an agent CLI subject (:mod:`imagebench.subjects.agents`) is given beyond its sandbox:
    ``retries`` (``--retries N``: how many times a turn that ended in an infrastructure failure is
    worked again, fresh) and ``home`` (``--subject-home DIR``: a template HOME the harness copies
    into the subject's private HOME; config that is not a secret, read by the harness, never
    followed through a link)."""

    retries: int = 0
    home: Path | None = None

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or not 0 <= self.retries <= 10:
            raise SubjectError(f"--retries {self.retries!r}: expected a whole number from 0 to 10")

    def to_record(self) -> dict[str, object]:
        return {"retries": self.retries, "home": None if self.home is None else str(self.home)}

    @classmethod
    def from_record(cls, raw: object) -> AgentOptions:
        """What :meth:`to_record` wrote; ValueError naming the field that is not as expected."""
        if not isinstance(raw, dict) or set(raw) - {"retries", "home"}:
            raise ValueError(f"expected an object with 'retries' and 'home', got {raw!r}")
        retries, home = raw.get("retries", 0), raw.get("home")
        if isinstance(retries, bool) or not isinstance(retries, int):
            raise ValueError(f"field 'retries' is {retries!r}, expected a whole number")
        if home is not None and not isinstance(home, str):
            raise ValueError(f"field 'home' is {home!r}, expected a path or null")
        try:
            return cls(retries=retries, home=None if home is None else Path(home))
        except SubjectError as exc:
            raise ValueError(f"field 'retries': {exc}") from None

    def __bool__(self) -> bool:
        return bool(self.retries) or self.home is not None


_SUBJECT_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9_])?$")
#: the files every run folder holds beside its subject folders (imagebench.runs.layout and
#: imagebench.runs.journal name them): a subject named so would clash with one
RESERVED_NAMES = ("run.json", "receipt.json", "report.html", "journal.jsonl")


def check_subject_name(name: object) -> str:
    """``name`` when it may be a subject's display name (``--subject-name``): a safe folder name of
    1 to 64 letters, digits, ``.``, ``_`` and ``-`` that starts with a letter or digit, ends with a
    letter, digit or ``_``, and is not a file every run folder holds; else SubjectError saying so."""
    if not isinstance(name, str) or not _SUBJECT_NAME.match(name):
        raise SubjectError(
            f"subject name {name!r}: expected 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit and ending with a letter, digit or '_' (it names the run's subject folder)"
        )
    if name.lower() in RESERVED_NAMES:
        raise SubjectError(f"subject name {name!r}: every run folder holds a file of that name; choose another")
    return name


class SubjectKind:
    """The base of every built-in subject: what its kind owns (see the module's docstring).

    A kind sets :attr:`prefix` (``"reference"`` for a spec that is exactly that word,
    ``"python:"`` for a spec that starts with it), :attr:`forms` (the grammar lines ``valid_forms``
    prints) and :attr:`flags` (the options of ``parse_subject`` beyond ``sandbox`` that it takes:
    ``"isolate"``, ``"mcp"``), and implements :meth:`parse` and :meth:`spec`.
    """

    prefix: ClassVar[str] = ""
    forms: ClassVar[tuple[tuple[str, str], ...]] = ()
    flags: ClassVar[frozenset[str]] = frozenset()
    #: whether the figures it notes as ``measured`` (session.notes["usage"]) are the harness's own
    #: count: only a kind whose turn is an agent loop the harness drives (inspect_ai's) says so;
    #: every other kind's account is the agent's own and is kept as ``reported``
    measures_usage: ClassVar[bool] = False
    #: the display name given with ``--subject-name`` (None: the kind's own name); a built-in kind
    #: is a dataclass with this field, and its ``name`` is it when set
    given_name: str | None = None

    @classmethod
    def matches(cls, spec: str) -> bool:
        return bool(cls.prefix) and (spec.startswith(cls.prefix) if cls.prefix.endswith(":") else spec == cls.prefix)

    @classmethod
    def parse(cls, spec: str, *, sandbox: SandboxPolicy | None, isolate: bool, mcp: bool) -> SubjectKind:
        """The subject ``spec`` (which :meth:`matches`) names; SubjectError saying what is wrong.
        A kind that is never written as a spec (the served MCP subject) keeps this refusal.
        A kind whose :attr:`flags` hold ``"agent"`` also takes ``agent=`` (:class:`AgentOptions`)."""
        raise SubjectError(f"subject {spec!r}: {cls.__name__} is not made from a spec string")

    def spec(self) -> str:
        """The spec string that :func:`~imagebench.subjects.parse_subject` turns back into this
        subject (with :meth:`options`); SubjectError when no spec can (it cannot travel)."""
        raise SubjectError(f"subject {getattr(self, 'name', type(self).__name__)!r} has no spec string")

    def options(self) -> dict[str, Any]:
        """The keyword arguments of ``parse_subject`` that, with :meth:`spec`, rebuild this subject
        as confined as it is (a dask worker, ``--resume``)."""
        return {}

    def cannot_work(self, case: Any) -> str | None:
        """Why it cannot work ``case`` at all (a reference subject on a case without one), or None."""
        return None

    @property
    def sandbox_kind(self) -> Confinement:
        """How it is confined, as a run records it: ``bubblewrap``, ``none`` or ``in-process``."""
        return "in-process"

    @property
    def limits(self) -> dict[str, int | None] | None:
        """What a confined subject may use (imagebench.sandbox.limits.Limits as JSON); None: not confined."""
        return None

    @property
    def out_of_process(self) -> bool:
        """Whether it works in a child process (``--workers`` then drives it from threads)."""
        return False

    @property
    def env_pass(self) -> tuple[str, ...]:
        """The names of host variables it is given (never their values)."""
        return ()

    @property
    def trusted(self) -> bool:
        """Whether it is code the bench trusts (it runs in the harness's process: the reference, a
        baseline, a ``python:`` solver). An untrusted subject (a command, an agent, an isolated
        function) is sealed by default: its procedural fixtures are built from a fresh secret."""
        return self.sandbox_kind == "in-process"

    @classmethod
    def describe_spec(cls, spec: str) -> dict[str, Any]:
        """The receipt entry of the subject ``spec`` names: never a command's arguments,
        environment or paths."""
        return {"form": cls.prefix.rstrip(":") or "other"}

    def describe(self) -> dict[str, Any]:
        """Its receipt entry (as :meth:`describe_spec`, with its folder name)."""
        return {"form": self.prefix.rstrip(":") or "other", "name": getattr(self, "name", type(self).__name__)}

    def identity_parts(self) -> dict[str, Any]:
        """What its identity digests: the code it runs, as JSON without a machine path
        (:func:`imagebench.subjects.identity.identity_of` hashes it into ``code``). A kind that runs
        code of its own digests it (``python:``: the module's package tree; ``command:``: the command
        line and the trees it is shown); this default is the kind and the digest of its spec, which
        is all a subject whose code is the bench's or the case's own (reference, nop, baseline) is."""
        parts: dict[str, Any] = {"kind": self.prefix.rstrip(":") or type(self).__name__}
        try:
            parts["spec_sha256"] = hashlib.sha256(self.spec().encode("utf-8")).hexdigest()
        except SubjectError:
            pass  # no spec string: the kind alone
        return parts

    def named(self, name: str) -> SubjectKind:
        """This subject under the display name ``name`` (``--subject-name``; :func:`check_subject_name`):
        the name of its folder in the run and of ``run.json``'s subject. A dataclass kind with a
        ``given_name`` field (every built-in one) is copied with it set; another kind refuses."""
        check_subject_name(name)
        if dataclasses.is_dataclass(self) and any(f.name == "given_name" for f in dataclasses.fields(self)):
            return dataclasses.replace(self, given_name=name)  # type: ignore[type-var]
        raise SubjectError(
            f"subject {getattr(self, 'name', type(self).__name__)!r}: its kind {type(self).__name__} takes no "
            "display name (--subject-name)"
        )
