"""``codex[:MODEL]``: OpenAI's Codex CLI, headless (``codex exec --json``), served the case's MCP tools.

Command line (Codex's ``exec`` reference: ``--json`` JSON-lines events, ``--skip-git-repo-check``
outside a repository, ``--dangerously-bypass-approvals-and-sandbox`` for a run inside an outer
sandbox, ``-m``)::

    codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \\
        [-m MODEL] "$(cat agent-prompt.md)"

The MCP server is a ``[mcp_servers.imagebench]`` table of ``~/.codex/config.toml`` in the private
HOME (appended to a template's own config.toml). The events are ``thread.started``,
``turn.started``, ``item.completed`` (an ``agent_message`` item's ``text`` is a message),
``turn.completed`` (``usage``), ``turn.failed`` and ``error``. Its session logs are
``~/.codex/sessions/**``.
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

CONFIG = ".codex/config.toml"
_TOOL_ITEMS = ("mcp_tool_call", "command_execution", "function_call")


@subject_kind
@dataclass(frozen=True)
class CodexSubject(AgentCliSubject):
    """Codex CLI run headless in the sandbox (see the module)."""

    cli = "codex"
    prefix = "codex"
    program = "codex"
    api_keys = ("OPENAI_API_KEY", "CODEX_API_KEY")
    log_folders = (".codex/sessions", ".codex/log")
    forms = (("codex[:MODEL]", "Codex CLI headless (codex exec --json ...), served the case's MCP tools"),)

    def argv(self, prompt: str, home: str) -> list[str]:
        words = ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        return words + (["-m", self.model] if self.model else []) + [prompt]

    def configure(self, ws: Workspace, server: dict[str, Any], *, workdir: str) -> None:
        own = home_file(ws, CONFIG) or ""
        if "[mcp_servers.imagebench]" in own:
            raise SubjectError(
                f"--subject-home: its {CONFIG} already defines [mcp_servers.imagebench]; drop that table"
            )
        table = "[mcp_servers.imagebench]\n"
        table += f"command = {json.dumps(server['command'])}\nargs = {json.dumps(server.get('args', []))}\n"
        write_home(ws, CONFIG, (own.rstrip("\n") + "\n\n" if own.strip() else "") + table)

    def envelope(self, stdout: str) -> Envelope:
        events = [e for e in json_objects(stdout) if isinstance(e.get("type"), str)]
        if not any(e["type"].startswith(("thread.", "turn.", "item.")) or e["type"] == "error" for e in events):
            return Envelope(problem="stdout holds no codex exec --json events")
        message: str | None = None
        inp = out = cached = 0
        turns = tools = 0
        error: str | None = None
        failed = completed = False
        thread = None
        running: set[str] = set()  # the agent's commands and tool calls started and not completed
        for e in events:
            kind = e["type"]
            item_ = e.get("item") if isinstance(e.get("item"), dict) else {}
            if (
                kind in ("item.started", "item.completed")
                and (item_.get("type") or item_.get("item_type")) in _TOOL_ITEMS
            ):
                key = str(item_.get("id"))
                if kind == "item.started":
                    running.add(key)
                else:
                    running.discard(key)
            if kind == "thread.started":
                thread = text(e.get("thread_id"), 200)
            elif kind == "item.completed" and isinstance(e.get("item"), dict):
                item = e["item"]
                itype = item.get("type") or item.get("item_type")
                if itype in ("agent_message", "assistant_message") and isinstance(item.get("text"), str):
                    message = item["text"]
                elif itype in _TOOL_ITEMS:
                    tools += 1
            elif kind == "turn.completed":
                # the turn ended well: the reconnects its stream reported before (``error`` events:
                # "Reconnecting... 1/5") were overcome, so its answer is scored, never excused
                completed, failed = True, False
                turns += 1
                usage = e.get("usage") if isinstance(e.get("usage"), dict) else {}
                inp += whole(usage.get("input_tokens")) or 0
                out += whole(usage.get("output_tokens")) or 0
                cached += whole(usage.get("cached_input_tokens")) or 0
            elif kind == "turn.failed":
                failed = failed or not completed  # once a turn completed, the agent answered: scored
                err = e.get("error")
                error = text(err.get("message") if isinstance(err, dict) else err)
            elif kind == "error":
                failed = failed or not completed
                error = text(e.get("message"))
        return Envelope(
            parsed=True,
            final_message=message,
            is_error=failed,
            error=error,
            session_id=thread,
            busy=bool(running),
            usage=AgentUsage(
                model=self.model,
                input_tokens=inp if completed else None,
                output_tokens=out if completed else None,
                cached_input_tokens=cached if completed else None,
                turns=turns,
                tool_calls=tools,
            ),
        )

    def infra(self, envelope: Envelope, exit_code: int, stderr: str) -> str | None:
        if envelope.parsed:
            return matching(INFRA_PATTERNS, envelope.error) if envelope.is_error else None
        return matching(INFRA_PATTERNS, last_lines(stderr)) if exit_code != 0 else None
