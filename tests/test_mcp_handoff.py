"""The socket's floor: the bridge handing its pipes to the server, and ``tools/call`` answered
without the SDK's session loop (``imagebench.subjects.mcp.handoff``, ``fastcall``).

Each rule is tried with a dishonest peer as well: descriptors that are not a client's pipes (a
regular file, a directory, a pipe's wrong end, one or three of them, descriptors riding on a
JSON byte), a call before ``initialize``, malformed params, a tool the access setting does not
serve; every refused descriptor is closed in the harness, and the answers the fast path gives
are the SDK's own (compared field by field with the SDK's in-memory session).
"""

from __future__ import annotations

import array
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imagebench import cases as builtin
from imagebench.subjects.mcp.handoff import OFFER, REFUSED, TAKEN

CASE = "segment-nuclei/synthetic-blobs"


def _agent(folder: Any, access: str | None = None) -> Any:
    from imagebench.case.session import open_session
    from imagebench.runs.runner import prepare_fixture
    from imagebench.sandbox.access import parse_access
    from imagebench.subjects.mcp.tools import AgentSession, CaseView

    case = builtin.get_case(CASE)
    session = open_session(case, prepare_fixture(case).fixture)
    return AgentSession(
        CaseView.of(case), session, reads=folder, access=parse_access(access) if access else None, route="socket"
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    from imagebench.subjects.mcp.server import McpFolder, SocketServer

    folder = McpFolder(tmp_path)
    agent = _agent(folder)
    server = SocketServer(agent, folder.socket_path)
    try:
        yield folder, agent
    finally:
        server.close()
        folder.remove()


def _open_fds() -> set[int]:
    """This process's descriptors (but the one that lists them)."""
    alive = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))  # the listing's own descriptor is closed by now
        except OSError:
            continue
        alive.add(int(name))
    return alive


def _settled(before: set[int], timeout: float = 15.0) -> set[int]:
    """The harness's descriptors beyond ``before`` once the server has had time to close them."""
    end = time.monotonic() + timeout
    while True:
        extra = _open_fds() - before
        if not extra or time.monotonic() > end:
            return extra
        time.sleep(0.05)


class _Lines:
    """Newline-delimited JSON-RPC over a writer and a reader descriptor (or a socket)."""

    def __init__(self, write: Any, read: Any) -> None:
        self.write, self.read, self.buf, self.next_id = write, read, b"", 0

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\n"
        if isinstance(self.write, socket.socket):
            self.write.sendall(data)
        else:
            os.write(self.write, data)

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = self.read.recv(1 << 16) if isinstance(self.read, socket.socket) else os.read(self.read, 1 << 16)
            assert chunk, "the server closed the stream"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, method: str, params: dict[str, Any] | None = None, *, raw_params: Any = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None or raw_params is not None:
            message["params"] = params if params is not None else raw_params
        self.send(message)
        while True:
            got = self.receive()
            if got.get("id") == self.next_id:
                return got

    def initialize(self, name: str = "probe") -> None:
        info = {"name": name, "version": "0"}
        init = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info})
        assert init["result"]["serverInfo"]["name"] == "imagebench"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _offer(path: Path, fds: list[int], first: bytes = OFFER) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(path))
    s.sendmsg([first], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])
    s.settimeout(10)
    return s


# --------------------------------------------------------------------------- the bridge's handoff


def test_the_bridge_hands_its_pipes_over_and_keeps_only_the_lifeline(served: Any) -> None:
    folder, agent = served
    bridge = subprocess.Popen(
        [sys.executable, str(folder.path / "bridge.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert bridge.stdin is not None and bridge.stdout is not None
    lines = _Lines(bridge.stdin.fileno(), bridge.stdout.fileno())
    lines.initialize("handoff-client")
    got = lines.request("tools/call", {"name": "list_layers", "arguments": {}})
    assert got["result"]["structuredContent"]["layers"][0]["name"] == "nuclei"
    # the bridge relays nothing: its stdin and stdout are /dev/null, the server holds the pipes
    # (swapped just after the server took them: the first answer may come before)
    end = time.monotonic() + 10
    while os.readlink(f"/proc/{bridge.pid}/fd/1") != "/dev/null" and time.monotonic() < end:
        time.sleep(0.01)
    assert os.readlink(f"/proc/{bridge.pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{bridge.pid}/fd/1") == "/dev/null"
    read = lines.request("tools/call", {"name": "read_layer", "arguments": {"name": "nuclei", "encoding": "npy"}})
    path = read["result"]["structuredContent"]["path"]
    assert Path(path).parent == folder.path / "reads" and "null" not in json.dumps(read["result"]["structuredContent"])
    bridge.stdin.close()  # the client ends the session: the server closes, the bridge exits
    assert bridge.wait(timeout=10) == 0
    assert agent.transcript.client == "handoff-client"
    assert [c.tool for c in agent.transcript.calls] == ["list_layers", "read_layer"]


def test_a_bridge_whose_stdio_is_not_a_pipe_relays(served: Any, tmp_path: Path) -> None:
    folder, _agent_ = served
    requests = tmp_path / "requests.jsonl"
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "file", "version": "0"}}
    requests.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        + "\n"
        + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        + "\n"
        + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_layers"}})
        + "\n"
    )
    with requests.open("rb") as stdin:  # a regular file: no handoff, the bridge relays (stdout a pipe)
        bridge = subprocess.Popen([sys.executable, str(folder.path / "bridge.py")], stdin=stdin, stdout=subprocess.PIPE)
        out, _ = bridge.communicate(timeout=20)
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a.get("id") for a in answers] == [1, 2]
    assert answers[1]["result"]["structuredContent"]["layers"][0]["name"] == "nuclei"


def test_pipes_offered_by_hand_are_served_on_them(served: Any) -> None:
    folder, _agent_ = served
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    s = _offer(folder.socket_path, [to_server_r, from_server_w])
    assert s.recv(1) == TAKEN
    os.close(to_server_r)
    os.close(from_server_w)
    lines = _Lines(to_server_w, from_server_r)
    lines.initialize()
    assert lines.request("tools/call", {"name": "list_layers"})["result"]["isError"] is False
    s.close()  # the lifeline gone: the session ends, the server closes its ends of the pipes
    os.close(to_server_w)
    end = time.monotonic() + 10
    while os.read(from_server_r, 1 << 16):
        assert time.monotonic() < end
    os.close(from_server_r)


@pytest.mark.parametrize("offered", ["regular-file", "directory", "reversed-pipe", "one", "three"])
def test_descriptors_that_are_not_a_clients_pipes_are_refused_and_closed(
    served: Any, tmp_path: Path, offered: str
) -> None:
    folder, _agent_ = served
    planted = tmp_path / "planted.txt"
    planted.write_bytes(b"")
    mine: list[int] = []
    if offered == "regular-file":
        mine = [os.open(planted, os.O_RDONLY), os.open(planted, os.O_WRONLY)]
    elif offered == "directory":
        mine = [os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY), os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)]
    elif offered == "reversed-pipe":
        r, w = os.pipe()
        mine = [w, r]  # stdin open for writing, stdout for reading
    elif offered == "one":
        r, w = os.pipe()
        mine = [r]
        os.close(w)
    else:
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        mine = [r1, w2, r2]
        os.close(w1)
    before = _open_fds() - set(mine)
    s = _offer(folder.socket_path, mine)
    assert s.recv(1) == REFUSED
    for fd in mine:
        os.close(fd)
    # refused, the same connection goes on as an ordinary JSON-RPC stream
    lines = _Lines(s, s)
    lines.initialize()
    assert lines.request("tools/call", {"name": "list_layers"})["result"]["isError"] is False
    s.close()
    extra = _settled(before)
    assert extra == set(), (
        "every descriptor received is closed in the harness",
        [os.readlink(f"/proc/self/fd/{n}") for n in extra],
    )
    assert planted.read_bytes() == b"", "nothing is written to a file offered as stdout"


def test_descriptors_riding_on_a_json_byte_are_closed_and_the_stream_served(served: Any) -> None:
    folder, _agent_ = served
    r, w = os.pipe()
    before = _open_fds() - {r, w}
    s = _offer(folder.socket_path, [r, w], first=b"{")
    os.close(r)
    os.close(w)
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode()[1:] + b"\n")
    got = _Lines(s, s).receive()
    assert got["id"] == 1 and got["result"]["serverInfo"]["name"] == "imagebench"
    s.close()
    assert _settled(before) == set()


# --------------------------------------------------------------------------- tools/call without the session loop


def _socket_lines(folder: Any) -> tuple[socket.socket, _Lines]:
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(folder.socket_path))
    s.settimeout(10)
    return s, _Lines(s, s)


def test_a_call_before_initialize_is_the_sdks_to_refuse(served: Any) -> None:
    folder, agent = served
    s, lines = _socket_lines(folder)
    try:
        lines.next_id += 1
        lines.send({"jsonrpc": "2.0", "id": lines.next_id, "method": "tools/call", "params": {"name": "list_layers"}})
        got = lines.receive()  # the SDK's answer to any request before initialize
        assert "result" not in got and got["error"]["code"] == -32602, got
    finally:
        s.close()
    assert agent.transcript.calls == [], "no tool ran"


def test_malformed_params_get_the_sdks_error_and_no_tool_runs(served: Any) -> None:
    folder, agent = served
    s, lines = _socket_lines(folder)
    try:
        lines.initialize()
        for params in ({"arguments": {}}, {"name": 7}, {"name": "list_layers", "arguments": [1, 2]}):
            got = lines.request("tools/call", params)
            assert got["error"] == {"code": -32602, "message": "Invalid request parameters", "data": ""}, got
        got = lines.request("tools/call", raw_params=None)
        assert "error" in got
    finally:
        s.close()
    assert agent.transcript.calls == []


def test_fast_answers_are_the_sdks_own(served: Any) -> None:
    """The same calls through the SDK's in-memory session (its session loop, its low-level handler)
    and through the socket's fast path give the same results, errors included."""
    import anyio
    from mcp.shared.memory import create_connected_server_and_client_session

    from imagebench.subjects.mcp.server import build_server

    folder, _agent_ = served
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_layers", {}),
        ("get_prompt", {}),
        ("read_layer", {"name": "nuclei", "region": [[0, 2], [0, 3]]}),
        ("read_layer", {"name": "nuclei", "encoding": "base64", "region": [[0, 4]]}),
        ("read_layer", {"name": "labels"}),  # the truth's key
        ("read_layer", {"name": "nuclei", "encoding": "hex"}),
        ("no_such_tool", {}),
        ("set_answer", {"value": {"count": "12"}}),
    ]
    s, lines = _socket_lines(folder)
    try:
        lines.initialize()
        fast = [lines.request("tools/call", {"name": n, "arguments": a})["result"] for n, a in calls]
    finally:
        s.close()

    async def through_sdk() -> list[dict[str, Any]]:
        server = build_server(_agent(None))
        async with create_connected_server_and_client_session(server._mcp_server) as client:
            out = []
            for name, args in calls:
                result = await client.call_tool(name, args)
                out.append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
            return out

    sdk = anyio.run(through_sdk)
    assert len(fast) == len(sdk)
    for (name, _args), got, want in zip(calls, fast, sdk, strict=True):
        assert got == want, name
    assert fast[4]["isError"] and "no layer named 'labels'" in fast[4]["content"][0]["text"]


def test_a_tool_the_access_setting_does_not_serve_is_refused_on_the_fast_path(tmp_path: Path) -> None:
    from imagebench.subjects.mcp.server import McpFolder, SocketServer

    folder = McpFolder(tmp_path)
    agent = _agent(folder, access="views-3")
    server = SocketServer(agent, folder.socket_path)
    s, lines = _socket_lines(folder)
    try:
        lines.initialize()
        listed = [t["name"] for t in lines.request("tools/list", {})["result"]["tools"]]
        assert "read_layer" not in listed
        got = lines.request("tools/call", {"name": "read_layer", "arguments": {"name": "nuclei", "encoding": "npy"}})
        assert got["result"]["isError"] is True
        assert "is not served under access setting views-3" in got["result"]["content"][0]["text"]
        assert list((folder.path / "reads").iterdir()) == [], "no read was written"
    finally:
        s.close()
        server.close()
        folder.remove()
    assert [(c.tool, c.ok) for c in agent.transcript.calls] == [("read_layer", False)]


# --------------------------------------------------------------------------- in the sandbox

_IN_SANDBOX = r"""
import json, os, subprocess, sys
bridge = subprocess.Popen([sys.executable, '/mcp/bridge.py'], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def request(i, method, params):
    bridge.stdin.write(json.dumps({'jsonrpc': '2.0', 'id': i, 'method': method, 'params': params}).encode() + b'\n')
    bridge.stdin.flush()
    while True:
        got = json.loads(bridge.stdout.readline())
        if got.get('id') == i:
            return got
request(1, 'initialize', {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'sandboxed', 'version': '0'}})
bridge.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'); bridge.stdin.flush()
layers = request(2, 'tools/call', {'name': 'list_layers', 'arguments': {}})['result']['structuredContent']['layers']
import time
end = time.monotonic() + 10  # the bridge swaps its stdin for /dev/null just after the server took it
while os.readlink(f'/proc/{bridge.pid}/fd/0') != '/dev/null' and time.monotonic() < end:
    time.sleep(0.01)
print('layers:', layers[0]['name'], 'bridge stdin:', os.readlink(f'/proc/{bridge.pid}/fd/0'), file=sys.stderr)
bridge.stdin.close()
print('bridge exit:', bridge.wait(timeout=20), file=sys.stderr)
"""


def test_the_handoff_holds_in_the_sandbox(tmp_path: Path) -> None:
    """A sandboxed command's own client starts the bridge: the pipes cross to the harness, the
    session is served on them, and the bridge ends with the session."""
    import shlex

    from imagebench.executor import run_cases
    from imagebench.sandbox.policy import unavailable_reason
    from imagebench.subjects import CommandSubject

    if unavailable_reason() is not None:
        pytest.skip(str(unavailable_reason()))
    subject = CommandSubject(f"{shlex.quote(sys.executable)} -c {shlex.quote(_IN_SANDBOX)}", mcp=True)
    result = run_cases([builtin.get_case(CASE)], subject, out=tmp_path / "out", progress=False)
    (summary,) = result.samples[CASE]
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert "layers: nuclei bridge stdin: /dev/null" in err, err
    assert "bridge exit: 0" in err, err


_DISHONEST = (
    _IN_SANDBOX.split("layers = request")[0]
    + r"""
seen = []
for i, args in enumerate([{'name': 'labels', 'encoding': 'npy'}, {'name': 'count'}, {'name': '../inputs/image', 'encoding': 'npy'},
                          {'name': 'nuclei', 'encoding': 'npy', 'region': [[0, 10 ** 9]]}], start=10):
    got = request(i, 'tools/call', {'name': 'read_layer', 'arguments': args})['result']
    seen.append((got['isError'], got['content'][0]['text'][:60]))
print('refused:', all(e for e, _ in seen), seen, file=sys.stderr)
path = request(20, 'tools/call', {'name': 'read_layer', 'arguments': {'name': 'nuclei', 'encoding': 'npy'}})['result']['structuredContent']['path']
print('path:', path, file=sys.stderr)
try:
    os.symlink('/etc/passwd', '/mcp/reads/nuclei-2.npy')
except OSError as e:
    print('plant:', e.errno, file=sys.stderr)
import glob
print('others:', [p for p in glob.glob('/tmp/imagebench-mcp-*') + glob.glob('/**/reads', recursive=False) if not p.startswith('/mcp')], file=sys.stderr)
bridge.stdin.close()
print('bridge exit:', bridge.wait(timeout=20), file=sys.stderr)
"""
)


def test_a_dishonest_agent_over_the_handed_over_pipes_reaches_no_truth_and_no_other_file(tmp_path: Path) -> None:
    """Over the handoff: the truth's keys by name, a path for a name, a region past the layer are
    refused; the read's file is the harness's, under the read-only /mcp, where no link can be
    planted; no other session's folder is in sight."""
    import shlex

    from imagebench.executor import run_cases
    from imagebench.sandbox.policy import unavailable_reason
    from imagebench.subjects import CommandSubject

    if unavailable_reason() is not None:
        pytest.skip(str(unavailable_reason()))
    subject = CommandSubject(f"{shlex.quote(sys.executable)} -c {shlex.quote(_DISHONEST)}", mcp=True)
    result = run_cases([builtin.get_case(CASE)], subject, out=tmp_path / "out", progress=False)
    (summary,) = result.samples[CASE]
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert "refused: True" in err and "no layer named 'labels'" in err, err
    assert "path: /mcp/reads/nuclei-1.npy" in err, err
    assert "plant: 30" in err, err  # EROFS: the folder is read-only to the subject
    assert "others: []" in err, err
    assert "bridge exit: 0" in err, err
