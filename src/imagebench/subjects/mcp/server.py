"""The MCP server over an :class:`~imagebench.subjects.mcp.tools.AgentSession`, and how it is reached.

- :func:`build_server`: the SDK's ``FastMCP`` server whose tools call the session (each call is
  recorded in the transcript; a refused call is a tool error, ``isError``, and the session goes on);
- :func:`serve_stdio`, :func:`serve_http`: the usual transports (``imagebench mcp serve``);
- :class:`SocketServer`: the server on a Unix socket, each accepted connection one MCP session
  speaking newline-delimited JSON-RPC (the stdio framing), on the bridge's own pipes when it hands
  them over (:mod:`~imagebench.subjects.mcp.handoff`), its ``tools/call`` answered without the
  SDK's session loop (:mod:`~imagebench.subjects.mcp.fastcall`). A sandboxed command reaches it through
  a file socket in the harness's :class:`~imagebench.subjects.mcp.folder.McpFolder`, shown read-only at
  ``/mcp`` (the network namespace plays no part), with ``mcp.json`` in its workspace naming a
  stdlib-only bridge there that its own ``python3`` runs (:func:`config_text`).

Nothing served names a path of the harness: the session knows the workspace and nothing else.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Collection
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError as SdkToolError

from imagebench.sandbox.access import tool_refusal
from imagebench.sandbox.limits import SubjectIds
from imagebench.subjects.mcp.folder import BRIDGE_NAME, MCP_SHOWN, SOCKET_NAME, McpFolder
from imagebench.subjects.sockets import listen_unix

__all__ = ["MCP_SHOWN", "SOCKET_NAME", "McpFolder", "SocketServer", "build_server", "client_config", "config_text"]
from imagebench.subjects.mcp.toolset import RESULT, register

if TYPE_CHECKING:
    from imagebench.subjects.mcp.tools import AgentSession

SERVER_NAME = "imagebench"
CONFIG_NAME = "mcp.json"
#: One JSON-RPC line at most, checked while it is read, before any parsing. The largest call a
#: session takes is add_layer with a JSON list of MAX_LIST_INPUT (1,048,576) numbers: at ~25
#: characters a number that is about 25 MiB. A longer line ends the connection.
MAX_MESSAGE = 32 * 1024 * 1024
#: connections served at once on the socket; one more is closed as it is accepted
MAX_CONNECTIONS = 4

INSTRUCTIONS = (
    "One case of the imagebench benchmark. Call get_prompt first: it gives the task, the input layers and "
    "the names to leave. Read inputs with read_layer (a region, or encoding='base64'/'npy' for large "
    "arrays), look with snapshot (and snapshot_frames, set_dims, set_layer_display for a time-lapse or a "
    "stack), leave array answers with add_layer/update_layer and structured answers with set_answer, then "
    "call submit. What you left when you submit is what gets scored."
)


def server_version() -> str:
    """imagebench's version, as ``serverInfo`` names it (never the SDK's)."""
    import imagebench

    return str(imagebench.__version__)


class ImagebenchMCP(FastMCP):
    """The SDK's server with one dispatch point: every ``tools/call`` (served, refused before its
    tool ran, or of a tool this session does not serve) goes through :meth:`call_tool`, which
    records it in the session's transcript."""

    def __init__(self, agent: AgentSession, **kwargs: Any) -> None:
        super().__init__(SERVER_NAME, **kwargs)
        self._mcp_server.version = server_version()
        self.agent = agent

    def _client(self) -> None:
        if self.agent.transcript.client:  # named once (the socket's fast path names it at initialize)
            return
        with suppress(Exception):
            params = self.get_context().session.client_params
            self.agent.set_client(params.clientInfo.name if params is not None else None)

    async def list_tools(self) -> Any:
        self._client()  # a client that only lists the tools is named in its not-attempted sample
        return await super().list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        agent = self.agent
        self._client()
        start = time.perf_counter()
        refused = tool_refusal(agent.access, name)
        if refused is not None:  # a tool the access setting does not serve, whatever was registered
            agent.record(name, arguments or {}, start, error=refused)
            raise SdkToolError(refused)
        token = RESULT.set(None)
        try:
            out = await super().call_tool(name, arguments)
        except SdkToolError as exc:
            error = _named(name, exc)
            agent.record(name, arguments or {}, start, error=error)
            raise SdkToolError(error) from None
        except Exception as exc:
            agent.record(name, arguments or {}, start, error=f"{type(exc).__name__}: {exc}")
            raise
        else:
            agent.record(name, arguments or {}, start, error=None, result=RESULT.get())
            return _checked(out)
        finally:
            RESULT.reset(token)


def _checked(out: Any) -> Any:
    """A tool's converted result as the finished ``CallToolResult``, so that the low-level server
    does not check it again. FastMCP hands back ``(content, structured)`` for a tool with an
    ``outputSchema``, the structured part dumped from the tool's own result model (validated by
    pydantic in ``toolset.run`` and again in the SDK's ``convert_result``); the low-level server
    would then run ``jsonschema.validate`` on it, which checks the schema itself against the JSON
    Schema meta-schema on every call (about 12 ms on the development machine, 20x the rest of the
    call). The schema is that model's JSON Schema, and ``tests/test_mcp_fast_path.py`` checks every
    tool's results against it with ``jsonschema``: the third pass proves nothing the first two did not."""
    import mcp.types as types

    if isinstance(out, tuple) and len(out) == 2:
        content, structured = out
        return types.CallToolResult(content=list(content), structuredContent=structured, isError=False)
    return out


def _named(tool: str, exc: SdkToolError) -> str:
    """A refused call's message: the tool's own, or each argument the schema refused, by name."""
    from pydantic import ValidationError

    cause = exc.__cause__
    if isinstance(cause, ValidationError) and cause.title.endswith("Arguments"):
        parts = []
        for err in cause.errors(include_url=False)[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()))
            got = repr(err.get("input"))
            parts.append(f"argument {where!r}: {err.get('msg')}, got {got if len(got) <= 60 else got[:57] + '...'}")
        return f"{tool}: " + "; ".join(parts)
    return str(exc).removeprefix(f"Error executing tool {tool}: ")


def build_server(agent: AgentSession, *, tools: Collection[str] | None = None) -> ImagebenchMCP:
    """A ``FastMCP`` server whose tools are ``agent``'s: every tool of
    :data:`imagebench.subjects.mcp.toolset.TOOLS`, or those named in ``tools``."""
    from imagebench.sandbox.access import offered_tools
    from imagebench.subjects.mcp.toolset import tool_names

    server = ImagebenchMCP(agent, instructions=INSTRUCTIONS, log_level="WARNING")
    if agent.access is not None:  # the run's access setting serves fewer (imagebench.sandbox.access)
        tools = offered_tools(agent.access, tools if tools is not None else tool_names())
    register(server, agent, only=tools)
    return server


# --------------------------------------------------------------------------- the usual transports


def serve_stdio(agent: AgentSession) -> None:
    """Serve ``agent`` on this process's stdin/stdout until the client closes it."""
    import anyio

    agent.transcript.route = agent.transcript.route or "stdio"
    anyio.run(build_server(agent).run_stdio_async)


def serve_http(
    agent: AgentSession,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    until_submitted: bool = False,
    deadline_s: float | None = None,
) -> None:
    """Serve ``agent`` as streamable HTTP on ``http://host:port/mcp`` until interrupted (or, with
    ``until_submitted``, until the agent calls ``submit``; or ``deadline_s`` seconds have passed)."""
    import anyio
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"the server listens on loopback only, not {host!r}")
    agent.transcript.route = agent.transcript.route or "http"
    server = build_server(agent)
    server.settings.host, server.settings.port = host, port
    app = capped_body(server.streamable_http_app(), MAX_MESSAGE)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", limit_concurrency=MAX_CONNECTIONS * 4)
    uv = uvicorn.Server(config)

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                end = None if deadline_s is None else time.monotonic() + deadline_s
                while not (until_submitted and agent.submitted.is_set()):
                    if end is not None and time.monotonic() >= end:
                        break
                    await anyio.sleep(0.2)
                await anyio.sleep(0.5)  # the submit call's answer goes out first
                uv.should_exit = True

            tg.start_soon(watch)
            await uv.serve()
            tg.cancel_scope.cancel()

    anyio.run(main)


def capped_body(app: Any, limit: int) -> Any:
    """An ASGI app that answers 413 to a request body over ``limit`` bytes (its Content-Length, or
    the bytes as they stream in), before the MCP app parses any of it."""

    async def capped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return
        seen = 0

        async def bounded() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge
            return message

        try:
            await app(scope, bounded, send)
        except _BodyTooLarge:
            await _too_large(send, limit)

    return capped


class _BodyTooLarge(Exception):
    pass


async def _too_large(send: Any, limit: int) -> None:
    body = f"a request body is at most {limit} bytes".encode()
    await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


# --------------------------------------------------------------------------- a Unix socket


async def _serve_stream(server: Any, stream: Any, first: bytes = b"", *, fast: bool = True) -> None:
    """One MCP session over a byte stream of newline-delimited JSON-RPC messages (``first``: its
    bytes already read); ``fast``: ``tools/call`` answered by :class:`FastCalls`, else by the SDK's
    session loop as every other message."""
    import anyio
    import mcp.types as types
    from anyio.streams.buffered import BufferedByteReceiveStream
    from mcp.shared.message import SessionMessage

    from imagebench.subjects.mcp.fastcall import FastCalls

    read_writer, read_stream = anyio.create_memory_object_stream(0)
    write_stream, write_reader = anyio.create_memory_object_stream(0)
    buffered = BufferedByteReceiveStream(stream)
    buffered.feed_data(first)
    fast_calls = FastCalls(server) if fast else None  # tools/call answered here, the rest by the SDK's session
    sending = anyio.Lock()  # one line at a time on the stream, whichever answers

    async def send(data: bytes) -> bool:
        try:
            async with sending:
                await stream.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def reader() -> None:
        async with read_writer:
            while True:
                try:
                    line = await buffered.receive_until(b"\n", MAX_MESSAGE)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                except anyio.DelimiterNotFound:
                    return  # a line past MAX_MESSAGE: the connection ends
                if not line.strip():
                    continue
                try:
                    parsed = types.JSONRPCMessage.model_validate_json(line)
                except Exception as exc:
                    await read_writer.send(exc)
                    continue
                if fast_calls is not None and fast_calls.takes(parsed):
                    if not await send(await fast_calls.answer(parsed.root)):
                        return
                    continue
                await read_writer.send(SessionMessage(parsed))

    async def writer() -> None:
        async with write_reader:
            async for session_message in write_reader:
                text = session_message.message.model_dump_json(by_alias=True, exclude_none=True)
                if not await send(text.encode("utf-8") + b"\n"):
                    return

    low = server._mcp_server
    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            await low.run(read_stream, write_stream, low.create_initialization_options())
        finally:
            tg.cancel_scope.cancel()
            with suppress(Exception):
                await stream.aclose()


async def _serve_connection(server: Any, raw: Any, *, fast: bool = True) -> None:
    """One accepted connection: the bridge's pipes when it hands them over
    (:mod:`imagebench.subjects.mcp.handoff`), served until the session or the bridge ends; else the
    socket itself. ``fast=False``: no handoff (an offer is refused) and no :class:`FastCalls`, the
    SDK's session loop alone behind a relaying bridge (``benchmarks/bench_mcp.py``'s SDK floor)."""
    import anyio
    from anyio.abc import UNIXSocketStream

    from imagebench.subjects.mcp.handoff import PipeStream, first_contact

    try:
        fds, first = await first_contact(raw, take=fast)
        lifeline = await UNIXSocketStream.from_socket(raw)
    except BaseException:
        raw.close()
        raise
    if fds is None:
        await _serve_stream(server, lifeline, first, fast=fast)
        return
    async with lifeline, anyio.create_task_group() as tg:

        async def watch() -> None:  # the bridge gone: the session ends
            with suppress(Exception):
                while await lifeline.receive():
                    pass
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await _serve_stream(server, PipeStream(fds[0], fds[1]))
        tg.cancel_scope.cancel()


class SocketServer:
    """``agent``'s server (or ``server``) on a Unix socket at ``path``, in a thread of this process, until :meth:`close`.

    The socket is bound through its folder's descriptor (``/proc/self/fd/N/name``), so any depth
    fits; it is 0600, owned by the subject's uid ``ids`` when the harness is root.
    """

    def __init__(
        self,
        agent: AgentSession,
        path: Path,
        *,
        ids: SubjectIds | None = None,
        server: FastMCP | None = None,
        fast: bool = True,
    ) -> None:
        self.agent = agent
        self.path = Path(path)
        self.server = build_server(agent) if server is None else server  # another: benchmarks/bench_mcp.py's floor
        self.fast = fast  # False: the SDK's session loop alone, the bridge relaying (_serve_connection)
        self._sock = listen_unix(self.path, ids, backlog=MAX_CONNECTIONS)
        self._stop = threading.Event()
        self._portal_cm: Any = None
        self._portal: Any = None
        self._start()

    def _start(self) -> None:
        from anyio.from_thread import start_blocking_portal

        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._future = self._portal.start_task_soon(self._serve)

    async def _serve(self) -> None:
        import anyio

        active = 0

        async def serve_one(raw: Any) -> None:
            nonlocal active
            try:
                await _serve_connection(self.server, raw, fast=self.fast)
            finally:
                active -= 1

        async with anyio.create_task_group() as tg:
            while True:
                await anyio.wait_readable(self._sock)
                try:
                    raw, _ = self._sock.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue
                if active >= MAX_CONNECTIONS:
                    raw.close()
                    continue
                raw.setblocking(False)
                active += 1
                tg.start_soon(serve_one, raw)

    def close(self) -> None:
        """Stop serving: every connection ends, the socket goes."""
        if self._portal is None:
            return
        try:
            self._future.cancel()  # cancels the serving task and each connection's session
        finally:
            with suppress(Exception):
                self._portal_cm.__exit__(None, None, None)
            self._portal = None
            with suppress(OSError):
                self._sock.close()
            with suppress(OSError):
                self.path.unlink()


def client_config(shown_as: str, *, python: str = "python3") -> dict[str, Any]:
    """The ``mcpServers`` entry a client starts: ``python3 <shown_as>/bridge.py``, where
    ``shown_as`` is where the :class:`McpFolder` is seen by the client (``/mcp`` in the sandbox)."""
    return {"mcpServers": {SERVER_NAME: {"command": python, "args": [f"{shown_as.rstrip('/')}/{BRIDGE_NAME}"]}}}


def config_text(shown_as: str) -> str:
    return json.dumps(client_config(shown_as), indent=2) + "\n"
