"""An MCP tool call's round trip against reading the same array from ``inputs/``, beside the
protocol's floor and napari-mcp's own read of the same array.

The case server runs as ``run --subject-mcp`` serves it: an :class:`AgentSession` on a Unix
socket in the harness's folder, in a thread of this process (the harness). The agent is another
process (this file with ``--client``), as in a run: it starts the stdlib bridge that ``mcp.json``
names, as an agent's client does, and times each call from the request until it holds the array
as numpy (JSON parsed, base64 decoded, or the ``.npy`` the result names loaded), median over
repeats. Every client and server is open at once and the fast calls are interleaved, round by
round (the anchors, the floors, list_layers, the ``npy`` reads, napari-mcp's file route), so that
the shared machine's load falls on all of them alike; the slow ones (``base64``, ``list``,
napari-mcp's ``get_layer``) are timed apart, fewer times. Our server is timed twice: as served (the
bridge hands its pipes over, ``tools/call`` answered without the SDK's session loop) and as
``SocketServer(fast=False)`` serves it (the SDK's session loop alone, the bridge relaying: the path
before). Two clients are timed:

- ``sdk``: the MCP Python SDK's ``ClientSession`` over ``stdio_client``. It checks each
  structured result against the tool's ``outputSchema`` with ``jsonschema.validate``, which
  checks the schema itself against the JSON Schema meta-schema on every call;
- ``lean``: newline-delimited JSON-RPC written to the bridge's stdin, each structured result
  checked against its ``outputSchema`` by a validator built once per tool (as a client that
  compiles its schemas once, e.g. ajv, does).

Beside them: the anchor, what a ``command:`` subject does without the server (``np.load`` of
``inputs/image.npy``, page cache warm); the floor, an empty tool (no arguments, no
``outputSchema``, nothing returned) served by the same SDK through the same socket and bridge;
and the peer, napari-mcp 0.1.0 (a benchmark dependency, the ``peers`` extra) run on stdio under
``xvfb-run`` with a viewer holding the same array: its layer read, ``get_layer`` with
``slicing``, and its file route, ``save_layer_data`` to an ``.npy`` then ``np.load``. Targets:
``read_layer`` within 5x of the anchor, and faster than napari-mcp's fastest read. The load
average is printed before and after: the development machine is shared.

    .venv/bin/python benchmarks/bench_mcp.py                 # 512 x 512, 200 repeats
    .venv/bin/python benchmarks/bench_mcp.py --size 1024 --repeats 50 --no-peer
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

TARGET = 5.0
WARMUP = 3
#: napari-mcp's inline read costs about half a second: fewer repeats of it (and of encoding=list)
SLOW_REPEATS = 10
XVFB = ["xvfb-run", "-a", "-s", "-screen 0 1600x1200x24"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--no-peer", action="store_true", help="leave napari-mcp out")
    p.add_argument("--client", type=Path, help=argparse.SUPPRESS)  # the agent's side: a plan to time
    args = p.parse_args(argv)
    if args.client is not None:
        print(json.dumps(asyncio.run(_client(json.loads(args.client.read_text())))))
        return 0
    return _harness(args.size, args.repeats, peer=not args.no_peer)


# --------------------------------------------------------------------------- the harness's side


def _harness(n: int, repeats: int, *, peer: bool) -> int:
    from mcp.server.fastmcp import FastMCP

    from imagebench.case.model import Case, Collect, Layer
    from imagebench.case.session import open_session
    from imagebench.fixtures.fixture import Fixture, Outcome
    from imagebench.fixtures.specs import Procedural
    from imagebench.subjects.mcp.folder import McpFolder
    from imagebench.subjects.mcp.server import SocketServer, client_config
    from imagebench.subjects.mcp.tools import AgentSession, CaseView

    image = np.random.default_rng(0).random((n, n), dtype=np.float32)

    def build(seed: int) -> Fixture:
        return Fixture(provenance="bench", data={"image": image}, truth={"none": 0})

    case = Case(
        case_id="bench",
        namespace="bench",
        task="Read `image`; leave `out`.",
        persona="",
        fixture=Procedural(build, seed=0, tolerance={}),
        layers=(Layer("image", "image", "image"),),
        collect=(Collect("out", "scalar"),),
        verify=lambda fx, at: Outcome(fixture=fx, attempt=at, metrics=[]),
    )
    fixture = case.build()
    floor_server = FastMCP("floor", log_level="WARNING")

    @floor_server.tool(name="empty", description="Nothing.", structured_output=False)
    def empty() -> list[Any]:
        return []

    peer_ok = peer and shutil.which("xvfb-run") is not None and _has("napari_mcp")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="imagebench-bench-mcp-") as tmp:
        ws = Path(tmp)
        (ws / "inputs").mkdir()
        np.save(ws / "inputs" / "image.npy", image)
        session = open_session(case, fixture)
        folder = McpFolder(ws)  # the harness's: the socket, the bridge, the npy reads
        floor_folder = McpFolder(ws)
        agent = AgentSession(
            CaseView.of(case), session, workspace=ws, workspace_alias=str(ws), reads=folder, route="socket"
        )
        # ours: the bridge hands its pipes over, tools/call answered without the SDK's session loop;
        # "-sdk": the same server behind the SDK's session loop alone, the bridge relaying (as before)
        sdk_folder, sdk_floor_folder = McpFolder(ws), McpFolder(ws)
        servers = [
            SocketServer(agent, folder.socket_path),
            SocketServer(agent, floor_folder.socket_path, server=floor_server),
            SocketServer(agent, sdk_folder.socket_path, fast=False),
            SocketServer(agent, sdk_floor_folder.socket_path, server=floor_server, fast=False),
        ]
        folders = [folder, floor_folder, sdk_folder, sdk_floor_folder]

        def entry(f: McpFolder) -> dict[str, Any]:
            return client_config(str(f.path), python=sys.executable)["mcpServers"]["imagebench"]

        plan = {
            "image": str(ws / "inputs" / "image.npy"),
            "repeats": repeats,
            "server": entry(folder),
            "floor": entry(floor_folder),
            "server-sdk": entry(sdk_folder),
            "floor-sdk": entry(sdk_floor_folder),
            "peer": peer_ok,
            "scratch": str(ws / "peer"),
        }
        (ws / "plan.json").write_text(json.dumps(plan))
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--client", str(ws / "plan.json")],
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
        finally:
            for server in servers:
                server.close()
            for f in folders:
                f.remove()
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"the client failed (exit {done.returncode})")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    _print(n, image, repeats, got, load_before, os.getloadavg(), peer_asked=peer, peer_ok=peer_ok)
    return 0


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _print(
    n: int,
    image: np.ndarray,
    repeats: int,
    got: dict[str, float],
    before: tuple[float, float, float],
    after: tuple[float, float, float],
    *,
    peer_asked: bool,
    peer_ok: bool,
) -> None:
    print(f"read_layer of a {n} x {n} float32 layer ({image.nbytes / 1e6:.2f} MB), medians of {repeats}")
    print(f"(load average before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, on {os.cpu_count()} cores)")
    for client in ("sdk", "lean"):
        anchor, mmap = got[f"{client}:anchor"], got[f"{client}:anchor-mmap"]

        def line(label: str, key: str, of: str = "") -> None:
            if key in got:
                base = got.get(f"{key}@anchor", anchor)
                print(
                    f"  {client + ': ' + label:<62s} {got[key] * 1e3:9.3f} ms = {got[key] / base:7.1f}x{of}"
                    f"  (anchor {base * 1e3:.3f})"
                )

        print(f"{client}: each call timed in rounds alternating with its anchor; the ratio is to that anchor")
        print(f"  {client + ': anchor np.load(inputs/image.npy), median of its rounds':<62s} {anchor * 1e3:9.3f} ms")
        print(f"  {client + ': anchor np.load(inputs/image.npy, mmap_mode=r)':<62s} {mmap * 1e3:9.3f} ms")
        line("SDK floor (empty tool, SDK session loop, relay)", f"{client}:floor-sdk")
        line("floor (empty tool, pipes handed over, fast call)", f"{client}:floor")
        line("read_layer npy, SDK session loop and relay", f"{client}:npy-sdk")
        line("list_layers (no pixels)", f"{client}:list_layers")
        line("read_layer npy (whole input: its file named again)", f"{client}:npy")
        line("read_layer npy, then np.load(mmap_mode=r)", f"{client}:npy-mmap", " of the mmap anchor")
        line("read_layer npy, region (a file written each call)", f"{client}:npy-region")
        line("napari-mcp save_layer_data .npy, then np.load", f"{client}:peer:save_layer_data")
        line(f"read_layer base64 (apart, of {SLOW_REPEATS})", f"{client}:base64")
        line(f"read_layer list (apart, of {SLOW_REPEATS})", f"{client}:list")
        line(f"napari-mcp get_layer, slicing (apart, of {SLOW_REPEATS})", f"{client}:peer:get_layer")
    if "peer-failed" in got:
        print(f"  napari-mcp: failed, not measured ({got.pop('peer-failed')})")
    if peer_asked and not peer_ok:
        print("  napari-mcp: not measured (needs napari-mcp and xvfb-run: the peers extra)")
    print(f"(load average after  {after[0]:.2f} {after[1]:.2f} {after[2]:.2f})")
    for client in ("sdk", "lean"):

        def ratio(key: str) -> float:
            return got[f"{client}:{key}"] / got.get(f"{client}:{key}@anchor", got[f"{client}:anchor"])

        best_key = "npy"  # the whole layer, as the target reads; the others are said beside it
        best = got[f"{client}:{best_key}"]
        print(
            f"ratio {client}: read_layer npy / anchor {ratio(best_key):.1f}x (a file written each call: "
            f"{ratio('npy-region'):.1f}x; before, SDK session loop and relay: {ratio('npy-sdk'):.1f}x); "
            f"floor / anchor {ratio('floor'):.1f}x (SDK floor {ratio('floor-sdk'):.1f}x); "
            f"target within {TARGET:g}x: {'met' if ratio(best_key) <= TARGET else 'NOT met'}"
        )
        print(
            f"ratio {client}: read_layer npy then np.load(mmap_mode=r) / the mmap anchor {ratio('npy-mmap'):.1f}x; "
            f"read_layer npy / np.load in a loop of its own ({got['anchor-alone'] * 1e3:.3f} ms) "
            f"{best / got['anchor-alone']:.1f}x"
        )
        saved = f"{client}:peer:save_layer_data"
        if saved in got:
            inline = got.get(f"{client}:peer:get_layer")
            print(
                f"ratio {client}: napari-mcp's save_layer_data / read_layer {ratio('peer:save_layer_data') / ratio(best_key):.1f}x "
                f"(each over the anchor of its own rounds; in ms {got[saved] / best:.1f}x)"
                + (f", its get_layer / read_layer {inline / best:.0f}x" if inline is not None else "")
                + f"; faster than napari-mcp: {'met' if ratio(best_key) < ratio('peer:save_layer_data') else 'NOT met'}"
            )


# --------------------------------------------------------------------------- the agent's side


# --------------------------------------------------------------------------- the agent's side

#: the encodings timed apart, fewer times (each costs tens of ms or more): not interleaved
SLOW_READS = ("base64", "list")


def _array(got: dict[str, Any], encoding: str, *, mmap: bool = False) -> np.ndarray:
    if encoding == "base64":
        return np.frombuffer(base64.b64decode(got["data"]), dtype=got["dtype"]).reshape(got["shape"])
    if encoding == "list":
        return np.asarray(got["data"], dtype=np.float32)
    return np.load(got["path"], mmap_mode="r") if mmap else np.load(got["path"])


def _reads(n: int) -> dict[str, dict[str, Any]]:
    """Each read timed: the whole layer in each encoding, and a region of all but one row (its
    ``.npy`` written on every call, where a whole input layer's is written once and named again)."""
    return {
        "npy": {"name": "image", "encoding": "npy"},
        "npy-mmap": {"name": "image", "encoding": "npy"},  # the same read, the file then mapped, not copied
        "npy-region": {"name": "image", "encoding": "npy", "region": [[0, n - 1]]},
        "base64": {"name": "image", "encoding": "base64"},
        "list": {"name": "image", "encoding": "list"},
    }


def _check(key: str, arr: np.ndarray, image: np.ndarray) -> None:
    want = image[:-1] if key.endswith("npy-region") else image
    if not np.array_equal(arr, want):
        raise SystemExit(f"{key}: the array read back differs")


Timed = Callable[[], Awaitable[Any]]


async def _interleaved(repeats: int, calls: dict[str, Timed]) -> dict[str, float]:
    """Each call's median over ``repeats`` rounds, every round calling each once in turn, so
    that a change of the machine's load falls on all of them alike (the ratios are of one run)."""
    times: dict[str, list[float]] = {key: [] for key in calls}
    for i in range(repeats + WARMUP):
        for key, call in calls.items():
            t0 = time.perf_counter()
            await call()
            if i >= WARMUP:
                times[key].append(time.perf_counter() - t0)
    return {key: statistics.median(t) for key, t in times.items()}


async def _timed(repeats: int, call: Timed) -> float:
    return (await _interleaved(repeats, {"one": call}))["one"]


async def _client(plan: dict[str, Any]) -> dict[str, float]:
    """Every client and server open at once; the anchors, the floors and the ``npy`` reads (and
    napari-mcp's file route) interleaved round by round; the slow encodings timed apart."""
    from contextlib import AsyncExitStack

    image = np.load(plan["image"])
    repeats = int(plan["repeats"])
    held: dict[str, np.ndarray] = {}
    calls: dict[str, Timed] = {}
    slow: dict[str, Timed] = {}
    out: dict[str, float] = {}

    async def anchor() -> None:
        held["anchor"] = np.load(plan["image"])

    async def anchor_mmap() -> None:
        held["anchor-mmap"] = np.load(plan["image"], mmap_mode="r")

    async with AsyncExitStack() as stack:
        sdk = {
            which: await _sdk_session(stack, plan[which]) for which in ("floor", "floor-sdk", "server", "server-sdk")
        }
        lean = {which: _Lean(plan[which]) for which in ("floor", "floor-sdk", "server", "server-sdk")}
        for client in lean.values():
            stack.callback(client.close)
        for name in ("sdk", "lean"):
            _our_calls(name, sdk if name == "sdk" else lean, image, calls, slow, held)
        out["anchor-alone"] = await _timed(repeats, anchor)  # np.load in a loop of its own, caches warm
        await _paired(repeats, calls, anchor, anchor_mmap, out)
        for name in ("sdk", "lean"):  # shown: the medians of the anchors of a client's rounds
            mine = [v for k, v in out.items() if k.startswith(f"{name}:") and k.endswith("@anchor")]
            mapped = [out[f"{name}:npy-mmap@anchor"]]
            out[f"{name}:anchor"] = statistics.median([v for v in mine if v not in mapped])
            out[f"{name}:anchor-mmap"] = mapped[0]
        for key, call in slow.items():
            out[key] = await _timed(SLOW_REPEATS, call)
    if plan["peer"]:  # started only now: napari and Xvfb never run beside our calls
        peer_calls: dict[str, Timed] = {}
        peer_slow: dict[str, Timed] = {}
        try:
            async with AsyncExitStack() as stack:
                await _peer(stack, plan, image, peer_calls, peer_slow, held)
                await _paired(repeats, peer_calls, anchor, anchor_mmap, out)
                for key, call in peer_slow.items():
                    out[key] = await _timed(SLOW_REPEATS, call)
        except (Exception, SystemExit, BaseExceptionGroup) as exc:  # the peer's failure is said, not ours
            out["peer-failed"] = f"{type(exc).__name__}: {exc}"[:300]  # type: ignore[assignment]
    for key, arr in held.items():
        if key not in ("anchor", "anchor-mmap"):
            _check(key, arr, image)
    return out


async def _paired(
    repeats: int, calls: dict[str, Timed], anchor: Timed, anchor_mmap: Timed, out: dict[str, float]
) -> None:
    """Each call in rounds alternating with its anchor (``np.load``, or its mmap form for the mmap
    read): ``out[key]`` and ``out[key + "@anchor"]``, whose ratio is of the same rounds."""
    for key, call in calls.items():
        base = anchor_mmap if key.endswith("npy-mmap") else anchor
        paired = await _interleaved(repeats, {"anchor": base, key: call})
        out[key], out[f"{key}@anchor"] = paired[key], paired["anchor"]


async def _sdk_session(stack: Any, entry: dict[str, Any]) -> Any:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=entry["command"], args=entry["args"])
    r, w = await stack.enter_async_context(stdio_client(params))
    client = await stack.enter_async_context(ClientSession(r, w))
    await client.initialize()
    return client


def _our_calls(
    name: str,
    clients: dict[str, Any],
    image: np.ndarray,
    calls: dict[str, Timed],
    slow: dict[str, Timed],
    held: dict[str, np.ndarray],
) -> None:
    """The calls of one client (``sdk``: the SDK's ``ClientSession``; ``lean``: :class:`_Lean`)."""

    def call(which: str, tool: str, args: dict[str, Any]) -> Timed:
        client = clients[which]
        if name == "sdk":

            async def sdk_call() -> dict[str, Any]:
                return (await client.call_tool(tool, args)).structuredContent or {}

            return sdk_call

        async def lean_call() -> dict[str, Any]:
            return client.call(tool, args)

        return lean_call

    def read(key: str, which: str, args: dict[str, Any]) -> Timed:
        made = call(which, "read_layer", args)

        async def timed_read() -> None:
            held[key] = _array(await made(), args["encoding"], mmap=key.endswith("npy-mmap"))

        return timed_read

    calls[f"{name}:floor"] = call("floor", "empty", {})
    calls[f"{name}:floor-sdk"] = call("floor-sdk", "empty", {})
    calls[f"{name}:list_layers"] = call("server", "list_layers", {})
    for key, args in _reads(image.shape[0]).items():
        (slow if key in SLOW_READS else calls)[f"{name}:{key}"] = read(f"{name}:{key}", "server", args)
    calls[f"{name}:npy-sdk"] = read(f"{name}:npy-sdk", "server-sdk", {"name": "image", "encoding": "npy"})


class _Lean:
    """Newline-delimited JSON-RPC on a bridge's stdin/stdout; each structured result checked
    against its tool's ``outputSchema`` by a validator built once (the schema checked once)."""

    def __init__(self, entry: dict[str, Any], *, quiet: bool = False) -> None:
        from jsonschema import validators

        self.proc = subprocess.Popen(
            [entry["command"], *entry["args"]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if quiet else None,
        )
        self.next_id = 0
        self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "lean", "version": "0"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.validators = {}
        for tool in self.request("tools/list", {})["tools"]:
            schema = tool.get("outputSchema")
            if schema is not None:
                cls = validators.validator_for(schema)
                cls.check_schema(schema)
                self.validators[tool["name"]] = cls(schema)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdout is not None
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise SystemExit(f"{method}: {message['error']}")
                return message["result"]

    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": tool, "arguments": args})
        if result.get("isError"):
            raise SystemExit(f"{tool}: {result['content']}")
        structured = result.get("structuredContent")
        if tool in self.validators:
            self.validators[tool].validate(structured)
        return structured or {}

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


async def _peer(
    stack: Any,
    plan: dict[str, Any],
    image: np.ndarray,
    calls: dict[str, Timed],
    slow: dict[str, Timed],
    held: dict[str, np.ndarray],
) -> None:
    """napari-mcp on stdio under xvfb-run, its viewer holding the same array, through each client:
    its layer read (``get_layer`` with ``slicing``: the numbers inline) and its file route
    (``save_layer_data`` to an ``.npy``, then ``np.load``)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    scratch = Path(plan["scratch"])
    scratch.mkdir()
    entry = {"command": XVFB[0], "args": [*XVFB[1:], sys.executable, "-m", "napari_mcp.server"]}
    load = f"viewer.add_image(np.load({plan['image']!r}), name='image')"
    get_args = {"name": "image", "slicing": ":, :", "max_elements": int(image.size)}
    count = [0]

    def save_args() -> dict[str, Any]:
        count[0] += 1
        return {"name": "image", "path": str(scratch / f"image-{count[0]}.npy")}

    quiet = stack.enter_context(open(os.devnull, "w"))
    params = StdioServerParameters(command=entry["command"], args=entry["args"])
    r, w = await stack.enter_async_context(stdio_client(params, errlog=quiet))
    client = await stack.enter_async_context(ClientSession(r, w))
    await client.initialize()
    await client.call_tool("init_viewer", {})
    done = await client.call_tool("execute_code", {"code": load})
    if done.isError or '"status":"ok"' not in done.content[0].text.replace(" ", ""):
        raise SystemExit(f"napari-mcp could not load the array: {done.content}")
    lean = _Lean(entry, quiet=True)
    stack.callback(lean.close)
    lean.call("init_viewer", {})
    lean.call("execute_code", {"code": load})

    async def get_layer() -> None:
        result = await client.call_tool("get_layer", get_args)
        got = result.structuredContent or json.loads(result.content[0].text)
        held["sdk:peer:get_layer"] = np.asarray(got["data"], dtype=np.float32)

    async def save_layer_data() -> None:
        args = save_args()
        await client.call_tool("save_layer_data", args)
        held["sdk:peer:save_layer_data"] = np.load(args["path"])
        os.unlink(args["path"])

    async def lean_save() -> None:
        args = save_args()
        lean.call("save_layer_data", args)
        held["lean:peer:save_layer_data"] = np.load(args["path"])
        os.unlink(args["path"])

    slow["sdk:peer:get_layer"] = get_layer
    calls["sdk:peer:save_layer_data"] = save_layer_data
    calls["lean:peer:save_layer_data"] = lean_save


if __name__ == "__main__":
    sys.exit(main())
