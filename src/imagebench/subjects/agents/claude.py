"""``claude-code[:MODEL]``: Claude Code, headless (``claude -p``), served the case's MCP tools.

Command line (Claude Code's CLI reference: print mode, ``--output-format json``, ``--mcp-config``,
``--strict-mcp-config``, ``--allowedTools``, ``--model``)::

    claude -p "$(cat agent-prompt.md)" --output-format json \\
        --mcp-config /workspace/home/.claude/imagebench-mcp.json --strict-mcp-config \\
        --allowedTools mcp__imagebench [--model MODEL]

The MCP configuration is the ``mcpServers`` JSON Claude Code reads, in the private HOME; its
result envelope is one JSON object (``type: result``, ``is_error``, ``result``: the final
message, ``usage``, ``total_cost_usd``, ``num_turns``, ``modelUsage``). Its session transcripts
are ``~/.claude/projects/**``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imagebench.subjects.agents.base import INFRA_PATTERNS, AgentCliSubject, matching
from imagebench.subjects.agents.envelope import AgentUsage, Envelope, json_objects, text, whole
from imagebench.subjects.agents.home import write_home
from imagebench.subjects.registry import subject_kind

if TYPE_CHECKING:
    from imagebench.sandbox.workspace import Workspace

CONFIG = ".claude/imagebench-mcp.json"


@subject_kind
@dataclass(frozen=True)
class ClaudeCodeSubject(AgentCliSubject):
    """Claude Code run headless in the sandbox (see the module)."""

    cli = "claude-code"
    program = "claude"
    api_keys = ("ANTHROPIC_API_KEY",)
    log_folders = (".claude/projects",)
    forms = (
        (
            "claude-code[:MODEL]",
            "Claude Code headless (claude -p ... --output-format json), served the case's MCP tools",
        ),
    )

    def argv(self, prompt: str, home: str) -> list[str]:
        words = ["-p", prompt, "--output-format", "json", "--mcp-config", f"{home}/{CONFIG}", "--strict-mcp-config"]
        words += ["--allowedTools", "mcp__imagebench"]
        return words + (["--model", self.model] if self.model else [])

    def configure(self, ws: Workspace, server: dict[str, Any]) -> None:
        write_home(ws, CONFIG, json.dumps({"mcpServers": {"imagebench": {"type": "stdio", **server}}}, indent=2) + "\n")

    def envelope(self, stdout: str) -> Envelope:
        results = [o for o in json_objects(stdout) if o.get("type") == "result"]
        if not results:
            return Envelope(problem='stdout holds no Claude Code result object ({"type": "result", ...})')
        r = results[-1]
        usage = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        models = r.get("modelUsage") if isinstance(r.get("modelUsage"), dict) else {}
        cost = r.get("total_cost_usd")
        message = r.get("result")
        return Envelope(
            parsed=True,
            final_message=message if isinstance(message, str) else None,
            is_error=bool(r.get("is_error")) or str(r.get("subtype", "success")) != "success",
            error=text(message)
            if r.get("is_error")
            else text(r.get("subtype"))
            if r.get("subtype") != "success"
            else None,
            session_id=text(r.get("session_id"), 200),
            usage=AgentUsage(
                model=next(iter(models), None),
                input_tokens=whole(usage.get("input_tokens")),
                output_tokens=whole(usage.get("output_tokens")),
                cached_input_tokens=whole(usage.get("cache_read_input_tokens")),
                turns=whole(r.get("num_turns")),
                cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
            ),
        )

    def infra(self, envelope: Envelope, exit_code: int, stderr: str) -> str | None:
        # Only what Claude Code itself says went wrong: an error result, or no result and a failed exit.
        if envelope.parsed:
            return matching(INFRA_PATTERNS, envelope.error) if envelope.is_error else None
        return matching(INFRA_PATTERNS, stderr) if exit_code != 0 else None
