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
    from imagebench.confine import SubjectIds
    from imagebench.mcp.folder import McpFolder
    from imagebench.session import Session
    from imagebench.workspace import Workspace


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
    view: CaseView,
    session: Session,
    workspace: Workspace,
    *,
    sandboxed: bool,
    sample_dir: Path,
    ids: SubjectIds | None = None,
) -> Iterator[McpFolder]:
    """Serve ``session`` to the command working in ``workspace``; yields the harness's MCP folder,
    which the sandbox shows read-only at :data:`~imagebench.mcp.server.MCP_SHOWN` (``sandboxed``)
    and an unsandboxed command reaches at its own path."""
    from imagebench.mcp.server import CONFIG_NAME, MCP_SHOWN, McpFolder, SocketServer, config_text
    from imagebench.sandbox import WORKSPACE

    folder = McpFolder(ids=ids)
    shown = MCP_SHOWN if sandboxed else str(folder.path)
    agent = AgentSession(
        view, session, workspace=workspace, workspace_alias=WORKSPACE if sandboxed else None,
        reads=folder, reads_alias=shown, route="socket",
    )  # fmt: skip
    try:
        server = SocketServer(agent, folder.socket_path, ids=ids)
    except BaseException:
        folder.remove()
        raise
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
            from imagebench.mcp.folder import McpFolder

            reads = McpFolder()  # npy reads go here, never into the workspace
            agent = AgentSession(view, session, workspace=self.workspace, reads=reads, route=self.route)
            try:
                if self.route == "stdio":
                    _serve_stdio_on(agent, self.stdout)
                else:
                    from imagebench.mcp.server import serve_http

                    serve_http(agent, port=self.port, until_submitted=True)
            finally:
                reads.remove()
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
