"""What every agent CLI subject shares: a ``command:`` subject whose command line its kind builds.

An agent CLI kind (``claude-code``, ``codex``, ``gemini-cli``, ``agent-cli:``) is a
:class:`~imagebench.subjects.command.CommandSubject` served the case's MCP tools, with:

- its CLI found on this machine's PATH when the spec is parsed, and refused unless the sandbox
  shows it (``--subject-expose`` the folder it lives in);
- a private HOME (:mod:`.home`) seeded from ``--subject-home`` and holding the MCP configuration
  in the CLI's own format and place (:meth:`AgentCliSubject.configure`);
- its answer read from the CLI's own output format (:meth:`AgentCliSubject.envelope`): the final
  message inside the envelope is what a ``command:`` subject's stdout is (a JSON object, or an
  ``IMAGEBENCH_FINAL_JSON:`` line);
- an infrastructure failure its output reports (:meth:`AgentCliSubject.infra`: network, login,
  rate limit) ending the turn ``infra-error``, worked again fresh up to ``--retries`` times;
- its log files kept in the sample folder, and ``agent.json`` (:mod:`.envelope`).

Environment: only what a ``command:`` subject gets, and the host variables the run names
(``--subject-env-pass``: an API key); the names a kind's CLI reads are listed in ``api_keys``
for the docs and the error that says which to pass.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from imagebench.sandbox.policy import WORKSPACE, SandboxPolicy
from imagebench.subjects.agents import home as _home
from imagebench.subjects.agents.envelope import AGENT_RECORD, AgentAttempt, AgentRecord, Envelope
from imagebench.subjects.base import AgentOptions, SubjectError, SubjectInfraError, UnitContext
from imagebench.subjects.command import CommandSubject, _BoundCommand
from imagebench.usage import Usage, note_usage

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.sandbox.process import Finished
    from imagebench.sandbox.workspace import Workspace

#: the prompt file an agent CLI is handed (the case prompt and how to reach the tools)
AGENT_PROMPT = "agent-prompt.md"
_TOOLS_NOTE = (
    "\n\nYou have the imagebench MCP server's tools (server `imagebench`): call get_prompt, leave what it asks "
    "for with add_layer / set_answer, then call submit. A structured answer may instead end your final "
    "message as one line: IMAGEBENCH_FINAL_JSON: {...}\n"
)
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$")
_PROGRAM_MAX = 512 * 1024 * 1024


@dataclass(frozen=True)
class AgentCliSubject(CommandSubject):
    """An agent CLI as a subject (see the module). A kind sets the class variables and implements
    :meth:`argv`, :meth:`configure`, :meth:`envelope` and :meth:`infra`."""

    #: the spec word (``claude-code``), the program on PATH, the host variables its CLI reads for
    #: its key, and the folders of its private HOME that hold its logs
    cli: ClassVar[str] = ""
    program: ClassVar[str] = ""
    api_keys: ClassVar[tuple[str, ...]] = ()
    log_folders: ClassVar[tuple[str, ...]] = ()
    flags = frozenset({"agent"})  # always served MCP (``mcp`` is set): --subject-mcp is a command:'s

    model: str | None = None
    agent: AgentOptions = field(default_factory=AgentOptions)
    program_path: str = ""  # the CLI as found on PATH when parsed

    # ---------------------------------------------------------------- grammar

    @classmethod
    def matches(cls, spec: str) -> bool:
        return spec == cls.cli or spec.startswith(cls.cli + ":")

    @classmethod
    def parse(  # type: ignore[override]
        cls, spec: str, *, sandbox: SandboxPolicy | None, isolate: bool, mcp: bool, agent: AgentOptions | None = None
    ) -> AgentCliSubject:
        model = spec[len(cls.cli) + 1 :].strip() if spec.startswith(cls.cli + ":") else None
        if model is not None and not _MODEL.match(model):
            raise SubjectError(
                f"subject {spec!r}: the model {model!r} is not a model name (letters, digits and . _ : / @ + -)"
            )
        return cls.made(model=model, sandbox=sandbox or SandboxPolicy(), agent=agent or AgentOptions(), spec=spec)

    @classmethod
    def made(cls, *, model: str | None, sandbox: SandboxPolicy, agent: AgentOptions, spec: str) -> AgentCliSubject:
        """The subject, its program found and checked against what the sandbox shows."""
        program = cls.find_program(spec, sandbox)
        if agent.home is not None:
            from imagebench.sandbox.policy import harness_paths

            agent = AgentOptions(retries=agent.retries, home=_home.check_template(agent.home, secret=harness_paths()))
        subject = cls(command="", model=model, sandbox=sandbox, mcp=True, agent=agent, program_path=program)
        subject = _with_command(subject)
        subject.check_sandbox()
        return subject

    @classmethod
    def find_program(cls, spec: str, sandbox: SandboxPolicy) -> str:
        found = shutil.which(cls.program)
        if found is None:
            raise SubjectError(
                f"subject {spec!r}: {cls.program!r} is not on PATH; install the CLI (docs/agents.md, section {cls.cli})"
            )
        found = os.path.abspath(found)
        if sandbox.enabled:
            from imagebench.sandbox.policy import shown_tree

            hidden = [p for p in (found, os.path.realpath(found)) if shown_tree(sandbox, p) is None]
            if hidden:
                raise SubjectError(
                    f"subject {spec!r}: {cls.program} is {hidden[0]}, which the sandbox does not show; give "
                    f"--subject-expose {Path(hidden[0]).parent} (the CLI's own install, read-only)"
                )
        return found

    def spec(self) -> str:
        return self.cli if self.model is None else f"{self.cli}:{self.model}"

    def options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sandbox": self.sandbox}
        if self.agent:
            out["agent"] = self.agent
        return out

    @property
    def name(self) -> str:
        if self.given_name is not None:
            return self.given_name
        if self.model is None:
            return self.cli
        return f"{self.cli}-{re.sub(r'[^A-Za-z0-9._-]+', '_', self.model)}"[:64].rstrip(".-")

    @classmethod
    def describe_spec(cls, spec: str) -> dict[str, Any]:
        model = spec[len(cls.cli) + 1 :].strip() if spec.startswith(cls.cli + ":") else None
        return {"form": cls.cli, "program": cls.program, "model": model}

    def describe(self) -> dict[str, Any]:
        return {**self.describe_spec(self.spec()), "name": self.name, "home_template": self.agent.home is not None}

    def identity_parts(self) -> dict[str, Any]:
        """The kind, the model, the digest of the CLI's program file, of the command line it is run
        with, of every tree ``--subject-expose`` shows it and of the template HOME."""
        from imagebench.subjects.identity import code_tree, expose_code

        return {
            "kind": self.cli,
            "model": self.model,
            "program": program_digest(self.program_path),
            "command_sha256": hashlib.sha256(self.command.encode("utf-8")).hexdigest(),
            "expose": expose_code(self.sandbox.expose),
            "home": code_tree(self.agent.home, role="--subject-home") if self.agent.home is not None else None,
        }

    # ---------------------------------------------------------------- what a kind implements

    def argv(self, prompt: str, home: str) -> list[str]:
        """The CLI's documented non-interactive command line (``prompt``: a shell word that expands
        to the prompt; ``home``: one that expands to the private HOME, ``"$HOME"``)."""
        raise NotImplementedError

    def configure(self, ws: Workspace, server: dict[str, Any], *, workdir: str) -> None:
        """Write the MCP configuration (``server``: the ``mcpServers`` entry of the case's server)
        in the CLI's own format and place in the private HOME (:func:`.home.write_home`);
        ``workdir`` is the folder the CLI works in, as it sees it (a CLI that trusts folders)."""
        raise NotImplementedError

    def envelope(self, stdout: str) -> Envelope:
        """The CLI's envelope parsed from its stdout."""
        raise NotImplementedError

    def infra(self, envelope: Envelope, exit_code: int, stderr: str) -> str | None:
        """The infrastructure failure the CLI reported (network, login, rate limit), in words, or None."""
        raise NotImplementedError

    def environment(self, sandboxed: bool, root: str) -> dict[str, str]:
        """More variables for the CLI (never a host value: those pass only by ``--subject-env-pass``)."""
        return {}

    # ---------------------------------------------------------------- binding

    def bound(self, context: UnitContext, **kw: Any) -> _BoundCommand:
        return _BoundAgent(self, context, **kw)


def _with_command(subject: AgentCliSubject) -> AgentCliSubject:
    """The subject with its command line built (the prompt read from the workspace's file)."""
    import dataclasses

    words = subject.argv('"$(cat ' + AGENT_PROMPT + ')"', '"$HOME"')
    command = " ".join(w if w.startswith('"$') else shlex.quote(w) for w in [subject.program_path, *words])
    return dataclasses.replace(subject, command=command)


def program_digest(path: str) -> dict[str, Any]:
    """``{"name", "sha256"}`` of the CLI's program file (through its links: the file that runs)."""
    real = os.path.realpath(path)
    h = hashlib.sha256()
    try:
        with open(real, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > _PROGRAM_MAX:
                raise SubjectError(
                    f"the agent CLI {path} is over {_PROGRAM_MAX >> 20} MiB; its code cannot be digested"
                )
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        raise SubjectError(f"the agent CLI {path} cannot be read to digest its code: {exc.strerror}") from None
    return {"name": Path(path).name, "sha256": h.hexdigest()}


def killed(returncode: int) -> bool:
    """Whether a command's exit status says a signal ended it (negative, or a shell's 128 + N)."""
    return returncode < 0 or 128 < returncode <= 128 + 64


def last_lines(stderr: str, n: int = 5) -> str:
    """The last ``n`` lines of a CLI's stderr that hold text (where a CLI that died says why)."""
    return "\n".join([line for line in stderr.splitlines() if line.strip()][-n:])


def matching(patterns: tuple[tuple[str, re.Pattern[str]], ...], *texts: str | None) -> str | None:
    """The name of the first pattern any of ``texts`` matches, and where: ``"rate limit (429 ...)"``."""
    for name, pattern in patterns:
        for t in texts:
            if t:
                m = pattern.search(t)
                if m:
                    start = max(0, m.start() - 40)
                    return f"{name}: {' '.join(t[start : m.end() + 80].split())}"
    return None


#: Patterns of infrastructure failures the CLIs print (shared by the kinds; each applies them only to
#: text its CLI wrote as an error, never to the model's own message). Error codes are matched as whole
#: words and in their own case (``ENOTFOUND``, never the inside of ``ModuleNotFoundError``).
NETWORK = re.compile(
    r"\b(?:ECONNREFUSED|ENOTFOUND|ETIMEDOUT|ECONNRESET|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH)\b|"
    r"(?i:\bgetaddrinfo\b|\bfetch failed\b|\bConnection error\b|\berror sending request\b|\bdns error\b|"
    r"\bNetwork is unreachable\b|\bstream disconnected\b|\bconnection (?:refused|reset|timed out)\b)"
)
AUTH = re.compile(
    r"\b(?:401|403)\b|\b(?:PERMISSION_DENIED|UNAUTHENTICATED)\b|"
    r"(?i:\bUnauthorized\b|\bauthentication_error\b|\bInvalid API key\b|\bAPI key not valid\b|"
    r"\binvalid x-api-key\b|\bPlease run /login\b|\bNot logged in\b)"
)
RATE = re.compile(
    r"\b429\b|\bRESOURCE_EXHAUSTED\b|(?i:\brate[_ ]limit|\bToo Many Requests\b|\bquota exceeded\b|"
    r"\bexceeded your current quota\b|\bexceeded retry limit\b)"
)
OUTAGE = re.compile(
    r"\b(?:500|502|503|504|529)\b|\bUNAVAILABLE\b|(?i:\boverloaded(?:_error)?\b|\bInternal server error\b)"
)
INFRA_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("rate limit", RATE),
    ("authentication", AUTH),
    ("provider outage", OUTAGE),
    ("network", NETWORK),
)


@dataclass
class _BoundAgent(_BoundCommand):
    """One sample of an agent CLI: its private HOME and configuration, its envelope, its logs,
    and the attempts a retry adds."""

    record: AgentRecord | None = None

    def __call__(self, session: Session) -> None:
        subject: AgentCliSubject = self.subject  # type: ignore[assignment]
        self.record = AgentRecord(
            cli=subject.cli, program=subject.program, model=subject.model, home_template=subject.agent.home is not None
        )
        # A retried turn starts again from the session as it was: nothing a failed attempt left counts.
        fresh = (dict(session.namespace), dict(session.layers), copy.deepcopy(session.notes))
        try:
            for attempt in range(subject.agent.retries + 1):
                if attempt:
                    session.namespace, session.layers, session.notes = (
                        dict(fresh[0]), dict(fresh[1]), copy.deepcopy(fresh[2]),
                    )  # fmt: skip
                try:
                    super().__call__(session)
                    return
                except SubjectInfraError:
                    if attempt == subject.agent.retries:
                        raise
        finally:
            self._write_record(session)

    def _write_record(self, session: Session) -> None:
        from imagebench.records import write_record

        if self.record is None:
            return
        try:
            write_record(self.context.sample_dir / AGENT_RECORD, self.record)
        except OSError:
            return
        attempts = self.record.attempts
        session.notes["agent"] = {
            "cli": self.record.cli,
            "model": self.record.model,
            "attempts": len(attempts),
            "infra_errors": [a.infra_error for a in attempts if a.infra_error],
            "envelope": attempts[-1].envelope.parsed if attempts else False,
            "usage": attempts[-1].envelope.usage.model_dump(exclude_none=True) if attempts else {},
            "logs": [g.kept_as for g in self.record.logs if g.kept_as],
            "record": AGENT_RECORD,
        }
        spent = _reported(attempts)
        if spent is not None:
            note_usage(session.notes, spent)

    def prepare(
        self, session: Session, ws: Workspace, *, mcp_shown: str | None, sandboxed: bool
    ) -> tuple[dict[str, str], str | None]:
        from imagebench.subjects.mcp.server import SERVER_NAME, client_config

        subject: AgentCliSubject = self.subject  # type: ignore[assignment]
        left_out = _home.seed(ws, subject.agent.home, hidden=(self.context.sample_dir, *self.context.hidden))
        if left_out:
            session.notes["home_left_out"] = left_out[:50]
        if mcp_shown is None:
            raise SubjectError(f"{subject.cli}: the case's MCP server was not served")
        workdir = WORKSPACE if sandboxed else str(ws.root)
        subject.configure(ws, client_config(mcp_shown)["mcpServers"][SERVER_NAME], workdir=workdir)
        ws.write_text(AGENT_PROMPT, session.prompt.rstrip("\n") + _TOOLS_NOTE)
        env = subject.environment(sandboxed, str(ws.root))
        if sandboxed:
            return env, f"{WORKSPACE}/{_home.HOME}"
        return {**env, "HOME": str(ws.root / _home.HOME)}, None

    def ended(self, session: Session, ws: Workspace, finished: Finished) -> tuple[Finished, str | None]:
        from dataclasses import replace

        subject: AgentCliSubject = self.subject  # type: ignore[assignment]
        assert self.record is not None
        kept = len([g for g in self.record.logs if g.kept_as])
        logs = _home.keep_logs(ws, self.context.sample_dir, subject.log_folders, kept=kept)
        self.record.logs = [*self.record.logs, *logs]
        stdout = _read_own(self.context.sample_dir / "stdout.txt")
        stderr = _read_own(self.context.sample_dir / "stderr.txt", tail=64 * 1024)
        envelope = subject.envelope(stdout)
        if not envelope.parsed:  # an error envelope a CLI prints on stderr (Gemini CLI's, when it fails)
            on_stderr = subject.envelope(stderr)
            if on_stderr.parsed and on_stderr.is_error:
                envelope = on_stderr.model_copy(update={"final_message": None})
        infra = None
        if finished.limit is None and not finished.timed_out and not killed(finished.returncode):
            # A CLI that died of a signal did not end on its own, so did not report why: whatever error
            # its output holds was written by someone (a model with a shell, writing to its CLI's
            # stdout and killing it) before it was killed, and is the subject's, never an excuse.
            infra = subject.infra(envelope, finished.returncode, stderr)
        elif (
            finished.limit is None
            and finished.timed_out
            and envelope.parsed
            and envelope.is_error
            and not envelope.busy
        ):
            # Past its limit while its own output said it could not reach its model (Codex waits for the
            # network, streaming its reconnects): the outage's, not the subject's, when it says so.
            infra = subject.infra(envelope, finished.returncode, stderr)
            if infra is not None:
                infra = f"it ran past its time limit; {infra}"
                finished = replace(finished, timed_out=False)
        self.record.attempts = [
            *self.record.attempts,
            AgentAttempt(exit_code=finished.returncode, envelope=envelope, infra_error=infra),
        ]
        if infra is not None:
            return finished, f"{subject.cli} reported an infrastructure failure ({infra})"
        if envelope.parsed:
            message = (envelope.final_message or "").encode("utf-8")
            finished = replace(finished, final=message, final_offset=0)
        return finished, None


def _read_own(path: Path, tail: int | None = None) -> str:
    """A file the harness itself wrote in the sample folder (the command's captured output)."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    if tail is not None:
        data = data[-tail:]
    return data.decode("utf-8", "replace")


def _reported(attempts: list[AgentAttempt]) -> Usage | None:
    """What the CLI's envelopes said it spent over every attempt (a retried turn spent too), as one
    ``reported`` usage record; None when no envelope reported a figure or one is not a valid count."""
    from imagebench.usage import reported_usage

    usages = [a.envelope.usage for a in attempts]

    def total(name: str) -> Any:
        values = [getattr(u, name) for u in usages if getattr(u, name) is not None]
        return sum(values) if values else None

    figures = {
        "tokens_in": total("input_tokens"),
        "tokens_out": total("output_tokens"),
        "turns": total("turns"),
        "tool_calls": total("tool_calls"),
        "cost_usd": total("cost_usd"),
    }
    model = next((u.model for u in reversed(usages) if u.model), None)
    # Each figure stands or falls alone: one the envelope got wrong (a blank model id, a cost of NaN,
    # a count past what a float holds) is left out, never taking the others (the tokens a budget
    # is checked against) with it.
    kept: dict[str, Any] = {}
    for name, value in [*figures.items(), ("model", model)]:
        if value is None:
            continue
        try:
            reported_usage(**{name: value})
        except (ValueError, OverflowError):
            continue
        kept[name] = value
    if not kept:
        return None
    return reported_usage(**kept)
