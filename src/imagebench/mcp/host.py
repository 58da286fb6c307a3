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
