"""Who works a case: the subjects a run can put in front of a fixture.

A subject is anything with a ``name`` (usable as a folder name) that can be called with a
:class:`~imagebench.session.Session` and leaves what the case asks for in
``session.namespace``. :func:`parse_subject` turns a command-line spec into one:

- ``reference``: the case's own reference solution;
- ``nop``: does nothing (the floor: it never passes);
- ``python:package.module:function``: ``function(session)`` called in this process;
- ``command:<shell command>``: the command run with bash in a fresh workspace folder, inside a
  bubblewrap sandbox unless its :class:`~imagebench.sandbox.SandboxPolicy` says otherwise
  (:mod:`imagebench.command` runs it, :mod:`imagebench.sandbox` says what it can see).

A subject that needs to know more than the session (the case, the sample folder, the time
limit) defines ``bind(case, context) -> callable(session)``; the runner calls it once per sample.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from imagebench import command as _command
from imagebench import confine
from imagebench.command import KILL_GRACE_S, TENSOR_URL_ENV, CommandHarnessError
from imagebench.confine import SubjectIds
from imagebench.sandbox import (
    SandboxKind,
    SandboxPolicy,
    SandboxUnavailable,
    check_policy,
    unavailable_reason,
)
from imagebench.workspace import NotText, Refused, Workspace

if TYPE_CHECKING:
    from imagebench.case import Case
    from imagebench.session import Session

SUBJECT_FORMS: tuple[tuple[str, str], ...] = (
    ("reference", "the case's own reference solution"),
    ("nop", "does nothing; a floor that never passes"),
    ("baseline", "the case's naive baseline (identity, a global threshold, no correction); it must fail"),
    ("python:package.module:function", "calls function(session) in this process (--isolate: a sandboxed child)"),
    ("command:<shell command>", "runs the command with bash in a sandboxed fresh workspace (prompt.md, inputs/, outputs/)"),
)

Confinement = Literal["bubblewrap", "none", "in-process"]
WORKSPACE_ENV = "IMAGEBENCH_WORKSPACE"
# Never inherited by a command subject: where truth lives on disk and where reports go.
_WITHHELD_ENV = ("IMAGEBENCH_FIXTURES", "IMAGEBENCH_OUTCOME_DIR", TENSOR_URL_ENV, "IMAGEBENCH_SUPERVISED")
# The leaving a command's final message may stand for (a structured answer; see read_leaving).
ANSWER_LEAVING = "answer"


class SubjectError(ValueError):
    """A subject spec is invalid, or a subject cannot work this case (a harness matter, never a score)."""


class SubjectTimeout(Exception):
    """The subject ran past its time limit."""


class SubjectResourceLimit(Exception):
    """The subject ran into one of its limits (memory, processes, /tmp, workspace, CPU, file size)
    and was ended for it; the message starts ``resource-limit: <which>``."""


class SubjectHarnessError(RuntimeError):
    """The harness itself failed while running a subject (workspace, disk, ...): never the subject's fault."""


def valid_forms() -> str:
    width = max(len(form) for form, _ in SUBJECT_FORMS)
    return "\n".join(f"  {form.ljust(width)}  {about}" for form, about in SUBJECT_FORMS)


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
    # A folder every workspace gets a copy of as ``files/`` (a bundle case's files/), and
    # environment variables for a command (a bundle case's setup.env; never the withheld ones).
    files: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    # More paths a sandboxed command must not see where they lie inside what it is shown (the
    # run folder, a bundle); the checkout, the packages and $IMAGEBENCH_FIXTURES always are.
    hidden: tuple[Path, ...] = ()


# --------------------------------------------------------------------------- the subjects


@dataclass(frozen=True)
class ReferenceSubject:
    """The case's own reference solution (``case.reference(session)``)."""

    name: str = "reference"

    def bind(self, case: Case, context: UnitContext) -> Callable[[Session], None]:
        if case.reference is None:
            raise SubjectError(f"case {case.label} has no reference solution")
        return case.reference

    def __call__(self, session: Session) -> None:
        raise SubjectError(
            f"the reference subject works through the case it is bound to; call bind(case, context) first "
            f"(session {session.label})"
        )


@dataclass(frozen=True)
class BaselineSubject:
    """The case's naive baseline (``case.baseline(session)``): the first thing a person would try.

    Every built-in case declares one, and every case must fail it (docs/cases.md, the calibration
    table): a limit that a naive answer meets does not measure the skill.
    """

    name: str = "baseline"

    def bind(self, case: Case, context: UnitContext) -> Callable[[Session], None]:
        if case.baseline is None:
            raise SubjectError(f"case {case.label} has no naive baseline")
        return case.baseline

    def __call__(self, session: Session) -> None:
        raise SubjectError(
            f"the baseline subject works through the case it is bound to; call bind(case, context) first "
            f"(session {session.label})"
        )


@dataclass(frozen=True)
class NopSubject:
    """Leaves nothing. Every case must fail it: a case that a do-nothing subject passes measures nothing."""

    name: str = "nop"

    def __call__(self, session: Session) -> None:
        return None


@dataclass(frozen=True)
class PythonSubject:
    """``function(session)`` from an importable module.

    By default it is called in this process: trusted code, which shares the harness's memory
    (truth is read-only and checked after each sample, but nothing stops it reading). With
    ``isolate`` (a :class:`SandboxPolicy`; ``--isolate`` on the command line) the same function
    runs in a sandboxed child Python that gets the session's data as files and returns its
    bindings through files (:mod:`imagebench.isolate`).
    """

    target: str  # "package.module:function"
    # None when isolated: the harness never imports the subject's code (it runs in the sandbox only)
    function: Callable[..., Any] | None = field(compare=False, repr=False)
    isolate: SandboxPolicy | None = None

    @property
    def name(self) -> str:
        module, _, func = self.target.partition(":")
        return f"python-{module}.{func}"

    @property
    def sandbox_kind(self) -> Confinement:
        return "in-process" if self.isolate is None else self.isolate.kind

    def isolated(self) -> tuple[CommandSubject, list[Path]]:
        """The command subject that runs this function in a child process (``isolate`` must be
        set), and the folders the child puts on its ``sys.path``."""
        from imagebench.isolate import code_paths, isolated_command

        assert self.isolate is not None
        try:
            shown, path = code_paths(self.target)
        except ImportError as exc:
            raise SubjectError(f"subject python:{self.target}: cannot find its code to isolate: {exc}") from None
        policy = replace(self.isolate, expose=(*self.isolate.expose, *shown))
        return CommandSubject(command=isolated_command(policy), sandbox=policy), path

    def bind(self, case: Case, context: UnitContext) -> Callable[[Session], None]:
        if self.isolate is None:
            assert self.function is not None
            return self.function
        from imagebench.isolate import isolated_env

        subject, path = self.isolated()
        subject.check_sandbox()
        env = {**context.env, **isolated_env(self.target, path, case.label)}
        return _IsolatedCall(_BoundCommand(subject, replace(context, env=env)))

    def __call__(self, session: Session) -> None:
        if self.function is None:
            raise SubjectError(f"python:{self.target} is isolated: it works through bind(case, context)")
        self.function(session)


class IsolatedRaised(RuntimeError):
    """An isolated ``python:`` function raised in its child process (its traceback is in stderr.txt)."""


@dataclass
class _IsolatedCall:
    """The bound command of an isolated function: a function that raised in its child process is
    a subject error, as it is in process (not a command that merely failed)."""

    bound: _BoundCommand
    enforces_timeout: bool = True

    def cancel(self) -> None:
        self.bound.cancel()

    def __call__(self, session: Session) -> None:
        from imagebench.isolate import RAISED_EXIT

        self.bound(session)
        if session.notes.get("exit_code") == RAISED_EXIT:
            raise IsolatedRaised("the function raised in its isolated process; its traceback is in stderr.txt")


def runs_out_of_process(subject: object) -> bool:
    """Whether ``subject`` works its unit in a child process (a command, an isolated function):
    ``--workers`` then drives units from threads rather than worker processes."""
    return isinstance(subject, CommandSubject) or (isinstance(subject, PythonSubject) and subject.isolate is not None)


def confinement_of(subject: object) -> Confinement:
    """How ``subject`` is confined, as a run records it: ``bubblewrap``, ``none`` (a command run
    with --no-sandbox) or ``in-process`` (trusted code: python subjects, the reference, nop)."""
    kind = getattr(subject, "sandbox_kind", None)
    return kind if kind in ("bubblewrap", "none") else "in-process"


def limits_of(subject: object) -> dict[str, int | None] | None:
    """What a confined ``subject`` may use, as a run records it (None: not confined)."""
    policy = getattr(subject, "sandbox", None) if isinstance(subject, CommandSubject) else getattr(subject, "isolate", None)
    if isinstance(policy, SandboxPolicy) and policy.enabled:
        return policy.limits.to_record()
    return None


@dataclass(frozen=True)
class CommandSubject:
    """An external program, run with bash in a fresh workspace folder.

    The workspace holds ``prompt.md``, ``inputs/<layer>.npy`` for each array layer (points and
    shapes too) and an empty ``outputs/``; ``fixture_tensors.json`` as well when the case presents
    tensors. The command runs there with ``$IMAGEBENCH_WORKSPACE`` set (and
    ``$IMAGEBENCH_TENSOR_URL`` only when the runner gives a data-plane address); when it ends,
    each ``outputs/<name>.npy`` or ``outputs/<name>.json`` is read into the session namespace.
    Its stdout and stderr go to ``stdout.txt``/``stderr.txt`` in the sample folder (8 MiB each at
    most, with a marker saying what was dropped). When it returns or runs past the time limit,
    everything it started is killed.

    ``sandbox`` says what it can see and reach (by default: a bubblewrap sandbox, no network, the
    harness's Python without imagebench; see :mod:`imagebench.sandbox`); ``sandbox_kind`` is what
    a run records. Where bubblewrap cannot start, binding refuses the subject unless the policy
    is ``SandboxPolicy(enabled=False)``.

    The workspace is a temporary folder removed afterwards (even when this process is killed),
    unless ``keep_workspace`` is set: then it is ``<sample folder>/workspace`` and stays.
    """

    command: str
    keep_workspace: bool = False
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    # ``--subject-mcp``: the harness serves the session's tools over MCP while the command works
    # (``mcp.json`` in its workspace; imagebench.mcp), and scores what it left through them.
    mcp: bool = False

    @property
    def name(self) -> str:
        digest = hashlib.sha256(self.command.encode("utf-8")).hexdigest()[:8]
        return f"command-{digest}-mcp" if self.mcp else f"command-{digest}"

    @property
    def sandbox_kind(self) -> SandboxKind:
        """``"bubblewrap"`` or ``"none"``: what a run records about how this subject was confined."""
        return self.sandbox.kind

    def check_sandbox(self) -> None:
        """Raise :class:`SubjectError` (saying how to install bubblewrap) when the sandbox cannot start."""
        if self.sandbox.enabled:
            why = unavailable_reason()
            if why is not None:
                raise SubjectError(why)
            try:
                check_policy(self.sandbox)
            except SandboxUnavailable as exc:
                raise SubjectError(str(exc)) from None

    def bind(self, case: Case, context: UnitContext) -> Callable[[Session], None]:
        self.check_sandbox()
        if self.mcp:
            from imagebench.mcp.tools import CaseView

            return _BoundCommand(self, context, view=CaseView.of(case))
        return _BoundCommand(self, context)

    def __call__(self, session: Session) -> None:
        # Without a runner: outputs beside a temporary folder, the session's own limit unknown.
        self.check_sandbox()
        with tempfile.TemporaryDirectory(prefix="imagebench-sample-") as tmp:
            _BoundCommand(self, UnitContext(sample_dir=Path(tmp), timeout_s=120.0))(session)


@dataclass
class _BoundCommand:
    subject: CommandSubject
    context: UnitContext
    enforces_timeout: bool = True
    view: Any = None  # an imagebench.mcp.tools.CaseView when the command gets the MCP server
    _running: list[_command.Running] = field(default_factory=list, repr=False)

    def cancel(self) -> None:
        """Kill everything the command started, now (the run is being interrupted)."""
        for job in list(self._running):
            job.end(graceful=True)

    def __call__(self, session: Session) -> None:
        ctx = self.context
        policy = self.subject.sandbox
        limits = policy.limits if policy.enabled else None
        try:
            ctx.sample_dir.mkdir(parents=True, exist_ok=True)
            with confine.subject_ids() if policy.enabled else nullcontext() as ids:
                with _command.temporary_workspace(limits, ids) as tw, Workspace(tw.path) as ws:
                    try:
                        self._work(session, ws, tw, ids)
                    finally:
                        if self.subject.keep_workspace:
                            self._keep(session, ws)
        except (OSError, CommandHarnessError, confine.NoSubjectIds) as exc:
            raise SubjectHarnessError(str(exc) if not isinstance(exc, OSError) else f"workspace: {exc}") from exc

    def _keep(self, session: Session, ws: Workspace) -> None:
        """``keep_workspace``: its folders and regular files copied into the sample folder (never a
        link, a FIFO or a device: those are listed in ``notes["workspace_left_out"]``)."""
        kept = self.context.sample_dir / "workspace"
        if kept.exists():
            shutil.rmtree(kept)
        cap = self.subject.sandbox.limits.workspace
        left_out = ws.copy_out(kept, cap=cap)
        session.workspace = kept
        if left_out:
            session.notes["workspace_left_out"] = left_out[:50]

    def _work(self, session: Session, ws: Workspace, tw: _command.TemporaryWorkspace, ids: SubjectIds | None) -> None:
        ctx = self.context
        session.workspace = tw.path
        _prepare_workspace(session, ws, ctx.files)
        if self.view is None:
            self._run(session, ws, tw, ids)
            return
        from imagebench.mcp.folder import MCP_SHOWN
        from imagebench.mcp.host import served

        sandboxed = self.subject.sandbox.enabled
        with served(self.view, session, ws, sandboxed=sandboxed, sample_dir=ctx.sample_dir, ids=ids) as folder:
            self._run(session, ws, tw, ids, binds=((folder.path, MCP_SHOWN),) if sandboxed else ())

    def _run(
        self,
        session: Session,
        ws: Workspace,
        tw: _command.TemporaryWorkspace,
        ids: SubjectIds | None,
        binds: tuple[tuple[Path, str], ...] = (),
    ) -> None:
        ctx = self.context
        policy = self.subject.sandbox
        if ids is not None:
            ws.chown_all(ids.uid, ids.gid)  # the subject's uid owns what the harness wrote for it
        finished = _command.run(
            self.subject.command,
            tw.path,
            sample_dir=ctx.sample_dir,
            timeout_s=ctx.timeout_s,
            env=_child_env(tw.path, ctx.tensor_url, ctx.env, policy.env_pass),
            policy=policy,
            tensor_url=ctx.tensor_url,
            hidden=(ctx.sample_dir, *ctx.hidden),
            running=self._running,
            reaper=tw.reaper,
            limits=policy.limits if policy.enabled else None,
            ids=ids,
            sized=tw.sized,
            binds=binds,
        )
        session.notes["exit_code"] = finished.returncode
        if finished.limit is not None:
            raise SubjectResourceLimit(f"resource-limit: {finished.limit} ({_LIMIT_WORDS[finished.limit](policy.limits)})")
        if finished.timed_out:
            raise SubjectTimeout(f"the command ran past its {ctx.timeout_s:g} s limit and was killed")
        caps, budget = confine.leaving_caps(policy.limits, session.layers, session.collect)
        ws.budget, ws.read_total = budget, 0
        _read_outputs(session, ws, finished.returncode, finished, caps)


_LIMIT_WORDS: dict[str, Callable[[confine.Limits], str]] = {
    "memory": lambda lim: f"its processes used more than {confine.show_size(lim.memory)} of memory and were ended",
    "processes": lambda lim: f"it tried to run more than {lim.processes} processes or threads at once and was ended",
    "tmp": lambda lim: f"it filled its /tmp of {confine.show_size(lim.tmp)} and was ended",
    "workspace": lambda lim: f"it filled its workspace of {confine.show_size(lim.workspace)} and was ended",
    "cpu": lambda lim: f"a process ran past {lim.cpu_s} s of CPU time and was killed",
    "file-size": lambda lim: f"it wrote a file past {confine.show_size(lim.workspace)} and was killed",
}


def readonly_files(files: Path) -> Path:
    """A fresh temporary folder holding a copy of ``files`` as ``files/``, write permission removed.

    This is ``session.workspace`` for a subject working in this process (a command gets its own
    writable copy in its workspace instead). Remove it with :func:`remove_readonly_files`.
    """
    root = Path(tempfile.mkdtemp(prefix="imagebench-files-"))
    try:
        shutil.copytree(files, root / "files", ignore=shutil.ignore_patterns(".gitkeep"))
        for path in [*sorted(root.rglob("*"), reverse=True), root]:
            path.chmod(0o555 if path.is_dir() else 0o444)
    except OSError as exc:
        remove_readonly_files(root)
        raise SubjectHarnessError(f"could not copy the case's files from {files}: {exc}") from exc
    return root


def remove_readonly_files(root: Path) -> None:
    """Undo :func:`readonly_files`: give write permission back and delete the folder."""
    for path in [root, *root.rglob("*")]:
        try:
            path.chmod(0o755 if path.is_dir() else 0o644)
        except OSError:
            pass
    shutil.rmtree(root, ignore_errors=True)


def _prepare_workspace(session: Session, ws: Workspace, files: Path | None = None) -> None:
    """``prompt.md``, ``inputs/<layer>.npy``, ``outputs/``, ``files/`` and ``fixture_tensors.json``,
    written beneath the fresh workspace's descriptor before the subject starts."""
    try:
        ws.write_text("prompt.md", session.prompt)
        ws.mkdir("inputs")
        ws.mkdir("outputs")
        if files is not None:
            ws.copy_in(files, "files")
        for name, sl in session.layers.items():
            if sl.layer.presentation == "array":
                ws.save_array(f"inputs/{name}.npy", sl.data)
        tensors = session.namespace.get("fixture_tensors")
        if tensors:
            ws.write_text("fixture_tensors.json", json.dumps(tensors, indent=2) + "\n")
    except (OSError, ValueError) as exc:
        raise SubjectHarnessError(f"could not write the workspace {ws.root}: {exc}") from exc


#: What a command subject's environment takes from the host, by name: the locale, the terminal,
#: the time zone and this machine's BLAS/OpenMP settings. Anything else (an API key, a token)
#: reaches it only when the run names it (``--subject-env-pass NAME``, SandboxPolicy.env_pass).
BASE_ENV = (
    "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
)  # fmt: skip


def _child_env(
    workspace: Path, tensor_url: str | None, extra: dict[str, str] | None = None, passed: tuple[str, ...] = ()
) -> dict[str, str]:
    """A command's environment: :data:`BASE_ENV` and ``LC_*`` from the host, the names in
    ``passed``, the harness's own variables (``extra``: a bundle case's setup.env, an isolated
    function's target) and the workspace; never the withheld variables."""
    env = {
        k: v for k, v in os.environ.items()
        if (k in BASE_ENV or k.startswith("LC_") or k in passed) and k not in _WITHHELD_ENV
    }  # fmt: skip
    env.update({k: str(v) for k, v in (extra or {}).items() if k not in _WITHHELD_ENV})
    env[WORKSPACE_ENV] = str(workspace)
    if tensor_url:
        env[TENSOR_URL_ENV] = tensor_url
    return env


def final_message(tail: bytes, offset: int) -> tuple[str | None, str | None]:
    """The end of a command's stdout as text: ``(text, None)``, or ``(None, why)`` naming the byte
    that is not UTF-8 (its offset in stdout). Never replaced: a message nobody can read is named so.

    ``tail`` is the last :data:`imagebench.command.FINAL_MESSAGE_BYTES` of stdout, starting at ``offset``; when it was
    cut inside a character, those first continuation bytes are skipped.
    """
    skip = 0
    if offset > 0:
        while skip < min(3, len(tail)) and 0x80 <= tail[skip] <= 0xBF:
            skip += 1
    try:
        return tail[skip:].decode("utf-8"), None
    except UnicodeDecodeError as exc:
        at = offset + skip + exc.start
        return None, f"the final message (the end of stdout) is not UTF-8 text: byte 0x{tail[skip + exc.start]:02x} at offset {at} of stdout ({exc.reason})"


# A final message that is an answer starts with a JSON object or has an IMAGEBENCH_FINAL_JSON:
# line (imagebench.scoring.answer reads it); other text is talk, not an answer.
_ANSWER_TEXT = re.compile(r"\A\s*\{|^[ \t]*IMAGEBENCH_FINAL_JSON:", re.MULTILINE)


def _read_outputs(
    session: Session, ws: Workspace, rc: int, finished: _command.Finished | None = None, caps: dict[str, int] | None = None
) -> None:
    """Bind each leaving the command wrote to ``outputs/`` (read beneath the workspace's
    descriptor: no link followed, regular files only, each within its cap)."""
    for c in session.collect:
        order = (".npy", ".json") if c.what == "array" else (".json", ".npy")
        found = [f"outputs/{c.name}{ext}" for ext in order if ws.exists(f"outputs/{c.name}{ext}")]
        if not found:
            expected = f"outputs/{c.name}{order[0]}"
            why = f"the command exited with code {rc} {'and' if rc else 'but'} wrote no {expected}"
            if c.name == ANSWER_LEAVING and finished is not None:
                text, unreadable = final_message(finished.final, finished.final_offset)
                if unreadable is not None:
                    session.why_not(c.name, f"{why}, and {unreadable}", unreadable=True)
                    continue
                if text and _ANSWER_TEXT.search(text):
                    session.notes["final_message"] = text  # the answer's other source (read_leaving)
                elif text and text.strip():
                    why += " (its final message holds no answer: no JSON object, no IMAGEBENCH_FINAL_JSON: line)"
            session.why_not(c.name, why)
            continue
        rel = found[0]
        cap = (caps or {}).get(c.name, confine.Limits().workspace)
        try:
            session.namespace[c.name] = ws.read_array(rel, cap) if rel.endswith(".npy") else ws.read_json(rel, cap)
        except Refused as exc:
            session.why_not(c.name, str(exc), unreadable=True)
        except NotText as exc:
            session.why_not(c.name, f"{rel} {exc}", unreadable=True)
        except Exception as exc:
            session.why_not(c.name, f"{rel} could not be read: {type(exc).__name__}: {exc}", unreadable=True)


# --------------------------------------------------------------------------- parsing


_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _check_target(spec: str, target: str) -> None:
    module_name, sep, func_name = target.partition(":")
    if not sep or not _DOTTED.match(module_name) or not _DOTTED.match(func_name):
        raise SubjectError(
            f"subject {spec!r}: expected python:package.module:function, e.g. python:mypkg.solvers:segment"
        )


def _import_function(spec: str, target: str) -> Callable[..., Any]:
    _check_target(spec, target)
    module_name, _sep, func_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise SubjectError(
            f"subject {spec!r}: cannot import module {module_name!r} ({type(exc).__name__}: {exc})"
        ) from exc
    obj: Any = module
    for part in func_name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SubjectError(f"subject {spec!r}: module {module_name!r} has no attribute {func_name!r}") from None
    if not callable(obj):
        raise SubjectError(f"subject {spec!r}: {module_name}:{func_name} is a {type(obj).__name__}, not callable")
    return obj


def parse_subject(
    spec: str, *, sandbox: SandboxPolicy | None = None, isolate: bool = False, mcp: bool = False
) -> Subject:
    """Turn a command-line spec into a subject; an invalid spec raises SubjectError listing the valid forms.

    ``sandbox`` is how a ``command:`` subject (or an isolated ``python:`` one) is confined
    (default: :class:`SandboxPolicy()`, a bubblewrap sandbox without network); a command is
    refused here, saying how to install bubblewrap, when that sandbox cannot start on this
    machine. ``isolate`` runs a ``python:`` subject's function in a sandboxed child process.
    ``mcp`` serves a ``command:`` subject the case's tools over MCP while it works (``--subject-mcp``).
    """
    spec = spec.strip()
    if isolate and not spec.startswith("python:"):
        raise SubjectError(f"subject {spec!r}: --isolate applies to python: subjects only")
    if mcp and not spec.startswith("command:"):
        raise SubjectError(f"subject {spec!r}: --subject-mcp applies to command: subjects only")
    if spec == "reference":
        return ReferenceSubject()
    if spec == "nop":
        return NopSubject()
    if spec == "baseline":
        return BaselineSubject()
    if spec.startswith("python:"):
        target = spec[len("python:") :].strip()
        if not isolate:
            return PythonSubject(target=target, function=_import_function(spec, target))
        # Isolated: the spec is read as text and the code located without running any of it
        # (importing it here would run its top level in the harness, unconfined).
        _check_target(spec, target)
        subject = PythonSubject(target=target, function=None, isolate=sandbox or SandboxPolicy())
        subject.isolated()[0].check_sandbox()
        return subject
    if spec.startswith("command:"):
        command = spec[len("command:") :].strip()
        if not command:
            raise SubjectError(f"subject {spec!r}: the command is empty; valid subjects:\n{valid_forms()}")
        subject = CommandSubject(command=command, sandbox=sandbox or SandboxPolicy(), mcp=mcp)
        if mcp:
            _check_mcp_sdk(spec)
        subject.check_sandbox()
        return subject
    raise SubjectError(f"unknown subject {spec!r}; valid subjects:\n{valid_forms()}")


def _check_mcp_sdk(spec: str) -> None:
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise SubjectError(f"subject {spec!r}: --subject-mcp needs the MCP SDK: pip install 'mcp>=1.20'")


def subject_options(subject: object) -> dict[str, Any]:
    """The keyword arguments of :func:`parse_subject` that, with the subject's spec string,
    rebuild ``subject`` as confined as it is (a dask worker, ``--resume``)."""
    if isinstance(subject, CommandSubject):
        return {"sandbox": subject.sandbox, "mcp": True} if subject.mcp else {"sandbox": subject.sandbox}
    if isinstance(subject, PythonSubject) and subject.isolate is not None:
        return {"sandbox": subject.isolate, "isolate": True}
    return {}


def options_record(subject: object) -> dict[str, Any]:
    """:func:`subject_options` as JSON, for ``run.json``."""
    options = subject_options(subject)
    if not options:
        return {}
    out = {"sandbox": options["sandbox"].to_record(), "isolate": bool(options.get("isolate"))}
    if options.get("mcp"):
        out["mcp"] = True
    return out


def options_from_record(raw: object) -> dict[str, Any]:
    """What :func:`options_record` wrote, as keyword arguments; ValueError naming the bad field."""
    if raw in (None, {}):
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"expected an object with 'sandbox' and 'isolate', got {type(raw).__name__}")
    try:
        policy = SandboxPolicy.from_record(raw.get("sandbox"))
    except ValueError as exc:
        raise ValueError(f"field 'sandbox': {exc}") from None
    isolate = raw.get("isolate", False)
    if not isinstance(isolate, bool):
        raise ValueError(f"field 'isolate' is {isolate!r}, expected true or false")
    mcp = raw.get("mcp", False)
    if not isinstance(mcp, bool):
        raise ValueError(f"field 'mcp' is {mcp!r}, expected true or false")
    out: dict[str, Any] = {"sandbox": policy}
    if isolate:
        out["isolate"] = True
    if mcp:
        out["mcp"] = True
    return out


# --------------------------------------------------------------------------- running one


@dataclass
class SubjectRun:
    """How a subject's turn ended: its wall time, whether it timed out, and what it raised."""

    seconds: float
    timed_out: bool = False
    timeout_reason: str = ""
    error: str | None = None
    harness_error: str | None = None
    stopped: bool = False  # a person stopped the turn (``stop`` was set)
    resource_limit: str | None = None  # "resource-limit: memory (...)": it was ended for a limit


def bind_subject(subject: Subject, case: Case, context: UnitContext) -> Callable[[Session], None]:
    """The callable that works this sample: ``subject.bind(case, context)`` when it has one, else itself."""
    bind = getattr(subject, "bind", None)
    return bind(case, context) if bind is not None else subject


def _describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = "; ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames)
    text = f"{type(exc).__name__}: {exc}"
    return f"{text} (at {where})" if where else text


def run_subject(
    work: Callable[[Session], None], session: Session, timeout_s: float, stop: threading.Event | None = None
) -> SubjectRun:
    """Run ``work(session)`` with a time limit; ``stop`` (set from another thread) ends it early.

    In-process work runs in a daemon thread that is abandoned when it runs past ``timeout_s`` or is
    stopped (Python cannot kill a thread; the session is private to this sample, so nothing it
    still writes reaches a result); a command is killed with everything it started. Work that
    enforces its own limit (a command) gets a grace margin.
    """
    own_limit = bool(getattr(work, "enforces_timeout", False))
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            work(session)
        except SubjectTimeout as exc:
            outcome["timeout"] = str(exc)
        except SubjectResourceLimit as exc:
            outcome["limit"] = str(exc)
        except SubjectHarnessError as exc:
            outcome["harness"] = str(exc)
        except BaseException as exc:  # the subject's own failure: recorded, the run goes on
            outcome["error"] = _describe(exc)

    start = time.perf_counter()
    thread = threading.Thread(target=target, name=f"imagebench-subject:{session.label}", daemon=True)
    thread.start()
    cancel = getattr(work, "cancel", None)
    limit = timeout_s + (KILL_GRACE_S + 10.0 if own_limit else 0.0)
    try:
        if stop is None:
            thread.join(limit)
        else:
            while thread.is_alive() and time.perf_counter() - start < limit and not stop.is_set():
                thread.join(0.05)
    except BaseException:  # interrupted (Ctrl-C): take the subject's processes down with us
        if cancel is not None:
            cancel()
        raise
    if stop is not None and stop.is_set() and thread.is_alive():
        if cancel is not None:
            cancel()  # a command: its whole process tree ends now
        return SubjectRun(seconds=time.perf_counter() - start, stopped=True)
    seconds = time.perf_counter() - start
    if thread.is_alive():
        return SubjectRun(
            seconds=seconds, timed_out=True, timeout_reason=f"the subject ran past its {timeout_s:g} s limit"
        )
    if "timeout" in outcome:
        return SubjectRun(seconds=seconds, timed_out=True, timeout_reason=outcome["timeout"])
    if "limit" in outcome:
        return SubjectRun(seconds=seconds, resource_limit=outcome["limit"])
    return SubjectRun(seconds=seconds, error=outcome.get("error"), harness_error=outcome.get("harness"))
