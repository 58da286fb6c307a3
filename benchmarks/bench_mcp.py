"""An MCP tool call's round trip against reading the same array from ``inputs/``.

The case server runs as ``run --subject-mcp`` serves it: an :class:`AgentSession` on a Unix
socket in a workspace folder, reached by the SDK's stdio client through the stdlib bridge that
``mcp.json`` names (a separate process, as an agent's client starts it). One call is
``read_layer`` of a 512 x 512 float32 layer, timed from the request until the client holds the
array as numpy (JSON parsed, base64 decoded, or the ``.npy`` it names loaded), median over
repeats. The anchor is what a ``command:`` subject does without the server: ``np.load`` of
``inputs/<layer>.npy`` from the same folder (page cache warm, as it is for the server). Target:
the round trip within 5x of the anchor. Each encoding is reported; the target is judged on the
fastest, and the others are printed beside it.

    .venv/bin/python benchmarks/bench_mcp.py                 # 512 x 512, 200 repeats
    .venv/bin/python benchmarks/bench_mcp.py --size 1024 --repeats 50
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TARGET = 5.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--repeats", type=int, default=200)
    args = p.parse_args(argv)

    from imagebench.case.model import Case, Collect, Layer
    from imagebench.case.session import open_session
    from imagebench.fixtures.fixture import Fixture, Outcome
    from imagebench.fixtures.specs import Procedural
    from imagebench.subjects.mcp.folder import McpFolder
    from imagebench.subjects.mcp.server import SocketServer, client_config
    from imagebench.subjects.mcp.tools import AgentSession, CaseView

    n = args.size
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
    with tempfile.TemporaryDirectory(prefix="imagebench-bench-mcp-") as tmp:
        ws = Path(tmp)
        (ws / "inputs").mkdir()
        np.save(ws / "inputs" / "image.npy", image)
        session = open_session(case, fixture)
        folder = McpFolder(ws)  # the harness's: the socket, the bridge, the npy reads
        agent = AgentSession(
            CaseView.of(case), session, workspace=ws, workspace_alias=str(ws), reads=folder, route="socket"
        )
        server = SocketServer(agent, folder.socket_path)
        config = client_config(str(folder.path), python=sys.executable)
        try:
            anchor = _anchor(ws / "inputs" / "image.npy", args.repeats)
            calls = asyncio.run(_calls(config, image, args.repeats))
        finally:
            server.close()
            folder.remove()

    print(f"read_layer of a {n} x {n} float32 layer ({image.nbytes / 1e6:.2f} MB), median of {args.repeats}")
    print(f"  anchor: np.load(inputs/image.npy)            {anchor * 1e3:8.3f} ms")
    floor = calls.pop("floor")
    print(f"  MCP list_layers (no pixels: the call's floor) {floor * 1e3:8.3f} ms  = {floor / anchor:6.1f}x")
    best = min(calls.values())
    for encoding, seconds in calls.items():
        print(f"  MCP read_layer encoding={encoding:<7s} round trip {seconds * 1e3:8.3f} ms  = {seconds / anchor:6.1f}x")
    ratio = best / anchor
    met = ratio <= TARGET
    print(f"ratio (fastest encoding / anchor): {ratio:.1f}x; target within {TARGET:g}x: {'met' if met else 'NOT met'}")
    return 0


def _anchor(path: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.load(path)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def _calls(config: dict, image: np.ndarray, repeats: int) -> dict[str, float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    entry = config["mcpServers"]["imagebench"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"])
    out: dict[str, float] = {}
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as client:
            await client.initialize()
            times = []
            for i in range(repeats + 3):
                t0 = time.perf_counter()
                await client.call_tool("list_layers", {})
                if i >= 3:
                    times.append(time.perf_counter() - t0)
            out["floor"] = statistics.median(times)  # a call that moves no pixels: the protocol's own cost
            for encoding in ("npy", "base64", "list"):
                times = []
                for i in range(repeats + 3):
                    t0 = time.perf_counter()
                    result = await client.call_tool("read_layer", {"name": "image", "encoding": encoding})
                    got = json.loads(result.content[0].text)
                    if encoding == "npy":
                        arr = np.load(got["path"])
                    elif encoding == "base64":
                        arr = np.frombuffer(base64.b64decode(got["data"]), dtype=got["dtype"]).reshape(got["shape"])
                    else:
                        arr = np.asarray(got["data"], dtype=np.float32)
                    dt = time.perf_counter() - t0
                    if i >= 3:  # warm-up calls left out
                        times.append(dt)
                if not np.array_equal(arr, image):
                    raise SystemExit(f"encoding {encoding}: the array read back differs")
                out[encoding] = statistics.median(times)
    return out


if __name__ == "__main__":
    sys.exit(main())
