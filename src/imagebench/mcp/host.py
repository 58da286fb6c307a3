"""The harness's side of ``run --subject-mcp``: the session served to a command while it works.

:func:`served` opens an :class:`~imagebench.mcp.tools.AgentSession` on the command's session,
serves it on a Unix socket in the workspace (``.mcp/server.sock``), writes the client files
(``mcp.json`` and the stdlib bridge ``.mcp/bridge.py``), and when the command has ended closes
the server, writes the transcript to the sample folder and binds what the agent left through the
tools in the session (over anything it wrote to ``outputs/``). The socket is a file in the
workspace, which the sandbox binds at ``/workspace``: the command reaches the server with its
network unshared, and reaches nothing else of the harness.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from imagebench.mcp.tools import AgentSession, CaseView
from imagebench.mcp.transcript import TRANSCRIPT

if TYPE_CHECKING:
    from imagebench.session import Session


def transcript_note(agent: AgentSession) -> dict[str, object]:
    """What a sample's summary keeps of the transcript (the whole of it is ``transcript.json``)."""
    t = agent.transcript
    return {
        "client": t.client,
        "route": t.route,
        "calls": len(t.calls),
        "errors": t.errors(),
        "tools": t.counts(),
        "submitted": t.submitted,
        "skills": list(t.skills),
        "transcript": TRANSCRIPT,
    }


def write_transcript(agent: AgentSession, sample_dir: Path) -> Path:
    from imagebench.records import write_record

    sample_dir.mkdir(parents=True, exist_ok=True)
    return write_record(sample_dir / TRANSCRIPT, agent.transcript)


@contextmanager
def served(
    view: CaseView, session: Session, workspace: Path, *, shown_as: str, sample_dir: Path
) -> Iterator[AgentSession]:
    """Serve ``session`` to the command working in ``workspace`` (seen by it at ``shown_as``)."""
    from imagebench.mcp.server import (
        MCP_DIR,
        SOCKET_NAME,
        SocketServer,
        write_client_files,
    )

    agent = AgentSession(view, session, workspace=workspace, workspace_alias=shown_as, route="socket")
    server = SocketServer(agent, workspace / MCP_DIR / SOCKET_NAME)
    try:
        write_client_files(workspace, shown_as=shown_as)
        yield agent
    finally:
        server.close()
        try:
            write_transcript(agent, sample_dir)
        finally:
            agent.apply_to(session)
            session.notes["mcp"] = transcript_note(agent)


# --------------------------------------------------------------------------- imagebench mcp serve


class ServedSubject:
    """A subject whose turn is an MCP session served on this process's stdio or on loopback HTTP:
    the agent is whatever client connects (``imagebench mcp serve``). It runs unconfined, so a
    run records it as ``sandbox: none``. The turn ends when the client closes stdio, or (HTTP) when
    it calls ``submit``; the transcript goes to the sample folder and its leavings are scored."""

    sandbox_kind = "none"

    def __init__(self, route: str = "stdio", *, port: int = 8765, workspace: Path | None = None, stdout: object = None):
        if route not in ("stdio", "http"):
            raise ValueError(f"route must be 'stdio' or 'http', got {route!r}")
        self.route, self.port, self.workspace, self.stdout = route, port, workspace, stdout
        self.name = f"mcp-{route}"

    def bind(self, case: object, context: object) -> object:
        view = CaseView.of(case)  # type: ignore[arg-type]
        sample_dir = Path(context.sample_dir)  # type: ignore[attr-defined]

        def work(session: Session) -> None:
            agent = AgentSession(view, session, workspace=self.workspace, workspace_alias=None, route=self.route)
            try:
                if self.route == "stdio":
                    _serve_stdio_on(agent, self.stdout)
                else:
                    from imagebench.mcp.server import serve_http

                    serve_http(agent, port=self.port, until_submitted=True)
            finally:
                try:
                    write_transcript(agent, sample_dir)
                finally:
                    agent.apply_to(session)
                    session.notes["mcp"] = transcript_note(agent)

        return work

    def __call__(self, session: Session) -> None:
        raise RuntimeError("a served subject works through the case it is bound to; call bind(case, context)")


def _serve_stdio_on(agent: AgentSession, stdout: object) -> None:
    import anyio

    from imagebench.mcp.server import build_server

    async def main() -> None:
        from mcp.server.stdio import stdio_server

        server = build_server(agent)
        out = anyio.wrap_file(stdout) if stdout is not None else None
        async with stdio_server(stdout=out) as (read, write):
            low = server._mcp_server
            await low.run(read, write, low.create_initialization_options())

    anyio.run(main)
