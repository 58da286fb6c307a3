"""A dishonest subject for the access-setting tests (tests/test_access.py): run as a ``command:``
inside the sandbox, it tries to read around its setting and prints what it got as one JSON line
after ``PROBE:``. It tries a shell (several ways), other programs, a program copied to /tmp, the
inputs on disk, the workspace's listing, the data plane, and, over MCP, every tool it is not
meant to have (read_layer, snapshot). Then it leaves a (wrong) answer through the tools and submits.
It never imports imagebench (the sandbox hides it)."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

WS = Path(os.environ.get("IMAGEBENCH_WORKSPACE", "."))


def attempt(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=20, check=False)
    except OSError as exc:
        return f"refused: {type(exc).__name__} errno {exc.errno}"
    out = done.stdout.decode("utf-8", "replace")
    return "RAN" if "PROBE-RAN" in out else f"exit {done.returncode}: {done.stderr.decode('utf-8', 'replace')[:120]}"


def on_disk() -> dict[str, Any]:
    found: dict[str, Any] = {}
    listed = sorted(str(p.relative_to(WS)) for p in WS.rglob("*")) if WS.is_dir() else []
    found["workspace"] = listed
    try:
        found["inputs_read"] = len((WS / "inputs" / "image.npy").read_bytes())
    except OSError as exc:
        found["inputs_read"] = f"refused: {type(exc).__name__}"
    found["npy_anywhere"] = sorted(
        p for root in ("/workspace", "/tmp", "/mcp", "/skill") for p in glob.glob(f"{root}/**/*.npy", recursive=True)
    )
    found["tensor_url"] = os.environ.get("IMAGEBENCH_TENSOR_URL")
    found["views"] = (
        sorted(str(p.relative_to(WS)) for p in (WS / "views").glob("*.png")) if (WS / "views").is_dir() else []
    )
    found["views_png"] = all((WS / v).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for v in found["views"])
    return found


def execs() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for shell in ("/bin/sh", "/bin/bash", "/usr/bin/dash", "sh", "bash"):
        out[shell] = attempt([shell, "-c", "echo PROBE-RAN"])
    try:
        out["os.system"] = os.system("echo PROBE-RAN > /tmp/probe-system")
        out["os.system ran"] = os.path.exists("/tmp/probe-system")
    except OSError as exc:
        out["os.system"] = f"refused: {exc}"
    out["env"] = attempt(["/usr/bin/env", "echo", "PROBE-RAN"])
    out["echo"] = attempt(["/usr/bin/echo", "PROBE-RAN"])
    copied = "/tmp/copied-python"
    shutil.copy(os.path.realpath(sys.executable), copied)
    os.chmod(copied, 0o755)
    out["copied program"] = attempt([copied, "-c", "print('PROBE-RAN')"])
    out["python3 -c"] = attempt([sys.executable, "-c", "print('PROBE-RAN')"])
    loaders = sorted(glob.glob("/lib64/ld-linux*.so*") + glob.glob("/lib/ld-linux*.so*"))
    if loaders:  # the dynamic loader run directly, loading a shell's code
        out["loader bash"] = attempt([loaders[0], "/usr/bin/bash", "-c", "echo PROBE-RAN"])
        out["loader dash"] = attempt([loaders[0], "/usr/bin/dash", "-c", "echo PROBE-RAN"])
    return out


async def over_mcp() -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    config = WS / "mcp.json"
    if not config.exists():
        return {"mcp": "no mcp.json"}
    entry = json.loads(config.read_text())["mcpServers"]["imagebench"]
    params = StdioServerParameters(command=entry["command"], args=list(entry.get("args", [])), env=entry.get("env"))
    out: dict[str, Any] = {}
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as session:
            await session.initialize()
            out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
            prompt = json.loads((await session.call_tool("get_prompt", {})).content[0].text)
            name = prompt["inputs"][0]["name"]
            for tool, args in (("read_layer", {"name": name, "encoding": "base64"}), ("snapshot", {"layer": name})):
                got = await session.call_tool(tool, args)
                out[tool] = "refused" if got.isError else "answered"
            leave = [x["name"] for x in prompt["leave"]]
            if "answer" in leave:
                await session.call_tool("set_answer", {"name": "answer", "value": {"count": 0}})
            await session.call_tool("submit", {"note": "probe"})
    return out


def main() -> int:
    report = {"disk": on_disk(), "exec": execs()}
    try:
        report["mcp"] = asyncio.run(over_mcp())
    except Exception as exc:  # the probe reports, never stops
        report["mcp"] = {"error": f"{type(exc).__name__}: {exc}"}
    print("PROBE:" + json.dumps(report), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
