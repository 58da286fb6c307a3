"""``claude-code[:MODEL]``: Claude Code, headless (``claude -p``), served the case's MCP tools.

Command line (Claude Code's CLI reference: print mode, ``--output-format json``, ``--mcp-config``,
``--strict-mcp-config``, ``--allowedTools``, ``--model``)::

    claude -p "$(cat agent-prompt.md)" --output-format json \\
        --mcp-config "$HOME/.claude/imagebench-mcp.json" --strict-mcp-config \\
        --allowedTools mcp__imagebench [--model MODEL]

The MCP configuration is the ``mcpServers`` JSON Claude Code reads, in the private HOME (and the same
server at user scope in ``~/.claude.json``, merged into a template's own, for ``claude mcp list``); its
result envelope is one JSON object (``type: result``, ``is_error``, ``result``: the final
message, ``usage``, ``total_cost_usd``, ``num_turns``, ``modelUsage``). Its session transcripts
are ``~/.claude/projects/**``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imagebench.subjects.agents.base import INFRA_PATTERNS, AgentCliSubject, last_lines, matching
from imagebench.subjects.agents.envelope import AgentUsage, Envelope, json_objects, text, whole
from imagebench.subjects.agents.home import home_file, write_home
from imagebench.subjects.base import SubjectError
from imagebench.subjects.registry import subject_kind

if TYPE_CHECKING:
    from imagebench.sandbox.workspace import Workspace

CONFIG = ".claude/imagebench-mcp.json"
USER_CONFIG = ".claude.json"


@subject_kind
@dataclass(frozen=True)
class ClaudeCodeSubject(AgentCliSubject):
    """Claude Code run headless in the sandbox (see the module)."""

    cli = "claude-code"
    prefix = "claude-code"
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

    def configure(self, ws: Workspace, server: dict[str, Any], *, workdir: str) -> None:
        entry = {"type": "stdio", **server}
        write_home(ws, CONFIG, json.dumps({"mcpServers": {"imagebench": entry}}, indent=2) + "\n")
        # The same server at user scope, where `claude mcp add --scope user` puts it (``claude mcp list``,
        # its health check, reads it; the run itself takes --mcp-config alone: --strict-mcp-config).
        own = home_file(ws, USER_CONFIG)
        try:
            state = json.loads(own) if own and own.strip() else {}
        except ValueError as exc:
            raise SubjectError(f"--subject-home: its {USER_CONFIG} is not JSON ({exc})") from None
        if not isinstance(state, dict) or not isinstance(state.get("mcpServers", {}), dict):
            raise SubjectError(f"--subject-home: its {USER_CONFIG} must be a JSON object whose mcpServers is an object")
        state.setdefault("mcpServers", {})["imagebench"] = entry
        write_home(ws, USER_CONFIG, json.dumps(state, indent=2) + "\n")

    def envelope(self, stdout: str) -> Envelope:
        results = [o for o in json_objects(stdout) if o.get("type") == "result"]
        if not results:
            return Envelope(problem='stdout holds no Claude Code result object ({"type": "result", ...})')
        r = results[-1]
        usage = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        models = r.get("modelUsage") if isinstance(r.get("modelUsage"), dict) else {}
        cost = r.get("total_cost_usd")
        message = r.get("result")
        subtype = str(r.get("subtype", "success"))
        is_error = bool(r.get("is_error")) or subtype != "success"
        error = None
        if is_error:  # the CLI's own words (an error result's text is the CLI's, not the model's)
            status = r.get("api_error_status")
            said = message if r.get("is_error") and isinstance(message, str) else subtype
            error = text(f"{said} (API status {status})" if whole(status) else said)
        return Envelope(
            parsed=True,
            final_message=message if isinstance(message, str) else None,
            is_error=is_error,
            error=error,
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
        return matching(INFRA_PATTERNS, last_lines(stderr)) if exit_code != 0 else None
