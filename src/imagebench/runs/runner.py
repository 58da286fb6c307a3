"""One unit of work, ``(case, sample)``, in three phases: open, work, finish.
Long because the three phases share one Unit and their failure paths; splitting them would scatter that state.

- :func:`open_unit`: the fixture (built here, or handed over already built), its presentation
  (the data plane's ids for a tensor layer) and a fresh session on its data;
- :func:`work_unit`: the subject's turn, under its time limit;
- :func:`finish_unit`: collect what the subject left, verify it, write the sample's summary.

:func:`run_unit` is those three calls. The serial loop and the dask workers
(:mod:`imagebench.executor`) call :func:`run_unit`; the napari bench panel calls the three
phases itself, because a person's turn happens between them. Nothing else repeats a phase, so a
sample scored in the panel and one scored headless go through the same lines.

Every sample ends in exactly one :data:`imagebench.records.Status`:

- ``skipped``: the fixture is not available here, or the case presents a tensor and no data plane runs;
- ``harness-error``: building the fixture, the data plane, opening the session, binding the subject,
  the verifier or writing the report failed (never the subject's fault);
- ``timeout``: the subject ran past its limit;
- ``budget-exceeded``: it spent more than its budget (``--max-tokens``/``--max-cost``), as the
  harness measured it or the agent reported it (:mod:`imagebench.runs.spent`);
- ``infra-error``: an agent CLI reported that its infrastructure failed (network, login, rate limit);
- otherwise the verifier's outcome decides (``ok``, ``wrong-answer``, ``no-result``,
  ``unscorable-result``, ``blocked``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.case.session import Session
    from imagebench.fixtures.fixture import Attempt, Fixture, Outcome
    from imagebench.records import SampleSummary
    from imagebench.subjects import Subject, SubjectRun, UnitContext
    from imagebench.usage import Budget, Usage

TENSOR_SKIP_REASON = "this case presents a layer as tensor and no data plane is running"
OVERWRITTEN_FLAG = "fixture-overwritten"  # the data plane's flag (and the sample's status) for a changed fixture


# --------------------------------------------------------------------------- the data-plane seam


@runtime_checkable
class Plane(Protocol):
    """What a unit needs from a running data plane (the tensor presentation).

    ``present`` uploads ``fixture.data`` for the case's tensor layers (never truth) and returns
    ``{layer name: array id}``; ``after_sample`` returns flags for the sample's summary (for
    instance ``fixture-overwritten`` when an uploaded fixture changed during the sample).
    """

    url: str
    client: Any

    def present(self, case: Case, fixture: Fixture) -> Mapping[str, str]: ...

    def after_sample(self, case: Case, fixture: Fixture) -> list[str]: ...


def presents_tensor(case: Case) -> bool:
    return any(layer.presentation == "tensor" for layer in case.layers)


# --------------------------------------------------------------------------- fixtures, once per run (or per seed)


@dataclass
class PreparedFixture:
    """A case's fixture built once for a run, or why it could not be: shared by all its samples
    (by the samples of one seed in a sealed run)."""

    fixture: Fixture | None
    status: str | None = None  # "skipped" or "harness-error" when there is no fixture
    reason: str = ""
    build_s: float = 0.0
    # the truth as built, before any subject saw the fixture; every sample is checked against it
    truth_digest: str = ""
    # the seed it was built from when that is not the case's own (a sealed run's); None otherwise
    seed: int | None = None
    # what the fixture is (see :func:`fixture_identity`), taken once for all the samples that share it
    identity: str | None = None

    def __post_init__(self) -> None:
        if self.fixture is not None and not self.truth_digest:
            try:
                self.truth_digest = truth_digest(self.fixture)
            except Exception as exc:
                self.fixture, self.status = None, "harness-error"
                self.reason = f"the fixture's truth cannot be digested: {type(exc).__name__}: {exc}"


def prepare_fixture(
    case: Case, *, plane: Plane | None | object = None, seed: int | None = None, definition: str | None = None
) -> PreparedFixture:
    """Check availability and build the fixture; never raises (a failure is a status with a reason).

    A case that presents a tensor is skipped when ``plane`` is None (pass the run's plane, or any
    non-None object to build it where the plane is checked later). ``seed`` builds a procedural
    fixture from that seed instead of the case's own (a sealed run's, :mod:`imagebench.runs.sealed`);
    it is kept in the result's ``seed``. ``definition`` is the case's definition fingerprint when
    the caller has it (a case unpickled in another process may not be able to read its own source):
    the fixture cache's key."""
    if presents_tensor(case) and plane is None:
        return PreparedFixture(None, "skipped", TENSOR_SKIP_REASON, seed=seed)
    ok, why = case.available()
    if not ok:
        return PreparedFixture(None, "skipped", why or "the fixture is not available on this machine", seed=seed)
    start = time.perf_counter()
    try:
        fixture = _build(case, seed, definition)
    except Exception as exc:
        return PreparedFixture(
            None,
            "harness-error",
            f"building the fixture failed: {type(exc).__name__}: {exc}",
            time.perf_counter() - start,
            seed=seed,
        )
    return PreparedFixture(fixture, build_s=time.perf_counter() - start, seed=seed)


def _build(case: Case, seed: int | None, definition: str | None = None) -> Fixture:
    from imagebench.fixtures.specs import Procedural

    if seed is None:
        spec = case.fixture
        if not isinstance(spec, Procedural):
            return case.build()
        # a built procedural fixture is kept once, under everything it is made from
        from imagebench.fixtures import cache

        if cache.cache_root() is None:
            return case.build()
        from imagebench.fixtures.digest import FingerprintError
        from imagebench.runs.fingerprint import definition_fingerprint

        if definition is None:
            try:
                definition = definition_fingerprint(case)
            except FingerprintError:  # a case with no stable identity is simply built every time
                return case.build()
        fixture = cache.load(case.label, definition, spec.seed)
        if fixture is None:
            fixture = case.build()
            cache.store(case.label, definition, spec.seed, fixture)
        return fixture

    spec = case.fixture
    if not isinstance(spec, Procedural):
        raise TypeError(f"a seed was given, but the fixture is {type(spec).__name__}, not built from a seed")
    return spec.build(case.namespace, case.case_id, seed=seed)


# --------------------------------------------------------------------------- the unit


@dataclass
class Unit:
    """One ``(case, sample)`` between its phases: what :func:`open_unit` made ready.

    ``failure`` is ``(status, reason)`` when it could not be opened; the unit then skips its
    work and :func:`finish_unit` writes that status. ``run_dir`` and ``sample`` may be set after
    opening (the panel opens a person's unit at Load and learns its sample number at Score).
    ``seed`` is the seed its fixture was built from when that is not the case's own (a sealed
    run's); the summary records it once the sample is scored.
    """

    case: Case
    subject_name: str
    prepared: PreparedFixture
    timeout_s: float
    run_dir: Path | None = None
    sample: int | None = None
    seed: int | None = None
    plane: Plane | None = None
    session: Session | None = None
    tensors: dict[str, str] | None = None
    failure: tuple[str, str] | None = None
    times: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    files_copy: Path | None = None  # a read-only copy of a bundle case's files/ for in-process work
    confinement: str | None = None  # how the subject was confined (subjects.confinement_of); None: a person
    limits: dict[str, int | None] | None = None  # what a confined subject could use (subjects.limits_of)
    budget: Budget | None = None  # what the sample may spend (--max-tokens, --max-cost)
    measures_usage: bool = False  # its subject's noted usage is the harness's measure (SubjectKind.measures_usage)
    usage: Usage | None = None  # what it spent (imagebench.runs.spent), once its turn has ended

    @property
    def fixture(self) -> Fixture | None:
        return self.prepared.fixture

    @property
    def sample_dir(self) -> Path:
        from imagebench.runs.layout import sample_dir

        if self.run_dir is None or self.sample is None:
            raise ValueError(f"unit {self.case.label}: no run folder and sample number yet")
        return sample_dir(self.run_dir, self.subject_name, self.case, self.sample)

    def release(self) -> None:
        """Remove the read-only copy of the case's files (idempotent)."""
        if self.files_copy is not None:
            from imagebench.subjects import remove_readonly_files

            remove_readonly_files(self.files_copy)
            self.files_copy = None


def _as_prepared(
    fixture: Fixture | PreparedFixture | None, case: Case, plane: Plane | None, seed: int | None
) -> PreparedFixture:
    from imagebench.fixtures.fixture import Fixture

    if isinstance(fixture, PreparedFixture):
        if fixture.fixture is not None and fixture.seed != seed:
            return PreparedFixture(
                None,
                "harness-error",
                f"the fixture handed over was built from seed {fixture.seed}, not this sample's seed {seed}",
            )
        return fixture
    if isinstance(fixture, Fixture):
        return PreparedFixture(fixture, seed=seed)
    if fixture is None:
        return prepare_fixture(case, plane=plane, seed=seed)
    raise TypeError(f"fixture must be a Fixture, a PreparedFixture or None, got {type(fixture).__name__}")


def _files_of(case: Case) -> Path | None:
    files = case.meta.get("workspace_files")  # a bundle case's files/: copied, never the answer key
    return Path(files) if files else None


def open_unit(
    case: Case,
    subject: Subject | str,
    sample: int | None = None,
    run_dir: str | Path | None = None,
    *,
    fixture: Fixture | PreparedFixture | None = None,
    plane: Plane | None = None,
    timeout: float | None = None,
    seed: int | None = None,
    budget: Budget | None = None,
) -> Unit:
    """Phase one: the fixture, its presentation and a fresh session. Never raises for what the
    case, fixture or plane does: a failure is kept in ``unit.failure``.

    ``fixture`` is the case's fixture when the caller built it already (a :class:`Fixture`, or the
    :class:`PreparedFixture` of :func:`prepare_fixture`, which also carries a failed build);
    otherwise it is built here. ``timeout`` overrides ``case.timeout_s``. ``seed`` is this
    sample's seed in a sealed run (:mod:`imagebench.runs.sealed`): the fixture is built from it, and a
    :class:`PreparedFixture` handed over must have been built from it. The subject is never told it.
    ``budget``: what the sample may spend (it ends ``budget-exceeded`` past it).
    """
    from imagebench.case.session import open_session
    from imagebench.subjects import SubjectHarnessError, confinement_of, readonly_files

    prepared = _as_prepared(fixture, case, plane, seed)
    unit = Unit(
        case=case,
        subject_name=subject if isinstance(subject, str) else subject.name,
        prepared=prepared,
        timeout_s=float(timeout) if timeout is not None else float(case.timeout_s),
        run_dir=Path(run_dir) if run_dir is not None else None,
        sample=sample,
        plane=plane if presents_tensor(case) else None,
        confinement=None if isinstance(subject, str) else confinement_of(subject),
        seed=seed,
        budget=budget if budget is not None and not budget.empty else None,
    )
    unit.times["build_s"] = prepared.build_s
    refused = None if isinstance(subject, str) else access_refusal(case, subject)
    if refused is not None:  # a case not meaningful under the run's access setting: skipped, never a zero
        unit.failure = ("skipped", refused)
        return unit
    if presents_tensor(case) and plane is None:
        # the executor passes the reason its plane could not start as a skipped PreparedFixture
        reason = prepared.reason if prepared.status == "skipped" and prepared.reason else TENSOR_SKIP_REASON
        unit.failure = ("skipped", reason)
        return unit
    if prepared.fixture is None:
        unit.failure = (prepared.status or "harness-error", prepared.reason)
        return unit
    client: Any = None
    if unit.plane is not None:
        try:
            unit.tensors = dict(unit.plane.present(case, prepared.fixture))
        except Exception as exc:
            unit.failure = (
                "harness-error",
                f"the data plane could not present the fixture: {type(exc).__name__}: {exc}",
            )
            return unit
        # the sample's own client: a read token for its fixture's ids only (imagebench.plane.token)
        scoped = getattr(unit.plane, "client_for", None)
        client = scoped(unit.tensors.values()) if scoped is not None else unit.plane.client
    try:
        unit.session = open_session(case, prepared.fixture, client=client, tensors=unit.tensors)
    except Exception as exc:
        unit.failure = ("harness-error", f"opening the session failed: {type(exc).__name__}: {exc}")
        return unit
    files = _files_of(case)
    if files is not None:  # an in-process subject reads them here; a command gets its own copy
        try:
            unit.files_copy = readonly_files(files)
        except SubjectHarnessError as exc:
            unit.failure = ("harness-error", str(exc))
            return unit
        unit.session.workspace = unit.files_copy
    return unit


def access_refusal(case: Case, subject: Subject) -> str | None:
    """Why ``subject``'s access setting makes ``case`` meaningless (:func:`imagebench.sandbox.access.refusal`)."""
    from imagebench.sandbox.access import refusal

    return refusal(case, getattr(subject, "access", None))


def _tensor_token(unit: Unit) -> str | None:
    """The read token a command subject is given: its session client's, scoped to the sample's ids
    (None from a plane that scopes none: its client's token may read everything)."""
    if unit.plane is None or unit.tensors is None or getattr(unit.plane, "client_for", None) is None:
        return None
    return getattr(getattr(unit.session, "client", None), "token", None)


def unit_context(unit: Unit) -> UnitContext:
    """What the subject is told about its unit beyond the session (and what it must not see)."""
    from imagebench.runs.withheld import case_withheld
    from imagebench.subjects import UnitContext

    plane = unit.plane
    hidden: list[Path] = []
    if unit.run_dir is not None:
        hidden += _outcome_folders(unit.run_dir)
    bundle = unit.case.meta.get("bundle")
    if bundle:
        hidden.append(Path(bundle))
    hidden += case_withheld(unit.case)  # its tree, the code that builds, scores or solves it, its module
    return UnitContext(
        sample_dir=unit.sample_dir,
        timeout_s=unit.timeout_s,
        tensor_url=getattr(plane, "url", None) if plane is not None and unit.tensors is not None else None,
        tensor_token=_tensor_token(unit),
        files=_files_of(unit.case),
        env={str(k): str(v) for k, v in (unit.case.meta.get("env") or {}).items()},
        hidden=tuple(hidden),
        budget=unit.budget,
    )


def _outcome_folders(run_dir: Path) -> list[Path]:
    """This run's folder and every run beside it (their truth artifacts): the whole outcome
    folder, unless it is a checkout (``--out .``), whose examples a subject may be shown. A
    folder not named ``run-*`` (a dask worker's private one) is hidden alone. A run of a sitting
    (:mod:`imagebench.runs.sitting`) hides its whole sitting and what lies beside the sitting."""
    from imagebench.runs.sitting import sitting_of

    if not run_dir.name.startswith("run-"):
        return [run_dir]
    sitting = sitting_of(run_dir)
    here = sitting if sitting is not None else run_dir.resolve()
    root = here.parent
    if (root / "pyproject.toml").exists() or (root / ".git").exists():
        return [here, *sorted(root.glob("run-*")), *sorted(root.glob("sitting-*"))]
    return [root]


def work_unit(unit: Unit, subject: Subject, *, stop: threading.Event | None = None) -> SubjectRun | None:
    """Phase two: the subject's turn. None when the unit could not be opened (nothing to work on).

    A subject that cannot be bound to the case ends its turn as a harness error (never its fault).
    Setting ``stop`` (the panel's Stop) ends the turn at once; the sample is then ``stopped``.
    """
    from imagebench.subjects import (
        SubjectError,
        SubjectRun,
        bind_subject,
        confinement_of,
        limits_of,
        run_subject,
    )

    if unit.failure is not None or unit.session is None:
        return None
    unit.confinement = confinement_of(subject)
    unit.limits = limits_of(subject)
    unit.measures_usage = bool(getattr(subject, "measures_usage", False))
    try:
        work = bind_subject(subject, unit.case, unit_context(unit))
    except Exception as exc:
        why = str(exc) if isinstance(exc, SubjectError) else f"binding the subject failed: {type(exc).__name__}: {exc}"
        return SubjectRun(seconds=0.0, harness_error=why)
    try:
        return run_subject(work, unit.session, unit.timeout_s, stop=stop)
    finally:
        unit.release()


def finish_unit(
    unit: Unit,
    run: SubjectRun | None,
    *,
    lookup: Callable[[str], Any] | None = None,
    flags: Sequence[str] = (),
) -> SampleSummary:
    """Phase three: collect what the subject left (through ``lookup``, default the session's),
    verify it and write the sample's summary under ``unit.run_dir``.

    ``run`` is how the subject's turn ended (None for a person at the viewer, whose time is the
    time since the unit opened). ``flags`` are added to the summary's. Never raises for what the
    fixture or the verifier does: each ends as a status.
    """
    from imagebench.case.session import collect_attempt
    from imagebench.subjects import SubjectRun

    unit.release()
    if unit.run_dir is None or unit.sample is None:
        raise ValueError(f"unit {unit.case.label}: give it a run folder and a sample number before finishing it")
    if unit.failure is not None or unit.session is None or unit.fixture is None:
        status, reason = unit.failure or ("harness-error", "the unit was never opened")
        return write_ended(unit, status, reason)
    fx = unit.fixture
    unit.times["subject_s"] = run.seconds if run is not None else time.perf_counter() - unit.started
    flags = list(flags)
    from imagebench.runs.spent import sample_usage

    unit.usage, usage_flags = sample_usage(
        unit.session, run, confinement=unit.confinement, measures=unit.measures_usage
    )
    flags += usage_flags
    if unit.plane is not None and unit.tensors is not None:
        try:
            flags += list(unit.plane.after_sample(unit.case, fx))
        except Exception as exc:
            return write_ended(unit, "harness-error", f"the data plane check failed: {type(exc).__name__}: {exc}")
    attempt = collect_attempt(unit.case, unit.subject_name, lookup or unit.session.lookup)
    if any(c.recorded for c in unit.case.collect):  # a trigger case: graded from what the harness observed
        observed_notes(attempt, unit.session, unit.confinement, unit.subject_name)
    attempt.notes.update(subject_notes(unit.session))
    return _score(
        unit, attempt, run if run is not None else SubjectRun(seconds=unit.times["subject_s"]), sorted(set(flags))
    )


def run_unit(
    case: Case,
    subject: Subject,
    sample: int,
    run_dir: str | Path,
    *,
    fixture: Fixture | PreparedFixture | None = None,
    plane: Plane | None = None,
    timeout: float | None = None,
    seed: int | None = None,
    budget: Budget | None = None,
) -> SampleSummary:
    """Work one sample of ``case`` with ``subject`` and write its summary under ``run_dir``:
    :func:`open_unit`, :func:`work_unit`, :func:`finish_unit`. ``seed``: a sealed run's seed of
    this sample; ``budget``: what it may spend (see :func:`open_unit`)."""
    unit = open_unit(
        case, subject, sample, run_dir, fixture=fixture, plane=plane, timeout=timeout, seed=seed, budget=budget
    )
    try:
        run = work_unit(unit, subject)
    finally:
        unit.release()
    return finish_unit(unit, run)


# --------------------------------------------------------------------------- writing a sample


def truth_digest(fixture: Fixture) -> str:
    """A digest of the truth a subject could reach in memory (arrays, numbers, nested mappings).

    A handle on a file (an :class:`~imagebench.fixtures.refs.ArrayRef`) is left out: it holds no bytes a
    subject can change here, and reading a curated volume after every sample would cost a pass over it.
    """
    import hashlib

    from imagebench.fixtures.fixture_digest import value_digest
    from imagebench.fixtures.refs import ArrayRef

    h = hashlib.sha256()
    for key in sorted(fixture.truth):
        value = fixture.truth[key]
        part = "ref" if isinstance(value, ArrayRef) else value_digest(value, f"truth {key!r}")
        h.update(f"{key}\0{part}\n".encode())
    return h.hexdigest()


def subject_notes(session: Session) -> dict[str, Any]:
    """What the harness learnt of the subject's turn that the verifier and the summary keep
    (what its own channels observed is :func:`observed_notes`'s)."""
    notes: dict[str, Any] = {}
    if "exit_code" in session.notes:
        notes["exit_code"] = session.notes["exit_code"]
    if session.notes.get("unreadable"):
        notes["unreadable"] = list(session.notes["unreadable"])
    if session.notes.get("final_message"):
        notes["final_message"] = session.notes["final_message"]
    if session.notes.get("mcp"):  # the agent's tool calls (run --subject-mcp); transcript.json has them all
        notes["mcp"] = session.notes["mcp"]
    if session.notes.get("skill_tool"):  # its calls of the harness's skill tool; skill-tool.json has them all
        notes["skill_tool"] = session.notes["skill_tool"]
    if session.notes.get("access"):  # what its access setting left it: the workspace's files, the tools served
        notes["access"] = session.notes["access"]
    if session.notes.get("agent"):  # an agent CLI's attempts, reported usage and kept logs; agent.json has them all
        notes["agent"] = session.notes["agent"]
    return notes


def fixture_identity(case: Case, fixture: Fixture) -> str:
    """``"sha256:<hex>"`` naming the fixture a sample saw: two samples with the same identity saw the
    same pixels and were scored against the same truth, so they are one replicate, not two.

    A curated fixture is named by its tree manifest's digest of each data and truth file (no
    pixel is read again); any other by the digest of its data and truth as built
    (:func:`imagebench.fixtures.fixture_digest.built_fixture_digest`)."""
    from imagebench.fixtures.digest import digest_json
    from imagebench.runs.fingerprint import curated_parts

    parts = curated_parts(case)
    if parts is not None:
        return digest_json({"curated": parts})
    from imagebench.fixtures.fixture_digest import built_fixture_digest

    return built_fixture_digest(fixture)


def _fixture_digest(unit: Unit) -> str | None:
    """The identity of the unit's fixture (None when there is none, or it cannot be taken)."""
    prepared = unit.prepared
    if prepared.fixture is None:
        return None
    if prepared.identity is None:
        try:
            prepared.identity = fixture_identity(unit.case, prepared.fixture)
        except Exception:  # recorded as unknown: such a sample is never pooled with another
            return None
    return prepared.identity


#: How a subject whose session notes can stand as the harness's observation ran: in a process of its
#: own (sandboxed or not), so it could reach the harness only through the harness's channels.
OBSERVING = frozenset({"bubblewrap", "none"})


def observed_notes(attempt: Attempt, session: Session, confinement: str | None, subject: str = "the subject") -> None:
    """Hand the verifier what the harness's own channels observed (``attempt.notes["observed_skills"]``,
    :mod:`imagebench.case.skills`), and what the subject left under a recorded leaving's name
    (``ignored_leavings``: never read as it).

    Only for a subject that ran in a process of its own: an in-process one (``python:``,
    ``reference``, ``nop``) or a person at the viewer shares the harness's memory, so a note in
    its session proves nothing; ``attempt.notes["unobserved"]`` then says why."""
    from imagebench.case.session import IGNORED_NOTE
    from imagebench.case.skills import OBSERVED_NOTE, UNOBSERVED_NOTE

    ignored = {**session.notes.get(IGNORED_NOTE, {}), **attempt.notes.get(IGNORED_NOTE, {})}
    if ignored:
        attempt.notes[IGNORED_NOTE] = ignored
    if confinement in OBSERVING:
        if OBSERVED_NOTE in session.notes:
            attempt.notes[OBSERVED_NOTE] = session.notes[OBSERVED_NOTE]
        else:
            attempt.notes[UNOBSERVED_NOTE] = (
                f"{subject} was given no channel the harness owns (no skill tool, no MCP session): "
                "only a command: subject gets the skill tool"
            )
        return
    if confinement is None:
        why = "a person at the viewer works in the harness's own process, so nothing done there passed"
    else:
        why = f"{subject} runs in the harness's own process: it shares the harness's memory, so nothing it did passed"
    attempt.notes[UNOBSERVED_NOTE] = f"{why} through a channel the harness owns"


def _seed(unit: Unit) -> int | None:
    """The seed the summary records: the unit's (a sealed run's), else the case's own."""
    if unit.seed is not None:
        return unit.seed
    seed = getattr(unit.case.fixture, "seed", None)  # a Procedural spec's seed; a curated one has none
    return seed if isinstance(seed, int) else None


def write_ended(
    unit: Unit,
    status: str,
    reason: str,
    *,
    detail: Mapping[str, Any] | None = None,
    flags: Sequence[str] = (),
) -> SampleSummary:
    """Write the summary of a sample that ended without an Outcome (skipped, harness-error, timeout)."""
    from imagebench.records import SampleSummary, json_safe, write_record
    from imagebench.runs.layout import SUMMARY, artifact_digests

    case, fx = unit.case, unit.fixture
    unit.times["total_s"] = time.perf_counter() - unit.started
    summary = SampleSummary(
        label=case.label,
        namespace=case.namespace,
        case_id=case.case_id,
        subject=unit.subject_name,
        sample=unit.sample,
        kind=case.kind,
        case_class=case.case_class,
        provenance=fx.provenance if fx is not None else "",
        citation=fx.citation if fx is not None else None,
        seed=_seed(unit),
        fixture_digest=_fixture_digest(unit),
        sandbox=unit.confinement,  # type: ignore[arg-type]
        limits=unit.limits,
        status=status,  # type: ignore[arg-type]
        reason=reason,
        passed=False,
        detail=json_safe(dict(detail or {})),
        flags=list(flags),
        times=dict(unit.times),
        usage=unit.usage,
        artifact_digests=artifact_digests(unit.sample_dir),  # stdout.txt, stderr.txt, what a failed report left
    )
    write_record(unit.sample_dir / SUMMARY, summary)
    return summary


def _reason(status: str, outcome: Outcome, attempt: Attempt, run: SubjectRun) -> str:
    """One line saying why a sample did not pass (empty when it did)."""
    if status == "ok":
        return ""
    parts: list[str] = []
    if run.error:
        parts.append(f"the subject raised {run.error}")
    if status == "blocked":
        blocked = outcome.detail.get("blocked")
        parts.append(blocked if isinstance(blocked, str) else "the scoring contract is missing or ineligible")
    said: set[str] = set()
    for name, why in attempt.notes.get("why_not", {}).items():
        said.add(why)
        parts.append(why if repr(name) in why or f"/{name}." in why else f"{name}: {why}")
    for m in outcome.metrics:
        if m.value is None:
            if m.unavailable not in said:  # not just the missing leaving again
                said.add(m.unavailable or "")
                parts.append(f"{m.name} unavailable: {m.unavailable}")
        elif not m.passed:
            parts.append(f"{m.name} = {m.value:.4g}{m.unit and ' ' + m.unit} > limit {m.limit:.4g}")
    if not parts:
        parts.append(f"the verifier scored nothing ({status})")
    return "; ".join(parts)


def _verifies_without_leavings(case: Case, fx: Fixture, attempt: Attempt) -> bool:
    """Whether the verifier scores the same sample with nothing left (it does when the bench is
    sound: every leaving then reads as absent)."""
    from dataclasses import replace

    empty = replace(attempt, arrays={}, notes={})
    try:
        case.verify(fx, empty)
    except Exception:
        return False
    return True


def _score(unit: Unit, attempt: Attempt, run: SubjectRun, flags: list[str]) -> SampleSummary:
    """Verify ``attempt`` and write the sample. A harness error or a timeout ends the sample with
    that status unverified; an error the subject raised goes into the notes and the reason."""
    from imagebench.fixtures.fixture import Outcome
    from imagebench.records import SampleSummary as Summary
    from imagebench.records import json_safe, read_record
    from imagebench.runs.artifacts import record_artifact_range, write_report

    case, fx = unit.case, unit.fixture
    assert fx is not None
    notes = {k: attempt.notes[k] for k in ("exit_code", "unreadable", "agent") if k in attempt.notes}
    if run.harness_error:
        return write_ended(unit, "harness-error", run.harness_error, flags=flags)
    if run.infra_error:  # the agent's network, login or rate limit failed, as its CLI said: never a zero
        return write_ended(unit, "infra-error", run.infra_error, flags=flags, detail=notes)
    if run.stopped:
        return write_ended(
            unit, "stopped", f"stopped by the person at the viewer after {run.seconds:.1f} s", flags=flags
        )
    if run.not_attempted:
        return write_ended(unit, "not-attempted", run.not_attempted, flags=flags)
    if run.timed_out:
        return write_ended(unit, "timeout", run.timeout_reason, flags=flags, detail=notes)
    if run.resource_limit:
        return write_ended(unit, "resource-limit", run.resource_limit, flags=flags, detail=notes)
    over = run.budget_exceeded or (unit.budget.exceeded(unit.usage) if unit.budget is not None else None)
    if over:  # it spent more than it was allowed: a failure, like a timeout, whatever it left
        return write_ended(unit, "budget-exceeded", over, flags=flags, detail=notes)
    if unit.budget is not None and unit.budget.unchecked(unit.usage):
        from imagebench.usage import UNMEASURED_FLAG

        flags = sorted({*flags, UNMEASURED_FLAG})  # nothing measured what the budget limits
    if run.error:
        attempt.notes["subject_error"] = run.error

    try:
        tampered = truth_digest(fx) != unit.prepared.truth_digest
    except Exception as exc:
        tampered, why = True, f"{type(exc).__name__}: {exc}"
    else:
        why = "its digest changed"
    if tampered:  # the subject reached the truth it is scored against and changed it
        return write_ended(
            unit, "truth-tampered", f"the fixture's truth changed during the sample ({why})", flags=flags
        )

    vstart = time.perf_counter()
    try:
        outcome = case.verify(fx, attempt)
    except Exception as exc:
        unit.times["verify_s"] = time.perf_counter() - vstart
        raised = f"{type(exc).__name__}: {exc}"
        if _verifies_without_leavings(case, fx, attempt):
            # The verifier scores an empty attempt but not this one: what the subject left broke
            # it. That is the subject's failure, never a harness error (which figures leave out).
            reason = f"the verifier could not score what the subject left ({raised})"
            return write_ended(unit, "unscorable-result", reason, flags=flags, detail=notes)
        return write_ended(unit, "harness-error", f"the verifier raised {raised}", flags=flags)
    unit.times["verify_s"] = time.perf_counter() - vstart
    if not isinstance(outcome, Outcome):
        return write_ended(
            unit, "harness-error", f"the verifier returned {type(outcome).__name__}, expected an Outcome", flags=flags
        )

    status = outcome.status
    if status == "no-result" and notes.get("unreadable"):
        status = "unscorable-result"  # it left something; nobody could read it
    if run.error and status != "blocked":
        status = "subject-error"  # a turn that ended in an exception is a failure, whatever it left
    if OVERWRITTEN_FLAG in flags and status not in ("blocked",):
        status = OVERWRITTEN_FLAG  # what it was scored against is not what it was given: never a success
    reason = _reason(status, outcome, attempt, run)
    from imagebench.runs.explain import LEAVINGS_KEY, describe_leavings

    if attempt.arrays:  # what the subject handed in, for a person reading the result (never truth)
        outcome.detail.setdefault(LEAVINGS_KEY, describe_leavings(attempt.arrays))
    json_notes = json_safe(dict(attempt.notes))
    if json_notes.get("why_not") or len(json_notes) > 2:  # more than the plain "left"/"why_not" bookkeeping
        outcome.detail.setdefault("attempt_notes", json_notes)
    unit.times["total_s"] = time.perf_counter() - unit.started
    extra: dict[str, Any] = {
        "times": dict(unit.times),
        "case_class": case.case_class,
        "flags": flags,
        "sandbox": unit.confinement,
        "limits": unit.limits,
        "fixture_digest": _fixture_digest(unit),
    }
    if unit.usage is not None:
        extra["usage"] = unit.usage.model_dump(mode="json")
    if _seed(unit) is not None:
        extra["seed"] = _seed(unit)  # written with the summary, after the sample is scored
    try:
        record_artifact_range(outcome)
        path = write_report(
            outcome,
            unit.run_dir,
            subject=unit.subject_name,
            sample=unit.sample,
            status=status,
            reason=reason,
            extra=extra,
        )  # type: ignore[arg-type]
        return read_record(path, Summary)
    except Exception as exc:
        return write_ended(
            unit, "harness-error", f"writing the report failed: {type(exc).__name__}: {exc}", flags=flags
        )
