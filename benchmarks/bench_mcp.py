"""An MCP tool call's round trip against reading the same array from ``inputs/``, beside the
protocol's floor and napari-mcp's own read of the same array.

The case server runs as ``run --subject-mcp`` serves it: an :class:`AgentSession` on a Unix
socket in the harness's folder, in a thread of this process (the harness). The agent is another
process (this file with ``--client``), as in a run: it starts the stdlib bridge that ``mcp.json``
names, as an agent's client does, and times each call from the request until it holds the array
as numpy (JSON parsed, base64 decoded, or the ``.npy`` the result names loaded), median over
repeats. Two clients are timed:

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
    anchor = got["anchor"]

    def line(label: str, key: str) -> None:
        if key in got:
            print(f"  {label:<58s} {got[key] * 1e3:9.3f} ms = {got[key] / anchor:7.1f}x")

    print(f"read_layer of a {n} x {n} float32 layer ({image.nbytes / 1e6:.2f} MB), medians of {repeats}")
    print(f"(load average before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, on {os.cpu_count()} cores)")
    print(f"  {'anchor: np.load(inputs/image.npy)':<58s} {anchor * 1e3:9.3f} ms")
    mmap = got["anchor-mmap"]
    print(f"  {'anchor: np.load(inputs/image.npy, mmap_mode=r)':<58s} {mmap * 1e3:9.3f} ms")
    for client in ("sdk", "lean"):
        line(f"{client}: SDK floor (empty tool, SDK session loop, relay)", f"{client}:floor-sdk")
        line(f"{client}: floor (empty tool, pipes handed over, fast call)", f"{client}:floor")
        line(f"{client}: read_layer npy, SDK session loop and relay", f"{client}:npy-sdk")
        line(f"{client}: list_layers (no pixels)", f"{client}:list_layers")
        line(f"{client}: read_layer npy (whole input: its file named again)", f"{client}:npy")
        key = f"{client}:npy-mmap"
        if key in got:
            print(
                f"  {client + ': read_layer npy, then np.load(mmap_mode=r)':<58s} {got[key] * 1e3:9.3f} ms = "
                f"{got[key] / mmap:7.1f}x of the mmap anchor"
            )
        line(f"{client}: read_layer npy, region (a file written each call)", f"{client}:npy-region")
        line(f"{client}: read_layer base64", f"{client}:base64")
        line(f"{client}: read_layer list (of {SLOW_REPEATS})", f"{client}:list")
        line(f"{client}: napari-mcp get_layer, slicing (of {SLOW_REPEATS})", f"{client}:peer:get_layer")
        line(f"{client}: napari-mcp save_layer_data .npy, then np.load", f"{client}:peer:save_layer_data")
    if "peer-failed" in got:
        print(f"  napari-mcp: failed, not measured ({got.pop('peer-failed')})")
    if peer_asked and not peer_ok:
        print("  napari-mcp: not measured (needs napari-mcp and xvfb-run: the peers extra)")
    print(f"(load average after  {after[0]:.2f} {after[1]:.2f} {after[2]:.2f})")
    for client in ("sdk", "lean"):
        best = min(got[f"{client}:{e}"] for e in ("npy", "npy-region", "base64"))
        fresh = got[f"{client}:npy-region"]
        print(
            f"ratio {client}: read_layer / anchor {best / anchor:.1f}x (a file written each call: "
            f"{fresh / anchor:.1f}x); floor / anchor {got[f'{client}:floor'] / anchor:.1f}x "
            f"(SDK floor {got[f'{client}:floor-sdk'] / anchor:.1f}x); "
            f"target within {TARGET:g}x: {'met' if best / anchor <= TARGET else 'NOT met'}"
        )
        print(
            f"ratio {client}: read_layer npy then np.load(mmap_mode=r) / that mmap anchor "
            f"{got[f'{client}:npy-mmap'] / mmap:.1f}x (its time / the np.load anchor {got[f'{client}:npy-mmap'] / anchor:.1f}x)"
        )
        peers = [got[k] for k in (f"{client}:peer:get_layer", f"{client}:peer:save_layer_data") if k in got]
        if peers:
            inline = got.get(f"{client}:peer:get_layer")
            print(
                f"ratio {client}: napari-mcp's fastest read / read_layer {min(peers) / best:.1f}x"
                + (f", its get_layer / read_layer {inline / best:.0f}x" if inline is not None else "")
                + f"; faster than napari-mcp: {'met' if best < min(peers) else 'NOT met'}"
            )


# --------------------------------------------------------------------------- the agent's side


async def _timed(repeats: int, call: Callable[[], Awaitable[Any]]) -> float:
    times = []
    for i in range(repeats + WARMUP):
        t0 = time.perf_counter()
        await call()
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


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


async def _client(plan: dict[str, Any]) -> dict[str, float]:
    image = np.load(plan["image"])
    repeats = int(plan["repeats"])
    out: dict[str, float] = {}

    async def anchor() -> None:
        np.load(plan["image"])

    out["anchor"] = await _timed(repeats, anchor)

    async def anchor_mmap() -> None:
        np.load(plan["image"], mmap_mode="r")

    out["anchor-mmap"] = await _timed(repeats, anchor_mmap)
    out.update(await _sdk(plan, image, repeats))
    out.update(_lean(plan, image, repeats))
    if plan["peer"]:
        try:
            out.update(await _peer(plan, image))
        except (Exception, SystemExit, BaseExceptionGroup) as exc:  # the peer's failure is said, not ours
            out["peer-failed"] = f"{type(exc).__name__}: {exc}"[:300]  # type: ignore[assignment]
    return out


async def _sdk(plan: dict[str, Any], image: np.ndarray, repeats: int) -> dict[str, float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    out: dict[str, float] = {}
    for which in ("floor", "floor-sdk"):
        floor = plan[which]
        async with stdio_client(StdioServerParameters(command=floor["command"], args=floor["args"])) as (r, w):
            async with ClientSession(r, w) as client:
                await client.initialize()
                out[f"sdk:{which}"] = await _timed(repeats, lambda: client.call_tool("empty", {}))
    entry = plan["server-sdk"]
    async with stdio_client(StdioServerParameters(command=entry["command"], args=entry["args"])) as (r, w):
        async with ClientSession(r, w) as client:
            await client.initialize()
            npy = {"name": "image", "encoding": "npy"}

            async def read_sdk() -> None:
                _array((await client.call_tool("read_layer", npy)).structuredContent or {}, "npy")

            out["sdk:npy-sdk"] = await _timed(repeats, read_sdk)
    entry = plan["server"]
    async with stdio_client(StdioServerParameters(command=entry["command"], args=entry["args"])) as (r, w):
        async with ClientSession(r, w) as client:
            await client.initialize()
            out["sdk:list_layers"] = await _timed(repeats, lambda: client.call_tool("list_layers", {}))
            for key, args in _reads(image.shape[0]).items():
                held: list[np.ndarray] = []

                async def read(args: dict[str, Any] = args, held: list[np.ndarray] = held, key: str = key) -> None:
                    result = await client.call_tool("read_layer", args)
                    held[:] = [_array(result.structuredContent or {}, args["encoding"], mmap=key == "npy-mmap")]

                out[f"sdk:{key}"] = await _timed(SLOW_REPEATS if key == "list" else repeats, read)
                _check(f"sdk {key}", held[0], image)
    return out


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


def _timed_sync(repeats: int, call: Callable[[], Any]) -> float:
    times = []
    for i in range(repeats + WARMUP):
        t0 = time.perf_counter()
        call()
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _lean(plan: dict[str, Any], image: np.ndarray, repeats: int) -> dict[str, float]:
    out: dict[str, float] = {}
    timed = _timed_sync
    for which in ("floor", "floor-sdk"):
        floor = _Lean(plan[which])
        try:
            out[f"lean:{which}"] = timed(repeats, lambda: floor.call("empty", {}))
        finally:
            floor.close()
    relayed = _Lean(plan["server-sdk"])
    try:
        npy = {"name": "image", "encoding": "npy"}
        out["lean:npy-sdk"] = timed(repeats, lambda: _array(relayed.call("read_layer", npy), "npy"))
    finally:
        relayed.close()
    lean = _Lean(plan["server"])
    try:
        out["lean:list_layers"] = timed(repeats, lambda: lean.call("list_layers", {}))
        for key, args in _reads(image.shape[0]).items():
            held: list[np.ndarray] = []

            def read(args: dict[str, Any] = args, held: list[np.ndarray] = held, key: str = key) -> None:
                held[:] = [_array(lean.call("read_layer", args), args["encoding"], mmap=key == "npy-mmap")]

            out[f"lean:{key}"] = timed(SLOW_REPEATS if key == "list" else repeats, read)
            _check(f"lean {key}", held[0], image)
    finally:
        lean.close()
    return out


async def _peer(plan: dict[str, Any], image: np.ndarray) -> dict[str, float]:
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
    repeats = int(plan["repeats"])
    count = [0]

    def save_args() -> dict[str, Any]:
        count[0] += 1
        return {"name": "image", "path": str(scratch / f"image-{count[0]}.npy")}

    out: dict[str, float] = {}
    held: list[np.ndarray] = []
    with open(os.devnull, "w") as quiet:
        async with stdio_client(StdioServerParameters(command=entry["command"], args=entry["args"]), errlog=quiet) as (
            r,
            w,
        ):
            async with ClientSession(r, w) as client:
                await client.initialize()
                await client.call_tool("init_viewer", {})
                done = await client.call_tool("execute_code", {"code": load})
                if done.isError or '"status":"ok"' not in done.content[0].text.replace(" ", ""):
                    raise SystemExit(f"napari-mcp could not load the array: {done.content}")

                async def get_layer() -> None:
                    result = await client.call_tool("get_layer", get_args)
                    got = result.structuredContent or json.loads(result.content[0].text)
                    held[:] = [np.asarray(got["data"], dtype=np.float32)]

                async def save_layer_data() -> None:
                    args = save_args()
                    await client.call_tool("save_layer_data", args)
                    held[:] = [np.load(args["path"])]

                out["sdk:peer:get_layer"] = await _timed(SLOW_REPEATS, get_layer)
                _check("napari-mcp get_layer", held[0], image)
                out["sdk:peer:save_layer_data"] = await _timed(repeats, save_layer_data)
                _check("napari-mcp save_layer_data", held[0], image)
    lean = _Lean(entry, quiet=True)
    try:
        lean.call("init_viewer", {})
        lean.call("execute_code", {"code": load})

        def lean_save() -> None:
            args = save_args()
            lean.call("save_layer_data", args)
            held[:] = [np.load(args["path"])]

        out["lean:peer:save_layer_data"] = _timed_sync(repeats, lean_save)
        _check("napari-mcp save_layer_data (lean)", held[0], image)
    finally:
        lean.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
