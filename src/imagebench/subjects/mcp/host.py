"""The harness's side of ``run --subject-mcp``: the session served to a command while it works.

:func:`served` opens an :class:`~imagebench.subjects.mcp.tools.AgentSession` on the command's session,
serves it on a Unix socket in a folder of the harness's (:class:`~imagebench.subjects.mcp.folder.McpFolder`:
``server.sock``, the stdlib bridge ``bridge.py`` and ``reads/``), writes ``mcp.json`` into the
workspace, and when the command has ended closes the server, writes the transcript to the sample
folder and binds what the agent left through the tools in the session (over anything it wrote to
``outputs/``). The sandbox shows that folder read-only at ``/mcp``: the command reaches the server
with its network unshared, reaches nothing else of the harness, and can redirect no write of the
harness's (the socket is 0600, the subject's uid's). The served subject of ``imagebench mcp
serve`` is :class:`imagebench.subjects.served.ServedSubject`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from imagebench.subjects.mcp.tools import AgentSession, CaseView
from imagebench.subjects.mcp.transcript import TRANSCRIPT

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.sandbox.access import Access
    from imagebench.sandbox.limits import SubjectIds
    from imagebench.sandbox.workspace import Workspace
    from imagebench.subjects.mcp.folder import McpFolder


def transcript_note(agent: AgentSession) -> dict[str, object]:
    """What a sample's summary keeps of the transcript (the whole of it is ``transcript.json``)."""
    t = agent.transcript
    return {
        "client": t.client,
        "route": t.route,
        "calls": t.total(),
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
    view: CaseView,
    session: Session,
    workspace: Workspace,
    *,
    sandboxed: bool,
    sample_dir: Path,
    ids: SubjectIds | None = None,
    access: Access | None = None,
) -> Iterator[McpFolder]:
    """Serve ``session`` to the command working in ``workspace``; yields the harness's MCP folder,
    which the sandbox shows read-only at :data:`~imagebench.subjects.mcp.server.MCP_SHOWN` (``sandboxed``)
    and an unsandboxed command reaches at its own path."""
    from imagebench.sandbox.policy import WORKSPACE
    from imagebench.subjects.mcp.server import CONFIG_NAME, MCP_SHOWN, McpFolder, SocketServer, config_text

    folder = McpFolder(ids=ids)
    shown = MCP_SHOWN if sandboxed else str(folder.path)
    agent = AgentSession(
        view, session, workspace=workspace, workspace_alias=WORKSPACE if sandboxed else None,
        reads=folder, reads_alias=shown, route="socket", access=access,
    )  # fmt: skip
    try:
        server = SocketServer(agent, folder.socket_path, ids=ids)
    except BaseException:
        folder.remove()
        raise
    if access is not None:
        from imagebench.sandbox.access import note_tools, served_tool_names

        note_tools(session.notes, served_tool_names(server.server))
    try:
        workspace.write_text(CONFIG_NAME, config_text(shown))
        yield folder
    finally:
        server.close()
        folder.remove()
        try:
            write_transcript(agent, sample_dir)
        finally:
            agent.apply_to(session)
            session.notes["mcp"] = transcript_note(agent)
