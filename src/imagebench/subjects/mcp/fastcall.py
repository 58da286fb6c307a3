"""``tools/call`` on a socket connection answered at the protocol's floor.

The SDK's session loop hands every request through two memory streams, a task of its own, a
second pydantic pass over the request (``model_dump`` then ``ClientRequest.model_validate``),
a request context and a ``ServerResult`` wrapper before the server's ``call_tool`` runs, and the
answer back through the same: about 0.5 ms of CPU a call on the development machine, several times
what reading a 1 MB ``.npy`` costs (``benchmarks/bench_mcp.py``). A tool of ours is synchronous
and runs on the event loop either way, so nothing is gained by the machinery for ``tools/call``.

:class:`FastCalls` answers a connection's ``tools/call`` requests itself, once the connection
has sent ``initialize`` (before it, the request goes to the SDK, which refuses it as it does any
request before initialisation): the request's params checked by the SDK's own model
(``CallToolRequestParams``; a malformed one gets the SDK's ``Invalid request parameters``
error), the call made through the server's one dispatch point (``ImagebenchMCP.call_tool``: the
access setting's refusal, the transcript, the arguments checked by the tool's pydantic model), its
result built as the SDK's low-level handler builds it (a raised error is an ``isError`` result
with its message; a structured result the server did not finish is checked against the tool's
``outputSchema`` as the SDK checks it), and the response written as one line. Every other
message (``initialize``, ``tools/list``, ``ping``, notifications, responses) goes to the SDK as before.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types

__all__ = ["FastCalls"]


class FastCalls:
    """One connection's ``tools/call`` answered without the SDK's session loop (see the module)."""

    def __init__(self, server: Any) -> None:
        self.server = server  # a FastMCP (an ImagebenchMCP in a run)
        self.initialized = False

    def takes(self, message: types.JSONRPCMessage) -> bool:
        """Whether :meth:`answer` answers ``message``; notes the connection's ``initialize`` on the way."""
        root = message.root
        if not isinstance(root, types.JSONRPCRequest):
            return False
        if root.method == "initialize":
            self._note_client(root.params)
            self.initialized = True
            return False
        return self.initialized and root.method == "tools/call"

    def _note_client(self, params: dict[str, Any] | None) -> None:
        """The client's name, for the transcript (the SDK's request context is not there on this path)."""
        agent = getattr(self.server, "agent", None)
        info = (params or {}).get("clientInfo")
        if agent is not None and isinstance(info, dict) and isinstance(info.get("name"), str):
            agent.set_client(info["name"])

    async def answer(self, request: types.JSONRPCRequest) -> bytes:
        """The response line (JSON and a newline) to the ``tools/call`` ``request``."""
        try:
            params = types.CallToolRequestParams.model_validate(request.params or {})
        except Exception:
            error = types.ErrorData(code=types.INVALID_PARAMS, message="Invalid request parameters", data="")
            return _line(request.id, "error", error.model_dump_json(by_alias=True, exclude_none=True))
        result = await self._result(params.name, params.arguments or {})
        return _line(request.id, "result", result.model_dump_json(by_alias=True, exclude_none=True))

    async def _result(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            out = await self.server.call_tool(name, arguments)
        except Exception as exc:  # as the SDK's low-level handler: the message, isError
            return _error(str(exc))
        if isinstance(out, types.CallToolResult):
            return out
        if isinstance(out, tuple) and len(out) == 2:
            content, structured = out
        elif isinstance(out, dict):
            content, structured = [types.TextContent(type="text", text=json.dumps(out, indent=2))], out
        else:
            content, structured = list(out), None
        return self._unfinished(name, list(content), structured)

    def _unfinished(self, name: str, content: list[Any], structured: dict[str, Any] | None) -> types.CallToolResult:
        """A result the server did not finish itself, checked as the SDK's low-level handler checks it."""
        tool = self.server._tool_manager.get_tool(name)
        schema = tool.output_schema if tool is not None else None
        if schema is not None:
            import jsonschema

            if structured is None:
                return _error("Output validation error: outputSchema defined but no structured output returned")
            try:
                jsonschema.validate(instance=structured, schema=schema)
            except jsonschema.ValidationError as exc:
                return _error(f"Output validation error: {exc.message}")
        return types.CallToolResult(content=content, structuredContent=structured, isError=False)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], isError=True)


def _line(request_id: str | int, key: str, body: str) -> bytes:
    return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"{key}":{body}}}\n'.encode()
