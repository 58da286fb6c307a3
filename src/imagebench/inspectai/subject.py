"""The subject of a case run as an inspect_ai task: inspect's agent loop, reaching the case's
session only through the bench's MCP tools.

Its turn serves an :class:`~imagebench.subjects.mcp.tools.AgentSession` on a Unix socket in a
folder of the harness's (:class:`~imagebench.subjects.mcp.folder.McpFolder`), tells the task's
solver where the stdlib bridge to it is (:class:`Handoff`), and waits until the solver's agent
loop has ended and handed back what it measured (inspect's token usage, the loop's turns). The
transcript goes to the sample folder and what the agent left through the tools is scored, as for
every MCP subject. It has no spec string (the loop is inspect's, not ours to start), so it never
travels to a worker; it records ``sandbox: none``: the model runs elsewhere and its only channel
into this machine is the tools served here.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from imagebench.subjects.base import (
    Confinement,
    SubjectBudgetExceeded,
    SubjectError,
    SubjectInfraError,
    SubjectKind,
    SubjectTimeout,
)
from imagebench.usage import Usage, note_usage

if TYPE_CHECKING:
    from imagebench.case.session import Session


@dataclass
class Handoff:
    """Between the subject's turn (a thread of the harness) and the task's solver (inspect's loop).

    The turn calls :meth:`serving` with the bridge's path; the solver waits for it
    (:meth:`wait_serving`, None when the unit ended before a turn), runs its agent and calls
    :meth:`finish` with what it measured; the turn then ends. :meth:`cancel` (the turn's time
    limit, an interrupted run) ends the wait at once."""

    _ready: threading.Event = field(default_factory=threading.Event)
    _done: threading.Event = field(default_factory=threading.Event)
    _closed: threading.Event = field(default_factory=threading.Event)
    bridge: Path | None = None
    usage: Usage | None = None
    exceeded: str | None = None  # "budget-exceeded: ..." when inspect's limit ended the loop
    timed_out: str | None = None  # inspect's time limit (the case's) ended the loop
    error: str | None = None  # the agent loop raised (the subject's failure)
    infra: str | None = None  # the model provider could not be reached or refused the caller (infra-error)

    def serving(self, bridge: Path) -> None:
        self.bridge = bridge
        self._ready.set()

    def wait_serving(self, timeout: float | None = None) -> Path | None:
        """The bridge's path once the turn serves, None when the unit ends without a turn."""
        while not self._ready.is_set() and not self._closed.is_set():
            if not self._ready.wait(0.05) and timeout is not None:
                timeout -= 0.05
                if timeout <= 0:
                    return None
        return self.bridge if self._ready.is_set() else None

    def finish(
        self,
        usage: Usage | None,
        *,
        exceeded: str | None = None,
        timed_out: str | None = None,
        error: str | None = None,
        infra: str | None = None,
    ) -> None:
        self.usage, self.exceeded, self.timed_out, self.error = usage, exceeded, timed_out, error
        self.infra = infra
        self._done.set()

    def wait_done(self) -> None:
        self._done.wait()

    def cancel(self) -> None:
        self._done.set()

    def close(self) -> None:
        """The unit is over (scored or not): a solver still waiting for a turn stops waiting."""
        self._closed.set()


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def subject_name_for(model: str) -> str:
    """``inspect-<model id>`` as a folder name (``mockllm/model`` -> ``inspect-mockllm-model``)."""
    tail = _UNSAFE.sub("-", model.replace("/", "-")).strip("-._")[:55] or "model"
    return f"inspect-{tail}"


class InspectSubject(SubjectKind):
    """inspect_ai's agent loop over the case's MCP tools (:mod:`imagebench.inspectai.task`).

    Its noted usage is the harness's measure (``measures_usage``): the solver reads it from
    inspect's own accounting of the model calls it made, never from what the model says."""

    prefix = "inspect"  # its receipt form; never a spec anyone parses (it is not registered)
    measures_usage: ClassVar[bool] = True

    def __init__(self, model: str, handoff: Handoff) -> None:
        if not isinstance(model, str) or not model:
            raise SubjectError(f"inspect subject: expected a model id, got {model!r}")
        self.model, self.handoff = model, handoff
        self.name = subject_name_for(model)

    @property
    def sandbox_kind(self) -> Confinement:
        return "none"

    def describe(self) -> dict[str, Any]:
        return {"form": "inspect", "name": self.name, "model": self.model}

    def identity_parts(self) -> dict[str, Any]:
        return {"kind": "inspect", "model": self.model}

    def named(self, name: str) -> InspectSubject:
        import copy

        from imagebench.subjects.base import check_subject_name

        other = copy.copy(self)
        other.name = other.given_name = check_subject_name(name)
        return other

    def bind(self, case: Any, context: Any) -> Any:
        from imagebench.subjects.mcp.tools import CaseView

        view = CaseView.of(case)
        sample_dir = Path(context.sample_dir)
        handoff = self.handoff

        def work(session: Session) -> None:
            from imagebench.subjects.mcp.folder import BRIDGE_NAME, McpFolder
            from imagebench.subjects.mcp.host import transcript_note, write_transcript
            from imagebench.subjects.mcp.server import SocketServer
            from imagebench.subjects.mcp.tools import AgentSession

            folder = McpFolder()
            agent = AgentSession(view, session, reads=folder, route="socket")
            try:
                server = SocketServer(agent, folder.socket_path)
                try:
                    handoff.serving(folder.path / BRIDGE_NAME)
                    handoff.wait_done()
                finally:
                    server.close()
            finally:
                folder.remove()
                try:
                    write_transcript(agent, sample_dir)
                finally:
                    agent.apply_to(session)
                    session.notes["mcp"] = transcript_note(agent)
                    if handoff.usage is not None:
                        note_usage(session.notes, handoff.usage)
            if handoff.timed_out:
                raise SubjectTimeout(handoff.timed_out)
            if handoff.exceeded:
                raise SubjectBudgetExceeded(handoff.exceeded)
            if handoff.infra:
                raise SubjectInfraError(handoff.infra)
            if handoff.error:
                raise RuntimeError(handoff.error)

        work.cancel = handoff.cancel  # type: ignore[attr-defined]
        return work

    def __call__(self, session: Session) -> None:
        raise RuntimeError("an inspect subject works through the case it is bound to; call bind(case, context)")
