"""``command:<shell command>``: an external program or agent, run with bash in a fresh workspace.

The command runs inside a bubblewrap sandbox (:mod:`imagebench.sandbox.policy` says what it can see,
:mod:`imagebench.sandbox.process` runs it under its limits, :mod:`imagebench.sandbox.limits` holds them) unless
its policy says otherwise; ``--subject-mcp`` serves it the case's tools while it works
(:mod:`imagebench.subjects.mcp`); on a trigger case it gets the harness's ``skill`` tool
(:mod:`imagebench.subjects.skilltool`), the one way, besides MCP, a skill activation of its is
observed. Its workspace is read and written through :mod:`imagebench.sandbox.workspace`
only: never a path it controls.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.plane.token import READ_KEY_ENV, TENSOR_TOKEN_ENV
from imagebench.sandbox import limits as confine
from imagebench.sandbox import process as _command
from imagebench.sandbox.limits import SubjectIds
from imagebench.sandbox.policy import SandboxKind, SandboxPolicy, SandboxUnavailable, check_policy, unavailable_reason
from imagebench.sandbox.process import TENSOR_URL_ENV, CommandHarnessError
from imagebench.sandbox.workspace import NotText, Refused, Workspace
from imagebench.subjects.base import (
    SubjectError,
    SubjectHarnessError,
    SubjectInfraError,
    SubjectKind,
    SubjectResourceLimit,
    SubjectTimeout,
    UnitContext,
)
from imagebench.subjects.registry import subject_kind

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.case.session import Session
    from imagebench.sandbox.access import Access

WORKSPACE_ENV = "IMAGEBENCH_WORKSPACE"
# Never inherited by a command subject: where truth lives on disk and where reports go.
_WITHHELD_ENV = (
    "IMAGEBENCH_FIXTURES", "IMAGEBENCH_OUTCOME_DIR", TENSOR_URL_ENV, TENSOR_TOKEN_ENV, "IMAGEBENCH_SUPERVISED",
    READ_KEY_ENV, "IMAGEBENCH_PLANE_UPLOAD_KEY",
)  # fmt: skip
# The leaving a command's final message may stand for (a structured answer; see read_leaving).
ANSWER_LEAVING = "answer"
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@subject_kind
@dataclass(frozen=True)
class CommandSubject(SubjectKind):
    """An external program, run with bash in a fresh workspace folder.

    The workspace holds ``prompt.md``, ``inputs/<layer>.npy`` for each array layer (points and
    shapes too) and an empty ``outputs/``; ``fixture_tensors.json`` as well when the case presents
    tensors. The command runs there with ``$IMAGEBENCH_WORKSPACE`` set (and
    ``$IMAGEBENCH_TENSOR_URL`` only when the runner gives a data-plane address); when it ends,
    each ``outputs/<name>.npy`` or ``outputs/<name>.json`` is read into the session namespace
    (never a recorded leaving's: on a trigger case ``$IMAGEBENCH_SKILL_TOOL`` and ``skill-tool.md``
    give it the harness's skill tool, shown read-only at ``/skill``, and ``outputs/trace.json``
    is ignored).
    Its stdout and stderr go to ``stdout.txt``/``stderr.txt`` in the sample folder (8 MiB each at
    most, with a marker saying what was dropped). When it returns or runs past the time limit,
    everything it started is killed.

    ``sandbox`` says what it can see and reach (by default: a bubblewrap sandbox, no network, the
    harness's Python without imagebench; see :mod:`imagebench.sandbox.policy`); ``sandbox_kind`` is what
    a run records. Where bubblewrap cannot start, binding refuses the subject unless the policy
    is ``SandboxPolicy(enabled=False)``.

    The workspace is a temporary folder removed afterwards (even when this process is killed),
    unless ``keep_workspace`` is set: then it is ``<sample folder>/workspace`` and stays.
    """

    prefix = "command:"
    forms = (("command:<shell command>", "runs the command with bash in a sandboxed fresh workspace (prompt.md, inputs/, outputs/)"),)
    flags = frozenset({"mcp"})

    command: str
    keep_workspace: bool = False
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    # ``--subject-mcp``: the harness serves the session's tools over MCP while the command works
    # (``mcp.json`` in its workspace; imagebench.subjects.mcp), and scores what it left through them.
    mcp: bool = False
    given_name: str | None = None  # --subject-name

    @classmethod
    def parse(cls, spec: str, *, sandbox: SandboxPolicy | None, isolate: bool, mcp: bool) -> CommandSubject:
        from imagebench.subjects.registry import valid_forms

        command = spec[len(cls.prefix) :].strip()
        if not command:
            raise SubjectError(f"subject {spec!r}: the command is empty; valid subjects:\n{valid_forms()}")
        subject = cls(command=command, sandbox=sandbox or SandboxPolicy(), mcp=mcp)
        if mcp:
            _check_mcp_sdk(spec)
        subject.check_sandbox()
        return subject

    @classmethod
    def describe_spec(cls, spec: str) -> dict[str, Any]:
        command = spec[len(cls.prefix) :].strip()
        return {
            "form": "command",
            "program": _program_name(command),
            "command_sha256": hashlib.sha256(command.encode("utf-8")).hexdigest(),
        }

    def describe(self) -> dict[str, Any]:
        return self.describe_spec(self.spec())

    def spec(self) -> str:
        """``command:<command>``; a command that keeps its workspace has none (the workspace would
        stay wherever it ran, so it cannot travel to a worker)."""
        if self.keep_workspace:
            raise SubjectError(
                "a command subject that keeps its workspace cannot run on workers (the workspace would stay on the worker)"
            )
        return f"command:{self.command}"

    def options(self) -> dict[str, Any]:
        return {"sandbox": self.sandbox, "mcp": True} if self.mcp else {"sandbox": self.sandbox}

    @property
    def name(self) -> str:
        if self.given_name is not None:
            return self.given_name
        digest = hashlib.sha256(self.command.encode("utf-8")).hexdigest()[:8]
        return f"command-{digest}-mcp" if self.mcp else f"command-{digest}"

    def identity_parts(self) -> dict[str, Any]:
        """The sha256 of the command line, whether it is served MCP tools, and the digest of every
        tree ``--subject-expose`` shows it (its own code: what it runs beyond the command line)."""
        from imagebench.subjects.identity import expose_code

        return {
            "kind": "command",
            "command_sha256": hashlib.sha256(self.command.encode("utf-8")).hexdigest(),
            "mcp": self.mcp,
            "expose": expose_code(self.sandbox.expose),
        }

    def spec_words(self) -> str:
        """How the subject is named in a message: its spec, or its command for a kind whose spec needs more."""
        try:
            return self.spec()
        except SubjectError:
            return f"command:{self.command}"

    @property
    def access(self) -> Access | None:
        """The access setting the run declared (``--access``; None: none, what a command always had)."""
        from imagebench.sandbox.access import parse_access

        return parse_access(self.sandbox.access) if self.sandbox.access is not None else None

    @property
    def sandbox_kind(self) -> SandboxKind:
        """``"bubblewrap"`` or ``"none"``: what a run records about how this subject was confined."""
        return self.sandbox.kind

    @property
    def limits(self) -> dict[str, int | None] | None:
        return self.sandbox.limits.to_record() if self.sandbox.enabled else None

    @property
    def out_of_process(self) -> bool:
        return True

    @property
    def env_pass(self) -> tuple[str, ...]:
        return self.sandbox.env_pass

    def check_sandbox(self) -> None:
        """Raise :class:`SubjectError` (saying how to install bubblewrap) when the sandbox cannot start,
        or naming why the run's access setting cannot hold this command (:mod:`imagebench.sandbox.access`)."""
        access = self.access
        if access is not None:
            from imagebench.sandbox.access import subject_problem

            why = subject_problem(access, sandboxed=self.sandbox.enabled, mcp=self.mcp, command=self.command)
            if why is not None:
                raise SubjectError(f"subject {self.spec_words()!r}: {why}")
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
        skills = texts = None
        access = self.access
        # a trigger case: the harness's skill tool records activations (not under tools: no program runs but the command's)
        if any(c.recorded for c in case.collect) and (access is None or access.code):
            from imagebench.case.skills import offered_skills, skill_instructions

            skills, texts = offered_skills(case), skill_instructions(case)
        if self.mcp:
            from imagebench.subjects.mcp.tools import CaseView

            return self.bound(context, view=CaseView.of(case), skills=skills, texts=texts, access=access)
        return self.bound(context, skills=skills, texts=texts, access=access)

    def bound(self, context: UnitContext, **kw: Any) -> _BoundCommand:
        """The callable that works one sample (a kind built on a command returns its own)."""
        return _BoundCommand(self, context, **kw)

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
    view: Any = None  # an imagebench.subjects.mcp.tools.CaseView when the command gets the MCP server
    # {skill id: what it is for} when the command gets the harness's skill tool (a trigger case;
    # imagebench.subjects.skilltool): the one way its skill activations are observed, besides MCP
    skills: Mapping[str, str] | None = None
    texts: Mapping[str, str] | None = None  # each skill's instructions (its SKILL.md), what activating it returns
    access: Access | None = None  # the run's access setting (imagebench.sandbox.access), enforced here
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
        if self.access is None:
            _prepare_workspace(session, ws, ctx.files)
        else:
            from imagebench.subjects.access import prepare_access

            prepare_access(session, ws, ctx.files, self.access, prepare=_prepare_workspace)
        sandboxed = self.subject.sandbox.enabled
        binds: list[tuple[Path, str]] = []
        env: dict[str, str] = {}
        mcp_shown: str | None = None
        with ExitStack() as stack:
            if self.skills is not None:
                from imagebench.subjects.skilltool import SKILL_SHOWN, provided

                tool = stack.enter_context(
                    provided(
                        self.skills, session, ws, sandboxed=sandboxed, sample_dir=ctx.sample_dir, ids=ids,
                        instructions=self.texts,
                    )  # fmt: skip
                )
                env.update(tool.env)
                if sandboxed:
                    binds.append((tool.folder.path, SKILL_SHOWN))
            if self.view is not None:
                from imagebench.subjects.mcp.folder import MCP_SHOWN
                from imagebench.subjects.mcp.host import served

                folder = stack.enter_context(
                    served(self.view, session, ws, sandboxed=sandboxed, sample_dir=ctx.sample_dir, ids=ids, access=self.access)
                )
                mcp_shown = MCP_SHOWN if sandboxed else str(folder.path)
                if sandboxed:
                    binds.append((folder.path, MCP_SHOWN))
            more, home = self.prepare(session, ws, mcp_shown=mcp_shown, sandboxed=sandboxed)
            self._run(session, ws, tw, ids, binds=tuple(binds), env={**env, **more}, home=home)

    # What a kind built on a command adds (imagebench.subjects.agents); nothing here.
    def prepare(
        self, session: Session, ws: Workspace, *, mcp_shown: str | None, sandboxed: bool
    ) -> tuple[dict[str, str], str | None]:
        """Before the command starts: more environment for it, and the sandboxed command's HOME
        (None: /tmp). ``mcp_shown`` is where it reaches the MCP folder (None: not served)."""
        return {}, None

    def ended(
        self, session: Session, ws: Workspace, finished: _command.Finished
    ) -> tuple[_command.Finished, str | None]:
        """Once the command has ended (its workspace still there): the final message its answer is
        read from, and an infrastructure failure its own output reported (None: none)."""
        return finished, None

    def _run(
        self,
        session: Session,
        ws: Workspace,
        tw: _command.TemporaryWorkspace,
        ids: SubjectIds | None,
        binds: tuple[tuple[Path, str], ...] = (),
        env: Mapping[str, str] | None = None,
        home: str | None = None,
    ) -> None:
        ctx = self.context
        policy = self.subject.sandbox
        if self.access is not None:  # the evidence: every file the subject finds when it starts
            from imagebench.subjects.access import note_workspace

            note_workspace(session, ws)
        if ids is not None:
            ws.chown_all(ids.uid, ids.gid)  # the subject's uid owns what the harness wrote for it
        finished = _command.run(
            self.subject.command,
            tw.path,
            sample_dir=ctx.sample_dir,
            timeout_s=ctx.timeout_s,
            env=_child_env(
                tw.path, ctx.tensor_url if self.access is None or self.access.files else None,
                {**ctx.env, **(env or {})}, policy.env_pass, tensor_token=ctx.tensor_token,
            ),  # fmt: skip
            policy=policy,
            tensor_url=ctx.tensor_url if self.access is None or self.access.files else None,
            hidden=(ctx.sample_dir, *ctx.hidden),
            running=self._running,
            reaper=tw.reaper,
            limits=policy.limits if policy.enabled else None,
            ids=ids,
            sized=tw.sized,
            binds=binds,
            home=home,
        )
        session.notes["exit_code"] = finished.returncode
        finished, infra = self.ended(session, ws, finished)
        if finished.limit is not None:
            raise SubjectResourceLimit(f"resource-limit: {finished.limit} ({_LIMIT_WORDS[finished.limit](policy.limits)})")
        if finished.timed_out:
            raise SubjectTimeout(f"the command ran past its {ctx.timeout_s:g} s limit and was killed")
        if infra is not None:
            raise SubjectInfraError(infra)
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
    "plane": lambda lim: f"it sent the data plane more than {confine.show_size(lim.workspace)} and was ended",
}


def _prepare_workspace(session: Session, ws: Workspace, files: Path | None = None, prompt: str | None = None) -> None:
    """``prompt.md`` (``prompt``, default the session's), ``inputs/<layer>.npy``, ``outputs/``,
    ``files/`` and ``fixture_tensors.json``, written beneath the fresh workspace's descriptor
    before the subject starts."""
    try:
        ws.write_text("prompt.md", session.prompt if prompt is None else prompt)
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
    workspace: Path,
    tensor_url: str | None,
    extra: dict[str, str] | None = None,
    passed: tuple[str, ...] = (),
    *,
    tensor_token: str | None = None,
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
        if tensor_token:
            env[TENSOR_TOKEN_ENV] = tensor_token
    return env


def final_message(tail: bytes, offset: int) -> tuple[str | None, str | None]:
    """The end of a command's stdout as text: ``(text, None)``, or ``(None, why)`` naming the byte
    that is not UTF-8 (its offset in stdout). Never replaced: a message nobody can read is named so.

    ``tail`` is the last :data:`imagebench.sandbox.process.FINAL_MESSAGE_BYTES` of stdout, starting at ``offset``; when it was
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
    descriptor: no link followed, regular files only, each within its cap). A recorded leaving
    (a trigger case's ``trace``) is never read: a file under its name is only noted as ignored.
    A ``tracks`` leaving may be a CTC result folder ``outputs/<name>/`` (:func:`_read_ctc_folders`)."""
    bound = _read_ctc_folders(session, ws, caps or {})
    for c in session.collect:
        order = (".npy", ".json") if c.what == "array" else (".json", ".npy")
        if c.name in bound:
            continue
        if c.recorded:
            written = [f"outputs/{c.name}{ext}" for ext in order if ws.kind(f"outputs/{c.name}{ext}") is not None]
            if written:
                session.ignored(c.name, " and ".join(written))
            continue
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


def _read_ctc_folders(session: Session, ws: Workspace, caps: dict[str, int]) -> set[str]:
    """Each ``tracks`` leaving (``Collect.layer == "tracks"``) written as a CTC result folder
    ``outputs/<name>/`` (``mask000.tif`` ... and ``res_track.txt``), read by
    :meth:`Workspace.read_ctc_result`: its lineage table binds ``<name>`` as an ``(n, 4)`` array and
    its masks bind the case's label leaving on the same grid (``layer == "labels"``, the same
    ``like``). The names it settled (bound, or refused with why); a leaving also written as
    ``.npy`` beside the folder is refused as two answers."""
    settled: set[str] = set()
    for c in session.collect:
        if c.layer != "tracks" or c.recorded:
            continue
        rel = f"outputs/{c.name}"
        what = ws.kind(rel)
        if what in (None, "file"):
            continue
        masks = next((m for m in session.collect if m.layer == "labels" and m.like == c.like and not m.recorded), None)
        names = [c.name] if masks is None else [c.name, masks.name]
        settled.update(names)
        twice = [f"outputs/{n}.npy" for n in names if ws.exists(f"outputs/{n}.npy")]
        if twice:
            why = f"{rel}/ is a CTC result folder, and {' and '.join(twice)} too: leave one answer"
            for n in names:
                session.why_not(n, why, unreadable=True)
            continue
        cap = sum(caps.get(n, confine.Limits().workspace) for n in names)
        try:
            movie = ws.read_ctc_result(rel, cap)
        except Refused as exc:
            for n in names:
                session.why_not(n, f"{rel}/ (a CTC result folder) was refused: {exc}", unreadable=True)
            continue
        except NotText as exc:
            for n in names:
                session.why_not(n, f"{rel}/res_track.txt {exc}", unreadable=True)
            continue
        except OSError as exc:
            for n in names:
                session.why_not(n, f"{rel}/ could not be read: {exc}", unreadable=True)
            continue
        session.namespace[c.name] = movie.lineage.as_array()
        if masks is not None:
            session.namespace[masks.name] = movie.labels
        read = f"{rel}/ ({movie.frames} frames, {len(movie.lineage.tracks)} tracks)"
        session.notes.setdefault("ctc_folders", {})[c.name] = read
    return settled


def _check_mcp_sdk(spec: str) -> None:
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise SubjectError(f"subject {spec!r}: --subject-mcp needs the MCP SDK: pip install 'mcp>=1.20'")


def _program_name(command: str) -> str:
    """The program a command runs (its first word that is not an assignment, a wrapper or a flag)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        if _ENV_ASSIGNMENT.match(word) or word in ("env", "exec", "nice", "time", "timeout"):
            continue
        if word.startswith("-") or word.replace(".", "").isdigit():
            continue
        return Path(word).name or "?"
    return "?"

