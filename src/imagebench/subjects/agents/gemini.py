"""``gemini-cli[:MODEL]``: Google's Gemini CLI, headless (``gemini -p``), served the case's MCP tools.

Command line (Gemini CLI's headless reference: ``-p``, ``--output-format json``; ``--yolo``
approves its tools without asking; ``-m``)::

    gemini -p "$(cat agent-prompt.md)" --output-format json --yolo [-m MODEL]

The MCP server is an ``mcpServers.imagebench`` entry (``trust: true``) of ``~/.gemini/settings.json``
in the private HOME (merged into a template's own settings), and the workspace trusted in
``~/.gemini/trustedFolders.json`` (an untrusted folder disables user-level MCP servers and ``--yolo``).
The JSON output is one object:
``response`` (the final message), ``stats`` (per-model ``tokens``, ``tools.totalCalls``) and, when
the request failed, ``error`` (``type``, ``message``, ``code``). Exit codes: 0 success, 1 a
general or API error, 41 authentication, 42 bad input, 53 the turn limit (44, 52, 54, 55: sandbox,
config, tool, untrusted folder). Its logs are ``~/.gemini/tmp/**``.
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

CONFIG = ".gemini/settings.json"
TRUSTED = ".gemini/trustedFolders.json"
#: Gemini CLI's exit codes (its headless reference: 1 an API error, 42 bad input, 53 the turn limit;
#: its FatalError classes add 41 authentication, 44 sandbox, 52 config, 54 a tool, 55 an untrusted folder)
AUTH_EXIT = 41
_NOT_INFRA = (42, 44, 52, 53, 54, 55)


@subject_kind
@dataclass(frozen=True)
class GeminiCliSubject(AgentCliSubject):
    """Gemini CLI run headless in the sandbox (see the module)."""

    cli = "gemini-cli"
    prefix = "gemini-cli"
    program = "gemini"
    api_keys = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    log_folders = (".gemini/tmp",)
    forms = (
        ("gemini-cli[:MODEL]", "Gemini CLI headless (gemini -p ... --output-format json), served the case's MCP tools"),
    )

    def argv(self, prompt: str, home: str) -> list[str]:
        words = ["-p", prompt, "--output-format", "json", "--yolo"]
        return words + (["-m", self.model] if self.model else [])

    def configure(self, ws: Workspace, server: dict[str, Any], *, workdir: str) -> None:
        own = home_file(ws, CONFIG)
        try:
            settings = json.loads(own) if own and own.strip() else {}
        except ValueError as exc:
            raise SubjectError(f"--subject-home: its {CONFIG} is not JSON ({exc})") from None
        if not isinstance(settings, dict) or not isinstance(settings.get("mcpServers", {}), dict):
            raise SubjectError(f"--subject-home: its {CONFIG} must be a JSON object whose mcpServers is an object")
        settings.setdefault("mcpServers", {})["imagebench"] = {**server, "trust": True}
        write_home(ws, CONFIG, json.dumps(settings, indent=2) + "\n")
        # Its working folder trusted (an untrusted one disables user-level MCP servers and --yolo).
        own = home_file(ws, TRUSTED)
        try:
            trusted = json.loads(own) if own and own.strip() else {}
        except ValueError as exc:
            raise SubjectError(f"--subject-home: its {TRUSTED} is not JSON ({exc})") from None
        if not isinstance(trusted, dict):
            raise SubjectError(f"--subject-home: its {TRUSTED} must be a JSON object")
        trusted[workdir] = "TRUST_FOLDER"
        write_home(ws, TRUSTED, json.dumps(trusted, indent=2) + "\n")

    def envelope(self, stdout: str) -> Envelope:
        found = [o for o in json_objects(stdout) if "response" in o or "error" in o or "stats" in o]
        if not found:
            return Envelope(problem='stdout holds no Gemini CLI JSON output ({"response": ..., "stats": ...})')
        o = found[-1]
        stats = o.get("stats") if isinstance(o.get("stats"), dict) else {}
        models = stats.get("models") if isinstance(stats.get("models"), dict) else {}
        inp = out = cached = 0
        for per in models.values():
            tokens = per.get("tokens") if isinstance(per, dict) and isinstance(per.get("tokens"), dict) else {}
            inp += whole(tokens.get("prompt")) or 0
            out += whole(tokens.get("candidates")) or 0
            cached += whole(tokens.get("cached")) or 0
        tools = stats.get("tools") if isinstance(stats.get("tools"), dict) else {}
        err = o.get("error")
        error = None
        if err is not None:
            error = (
                text(err)
                if not isinstance(err, dict)
                else text(f"{err.get('type', '')} {err.get('code', '')} {err.get('message', '')}".strip())
            )
        response = o.get("response")
        return Envelope(
            parsed=True,
            final_message=response if isinstance(response, str) else None,
            is_error=err is not None,
            error=error,
            usage=AgentUsage(
                model=next(iter(models), None) or self.model,
                input_tokens=inp if models else None,
                output_tokens=out if models else None,
                cached_input_tokens=cached if models else None,
                tool_calls=whole(tools.get("totalCalls")),
            ),
        )

    def infra(self, envelope: Envelope, exit_code: int, stderr: str) -> str | None:
        if exit_code in _NOT_INFRA:
            return None
        if exit_code == AUTH_EXIT:  # FatalAuthenticationError: no key, or one refused
            return f"authentication: {envelope.error or last_lines(stderr, 1) or 'exit 41'}"
        if envelope.parsed:
            if not envelope.is_error:
                return None
            return matching(INFRA_PATTERNS, envelope.error)
        return matching(INFRA_PATTERNS, last_lines(stderr)) if exit_code != 0 else None
