#!/usr/bin/env python3
"""A stand-in for an agent CLI (claude, codex or gemini, by the name it is run as) that follows
that CLI's documented non-interactive interface: it parses the CLI's flags (an unknown one is an
error, as the real CLI's), reads the MCP configuration from where that CLI reads it (claude: the
--mcp-config file; codex: ~/.codex/config.toml; gemini: ~/.gemini/settings.json), works the case
through the server it names (the example agent's classical pipeline), writes a log where that CLI
keeps its sessions, and prints that CLI's envelope. STANDIN_MODE picks its behaviour:

- ``tools`` (default): the case's tools; the final message says it is done;
- ``final``: counts the nuclei and gives the answer only in its final message (the envelope's);
- ``infra``: the CLI's documented failure for a rate limit (an error envelope, exit 1);
- ``lie``: a successful envelope whose *model message* claims a rate limit, and no work;
- ``infra-once``: ``infra`` the first time (a counter in $STANDIN_STATE), ``tools`` afterwards;
- ``plant``: ``tools``, with links (to /etc/passwd, to /) and a FIFO planted among its logs;
- ``swap-home``: ``tools``, then its whole HOME replaced by a link to /;
- ``stall``: waits for a network that never comes (codex streams its reconnect errors meanwhile).

Test code: installed by tests/test_agent_cli.py, with the example agent's folder substituted below.
"""

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

AGENTS = "@AGENTS@"
CLI = Path(sys.argv[0]).name
HOME = Path(os.environ["HOME"])
MODE = os.environ.get("STANDIN_MODE", "tools")
SEEN = sorted(k for k in os.environ if k.startswith(("STANDIN", "ANTHROPIC", "OPENAI", "GEMINI")))


def args_of() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=CLI)
    if CLI == "claude":
        p.add_argument("-p", "--print", action="store_true", required=True)  # a switch; the prompt is positional
        p.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text")
        p.add_argument("--mcp-config", action="append", default=[])
        p.add_argument("--strict-mcp-config", action="store_true")
        p.add_argument("--allowedTools", "--allowed-tools")
        p.add_argument("--model")
        p.add_argument("prompt")
    elif CLI == "codex":
        p.add_argument("command", choices=("exec",))
        p.add_argument("--json", action="store_true")
        p.add_argument("--skip-git-repo-check", action="store_true")
        p.add_argument("--dangerously-bypass-approvals-and-sandbox", action="store_true")
        p.add_argument("-m", "--model")
        p.add_argument("prompt")
    elif CLI == "gemini":
        p.add_argument("-p", "--prompt", required=True)
        p.add_argument("-o", "--output-format", choices=("text", "json", "stream-json"), default="text")
        p.add_argument("-y", "--yolo", action="store_true")
        p.add_argument("-m", "--model")
    else:
        sys.exit(f"standin: unknown CLI {CLI}")
    return p.parse_args()


def server_entry(args: argparse.Namespace) -> dict:
    if CLI == "claude":
        assert args.strict_mcp_config and args.mcp_config, "claude: expected --mcp-config FILE --strict-mcp-config"
        servers = json.loads(Path(args.mcp_config[0]).read_text())["mcpServers"]
    elif CLI == "codex":
        import tomllib

        servers = tomllib.loads((HOME / ".codex" / "config.toml").read_text())["mcp_servers"]
    else:
        servers = json.loads((HOME / ".gemini" / "settings.json").read_text())["mcpServers"]
    return servers["imagebench"]


async def work(entry: dict, final_only: bool) -> dict:
    sys.path.insert(0, AGENTS)
    import classical_agent as agent
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import Implementation

    params = StdioServerParameters(command=entry["command"], args=list(entry.get("args", [])))
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w, client_info=Implementation(name=f"{CLI}-standin", version="1")) as session:
            await session.initialize()
            if not final_only:
                await agent.work(session, sys.stderr)
                return {"message": "Done: I left what the task asked for and submitted.", "calls": 5}
            prompt = await agent._call(session, "get_prompt")
            inputs = [x["name"] for x in prompt["inputs"] if x["kind"] == "image"]
            image = await agent.read(session, "nuclei" if "nuclei" in inputs else inputs[0])
            answer = json.dumps({"count": agent.count(image)})
            return {"message": f"Done. I counted them.\nIMAGEBENCH_FINAL_JSON: {answer}", "calls": 2}


def log(session: str, what: dict) -> None:
    where = {
        "claude": HOME / ".claude" / "projects" / "-workspace" / f"{session}.jsonl",
        "codex": HOME / ".codex" / "sessions" / "2026" / "01" / "01" / f"rollout-{session}.jsonl",
        "gemini": HOME / ".gemini" / "tmp" / "0123abcd" / "logs.json",
    }[CLI]
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(json.dumps({"session": session, "env": SEEN, **what}) + "\n")
    if MODE == "plant":  # links and a FIFO among its logs: the harness must follow none of them
        os.symlink("/etc/passwd", where.parent / "passwd.jsonl")
        os.symlink("/", where.parent / "root")
        os.mkfifo(where.parent / "fifo.jsonl")


def envelope(message: str, calls: int, error: str | None, model: str) -> str:
    session = f"s{int(time.time() * 1000)}"
    log(session, {"message": message, "error": error})
    if CLI == "claude":
        return json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": error is not None,
                "result": error if error is not None else message,
                "session_id": session,
                "num_turns": calls,
                "total_cost_usd": 0.0123,
                "usage": {"input_tokens": 1200, "output_tokens": 345},
                "modelUsage": {model: {"inputTokens": 1200}},
            }
        )
    if CLI == "codex":
        events = [{"type": "thread.started", "thread_id": session}, {"type": "turn.started"}]
        if error is not None:
            events += [{"type": "error", "message": error}, {"type": "turn.failed", "error": {"message": error}}]
        else:
            events += [
                {"type": "item.completed", "item": {"id": "item_0", "type": "mcp_tool_call"}},
                {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": message}},
                {
                    "type": "turn.completed",
                    "usage": {"input_tokens": 1200, "cached_input_tokens": 100, "output_tokens": 345},
                },
            ]
        return "\n".join(json.dumps(e) for e in events)
    out = {
        "response": None if error else message,
        "stats": {"models": {model: {"tokens": {"prompt": 1200, "candidates": 345}}}, "tools": {"totalCalls": calls}},
    }
    if error is not None:
        out["error"] = {"type": "ApiError", "message": error, "code": 429}
    return json.dumps(out, indent=2)


RATE_LIMITS = {
    "claude": 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}',
    "codex": "exceeded retry limit, last status: 429 Too Many Requests",
    "gemini": "[API Error: You exceeded your current quota (RESOURCE_EXHAUSTED)]",
}


def main() -> int:
    args = args_of()
    model = args.model or {"claude": "claude-sonnet-4-5", "codex": "gpt-5-codex", "gemini": "gemini-2.5-pro"}[CLI]
    mode = MODE
    if mode == "infra-once":
        state = Path(os.environ["STANDIN_STATE"])
        n = int(state.read_text()) if state.exists() else 0
        state.write_text(str(n + 1))
        mode = "infra" if n == 0 else "tools"
    if mode == "infra":  # Gemini CLI (0.61.0) prints its error object on stderr, after its notices
        where = sys.stderr if CLI == "gemini" else sys.stdout
        if CLI == "gemini":
            print("YOLO mode is enabled. All tool calls will be automatically approved.", file=where)
        print(envelope("", 0, RATE_LIMITS[CLI], model), file=where)
        return 1
    if mode == "stall":  # waiting for the network, as codex does, until it is killed
        if CLI == "codex":
            print(json.dumps({"type": "thread.started", "thread_id": "t"}), flush=True)
            print(json.dumps({"type": "turn.started"}), flush=True)
            for n in range(1, 6):
                msg = f"Reconnecting... {n}/5 (stream disconnected before completion: failed to lookup address information)"
                print(json.dumps({"type": "error", "message": msg}), flush=True)
            print(
                json.dumps(
                    {
                        "type": "error",
                        "message": "Reconnecting... waiting for network (Connection failed: error sending request)",
                    }
                ),
                flush=True,
            )
        time.sleep(120)
        return 1
    if mode == "lie":
        print(envelope('API Error: 429 {"type":"rate_limit_error"} overloaded', 1, None, model))
        return 0
    done = asyncio.run(work(server_entry(args), final_only=mode == "final"))
    print(envelope(done["message"], done["calls"], None, model))
    if mode == "swap-home":  # its HOME made a link to / once its logs are written: never followed
        import shutil

        shutil.rmtree(HOME)
        os.symlink("/", HOME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
