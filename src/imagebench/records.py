"""On-disk records a run leaves behind: summary.json per sample and per case, and run.json.

Every record is a pydantic model with a schema version, so a reader can refuse what it does
not understand and ``imagebench schema`` can print the JSON schema of each.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from imagebench.usage.record import Usage

#: The version every record is written with. 2 added ``MetricRecord.unavailable_because``; 3
#: added ``sandbox`` (how the subject was confined); 4 added the ``resource-limit`` status and
#: ``limits`` (what a confined subject could use: imagebench.sandbox.limits.Limits); 5 added a
#: sample's ``fixture_digest`` (which fixture it saw) and a case's ``scoring`` (its scoring
#: closure) and ``fixtures`` (how many distinct fixtures its samples saw); 6 added a sample's
#: ``artifact_digests`` (the sha256 of every file beside its summary, which the journal thereby
#: anchors); 7 added a run's ``sources`` (where each of its cases came from: imagebench.catalog,
#: so that a resume opens them again); 8 added a sample's ``usage`` (tokens, turns, tool calls,
#: model, wall time, each measured or reported: imagebench.usage) and the ``budget-exceeded``
#: status. An older record is a newer one without those fields (read as None), so every version is read.
SCHEMA_VERSION = 8
READABLE_VERSIONS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
Version = Literal[1, 2, 3, 4, 5, 6, 7, 8]
#: The first version whose sample summaries record ``artifact_digests``.
ARTIFACT_DIGESTS_SINCE = 6

#: How a subject was confined: ``bubblewrap`` (a command, or an isolated python function, in its
#: own namespaces), ``none`` (a command run with --no-sandbox: it could see this machine) or
#: ``in-process`` (trusted code in the harness's own process: python subjects, the reference, nop).
Sandbox = Literal["bubblewrap", "none", "in-process"]

Status = Literal[
    "ok",  # scored, every scored metric within its limit
    "wrong-answer",  # scored, at least one metric outside its limit
    "no-result",  # the subject left none of the names it had to leave
    "unscorable-result",  # it left something, but nothing could be scored (wrong shape/type, ...)
    "timeout",  # the subject ran past its time limit
    "resource-limit",  # the subject ran into a limit of its confinement (memory, processes, disk, CPU) and was ended
    "budget-exceeded",  # the subject spent more than its --max-tokens/--max-cost (as measured or reported): a failure, like a timeout
    "harness-error",  # the bench itself failed (builder, verifier, I/O): never the subject's fault
    "infra-error",  # an agent's infrastructure failed (network, auth, rate limit: as its CLI reported it): excluded and counted, never a zero
    "skipped",  # the fixture is not available on this machine, with the reason
    "blocked",  # not graded, never a zero: a scoring contract missing/ineligible, or a trigger case nothing of the harness's observed
    "subject-error",  # the subject raised (or its command failed) and what it left did not pass: a failure
    "truth-tampered",  # the fixture's truth changed while the subject worked: a failure
    "fixture-overwritten",  # the fixture's data on the data plane changed while the subject worked: a failure
    "stopped",  # a person stopped the subject's turn (the panel's Stop): no result, excluded and counted
    "not-attempted",  # a served agent never called a case tool (a bare tools/list probe): excluded and counted
]
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


class Record(BaseModel):
    """The base of every on-disk record and format: an unknown field is an error, never dropped."""

    model_config = ConfigDict(extra="forbid")


class FrozenRecord(Record):
    """A record that is a value once read (a manifest, a pinned suite, a fixture's layout)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricRecord(Record):
    name: str
    value: float | None
    limit: float | None  # None when the limit is infinite (JSON has no infinity)
    unit: str = ""
    unavailable: str | None = None
    # Whose fault an unavailable value is: "absent" / "unusable" (the subject's leavings: the
    # sample fails) or "truth" (the fixture cannot support it: neutral). None when there is a value.
    unavailable_because: Literal["absent", "unusable", "truth"] | None = None
    verdict: Literal["pass", "fail", "unavailable"]


class SampleSummary(Record):
    """One sample of one case for one subject: ``<subject>/<namespace>/<case_id>/sample-<n>/summary.json``."""

    schema_version: Version = SCHEMA_VERSION
    label: str
    namespace: str
    case_id: str
    subject: str
    sample: int | None = None
    kind: str = "synthetic"
    case_class: str = "golden"
    status: Status
    reason: str = ""
    passed: bool = False
    metrics: list[MetricRecord] = Field(default_factory=list)
    answer: dict[str, Any] | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    # {file name: sha256 of its bytes} of every regular file beside this summary when it was written
    # (the artifacts' PNGs and ``.png.error``, their ``.npy`` values, stdout.txt, stderr.txt, a
    # transcript): the summary is journaled, so they are anchored too (imagebench.runs.reader checks
    # them). None: a record older than version 6.
    artifact_digests: dict[str, str] | None = None
    flags: list[str] = Field(default_factory=list)
    provenance: str = ""
    citation: str | None = None
    seed: int | None = None
    # Which fixture the sample saw (imagebench.runs.runner.fixture_identity): samples that share it
    # are one replicate of that fixture, not independent evidence. None: not known (no fixture).
    fixture_digest: str | None = None
    sandbox: Sandbox | None = None
    # What a confined subject could use (imagebench.sandbox.limits.Limits as JSON); None: not confined.
    limits: dict[str, int | None] | None = None
    times: dict[str, float] = Field(default_factory=dict)
    # What the subject spent (imagebench.usage.Usage): each figure measured by the harness or
    # reported by the agent. None: a record older than version 8, or a person at the viewer.
    usage: Usage | None = None


class CaseSummary(Record):
    """All samples of one case for one subject: ``<subject>/<namespace>/<case_id>/summary.json``."""

    schema_version: Version = SCHEMA_VERSION
    label: str
    subject: str
    kind: str = "synthetic"
    case_class: str = "golden"
    samples: int
    sandbox: Sandbox | None = None
    counts: dict[str, int]
    passed: int
    scored: int
    metric_means: dict[str, float | None] = Field(default_factory=dict)
    # The case's scoring closure (imagebench.runs.closure.scoring_digest), None when not taken.
    scoring: str | None = None
    # How many distinct fixtures its samples saw (None: some sample's fixture is not known).
    fixtures: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


#: Where a case comes from (imagebench.catalog): the built-in suite, a Python module given with
#: ``--cases``, a module an installed package names in the ``imagebench.cases`` entry-point group,
#: a skill bundle, or the cases declared in a fixture tree.
SourceKind = Literal["builtin", "module", "entry-point", "bundle", "tree"]


class CaseSourceRecord(Record):
    """One source of a run's cases in ``run.json`` (``sources``): enough to open it again.

    ``name``: the module's name (builtin, module), the entry point's name, the bundle's skill id or
    the tree's folder; ``module``: the module imported (module, entry-point); ``path``: the file of
    a module given as a ``.py`` file, the bundle's folder, the tree's root;
    ``dist``: the distribution that declares an entry point; ``cases``: the run's labels it gave.
    """

    kind: SourceKind
    name: str
    module: str | None = None
    path: str | None = None
    dist: str | None = None
    cases: list[str] = Field(default_factory=list)


class RunRecord(Record):
    """``run-<UTC timestamp>/run.json``: what was run, by whom, and how each sample ended."""

    schema_version: Version = SCHEMA_VERSION
    run_id: str
    started: str
    finished: str | None = None
    subject: str
    sandbox: Sandbox | None = None
    limits: dict[str, int | None] | None = None
    samples: int
    selection: dict[str, Any] = Field(default_factory=dict)
    cases: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    complete: bool = False
    # Where the cases came from (imagebench.catalog); None: a record older than version 7, or a
    # run of cases handed to run_cases without their sources.
    sources: list[CaseSourceRecord] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


RECORDS: dict[str, type[BaseModel]] = {
    "summary": SampleSummary,
    "case-summary": CaseSummary,
    "run": RunRecord,
}


class RecordError(ValueError):
    """A record on disk is missing, malformed or of an unknown version (names the file and the field)."""


def record_text(text: str) -> str:
    """``text`` as a record can hold it: a lone surrogate (``"\\udfff"`` in a subject's JSON parses
    to one, and no UTF-8 file can hold it) is kept as its escape, ``\\udfff``, so what a subject
    wrote can never stop its own sample from being written (and so turn a failure into a
    harness error, which figures leave out)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def json_safe(value: Any) -> Any:
    """Turn numpy scalars/arrays, paths and non-finite floats into plain JSON (NaN/inf become None);
    text no UTF-8 file can hold is escaped (:func:`record_text`)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None  # type: ignore[assignment]
    if isinstance(value, dict):
        return {record_text(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v) for v in value]
    if isinstance(value, str):
        return record_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    if np is not None:
        if isinstance(value, np.generic):
            return json_safe(value.item())
        if isinstance(value, np.ndarray):
            if value.size > 64:
                return {"shape": list(value.shape), "dtype": str(value.dtype)}
            return json_safe(value.tolist())
    return repr(value)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically: a reader sees the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; a report is for people to read
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: os.umask is process-wide, not thread-safe to probe


def write_record(path: str | os.PathLike[str], record: BaseModel) -> Path:
    """``record`` as indented JSON, atomically. A record holding text no UTF-8 file can hold (a
    subject's lone surrogate that reached a reason or a detail) is written with that text escaped."""
    try:
        text = record.model_dump_json(indent=2)
    except ValueError:  # pydantic_core.PydanticSerializationError: surrogates not allowed
        text = json.dumps(json_safe(record.model_dump(mode="python")), indent=2, ensure_ascii=False)
    return atomic_write_text(path, text + "\n")


def read_record(path: str | os.PathLike[str], model: type[BaseModel]) -> Any:
    """Read and validate a record; a bad file raises RecordError naming the file and the field."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RecordError(f"{path}: file is missing") from None
    return parse_record(path, data, model)


def parse_record(path: str | os.PathLike[str], data: bytes, model: type[BaseModel]) -> Any:
    """A record from the bytes of ``path`` (already read: a reader that checks a digest of those
    very bytes); RecordError naming the file and the field."""
    from pydantic import ValidationError

    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise RecordError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    version = raw.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise RecordError(f"{path}: field 'schema_version' is {version!r}, expected one of {list(READABLE_VERSIONS)}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise RecordError(f"{path}: field {where!r}: {first['msg']}") from None
