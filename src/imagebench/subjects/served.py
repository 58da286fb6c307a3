"""The served MCP subject (``imagebench mcp serve``): whatever client connects is the agent.

The session is served on this process's stdio or on loopback HTTP (:mod:`imagebench.subjects.mcp.server`);
what the agent leaves through the tools is scored; a session whose client called no tool (a bare
``tools/list`` probe) is ``not-attempted``, excluded from every figure and counted. Unconfined (the client is not ours to start),
so a run records it as ``sandbox: none``; with no spec string it never travels to a worker.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.subjects.base import Confinement, SubjectKind, SubjectNotAttempted, SubjectTimeout
from imagebench.subjects.mcp.host import transcript_note, write_transcript
from imagebench.subjects.mcp.tools import AgentSession, CaseView

if TYPE_CHECKING:
    from imagebench.case.session import Session


class ServedSubject(SubjectKind):
    """A subject whose turn is an MCP session served on this process's stdio or on loopback HTTP:
    the agent is whatever client connects (``imagebench mcp serve``). It runs unconfined, so a
    run records it as ``sandbox: none``. The turn ends when the client closes stdio, or (HTTP) when
    it calls ``submit``; the transcript goes to the sample folder and its leavings are scored.
    It has no spec string (the client is not ours to start), so it never travels to a worker."""

    prefix = "mcp"  # its receipt form; not a spec anyone parses (it is never registered)

    @property
    def sandbox_kind(self) -> Confinement:
        return "none"

    def describe(self) -> dict[str, Any]:
        return {"form": "other", "name": self.name}  # as receipts have always recorded it

    def named(self, name: str) -> ServedSubject:
        import copy

        from imagebench.subjects.base import check_subject_name

        served = copy.copy(self)
        served.name = served.given_name = check_subject_name(name)
        return served

    def __init__(self, route: str = "stdio", *, port: int = 8765, workspace: Path | None = None, stdout: object = None):
        if route not in ("stdio", "http"):
            raise ValueError(f"route must be 'stdio' or 'http', got {route!r}")
        self.route, self.port, self.workspace, self.stdout = route, port, workspace, stdout
        self.name = f"mcp-{route}"

    def bind(self, case: object, context: object) -> object:
        view = CaseView.of(case)  # type: ignore[arg-type]
        sample_dir = Path(context.sample_dir)  # type: ignore[attr-defined]
        limit = float(context.timeout_s)  # type: ignore[attr-defined]
        # the session ends a little before the run's limit, so that a client that never called a
        # tool is told apart (not-attempted) from one that ran out of time (timeout)
        deadline = max(0.5, limit - min(5.0, 0.1 * limit))

        def work(session: Session) -> None:
            end = time.monotonic() + deadline  # from the turn's start, as the run's limit is
            from imagebench.subjects.mcp.folder import McpFolder

            reads = McpFolder()  # npy reads go here, never into the workspace
            agent = AgentSession(view, session, workspace=self.workspace, reads=reads, route=self.route)
            try:
                if self.route == "stdio":
                    ended = _serve_stdio_on(agent, self.stdout, end)
                else:
                    from imagebench.subjects.mcp.server import serve_http

                    serve_http(agent, port=self.port, until_submitted=True, deadline_s=end - time.monotonic())
                    ended = not agent.submitted.is_set() and time.monotonic() >= end
            finally:
                reads.remove()
                try:
                    write_transcript(agent, sample_dir)
                finally:
                    agent.apply_to(session)
                    session.notes["mcp"] = transcript_note(agent)
            if not agent.attempted:
                raise SubjectNotAttempted(not_attempted_reason(agent))
            if ended:
                raise SubjectTimeout(f"the agent was still connected after {deadline:g} s of the {limit:g} s limit")

        return work

    def __call__(self, session: Session) -> None:
        raise RuntimeError("a served subject works through the case it is bound to; call bind(case, context)")


def not_attempted_reason(agent: AgentSession) -> str:
    """Why a served session is ``not-attempted``: its client called none of its tools."""
    who = f"the MCP client {agent.client_name!r}" if agent.client_name else "the MCP client (it listed no tools)"
    return f"{who} called no tool of the case: nothing was attempted, so nothing is scored"


def _serve_stdio_on(agent: AgentSession, stdout: object, end: float | None = None) -> bool:
    """Serve until the client closes stdio; True when ``end`` (``time.monotonic()``) came first. The server runs
    in a thread of its own (a read of stdin cannot be cancelled); past the deadline it is left to
    end with the process, and the session takes no more changes."""
    import threading

    import anyio

    from imagebench.subjects.mcp.server import build_server

    async def main() -> None:
        from mcp.server.stdio import stdio_server

        server = build_server(agent)
        out = anyio.wrap_file(stdout) if stdout is not None else None
        async with stdio_server(stdout=out) as (read, write):
            low = server._mcp_server
            await low.run(read, write, low.create_initialization_options())

    done, raised = threading.Event(), []

    def serve() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # handed to the subject's thread below
            raised.append(exc)
        finally:
            done.set()

    threading.Thread(target=serve, name="imagebench-mcp-stdio", daemon=True).start()
    if done.wait(None if end is None else max(0.0, end - time.monotonic())):
        if raised:
            raise raised[0]
        return False
    agent.submitted.set()  # the turn is over: a call still on its way changes nothing scored
    return True
