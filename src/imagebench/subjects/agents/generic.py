"""``agent-cli:<shell command>``: any agent CLI that follows the generic interface, served the case's MCP tools.

The interface (docs/agents.md, "agent-cli"):

- the command runs with bash in the workspace, its prompt in ``agent-prompt.md`` (and ``prompt.md``);
- the MCP configuration, ``{"mcpServers": {"imagebench": ...}}``, is ``mcp.json`` in the workspace
  and ``$HOME/.config/imagebench/mcp.json`` in its private HOME (``$IMAGEBENCH_MCP_CONFIG`` names it);
- its final message is its stdout's, or the ``result`` (or ``response``) string of the last JSON
  object stdout prints on one line, with optional ``is_error``, ``error`` and ``usage``
  (``input_tokens``, ``output_tokens``, ``model``);
- exit code 75 (``EX_TEMPFAIL``, sysexits.h) says its infrastructure failed; the last line of its
  stderr says how. No other exit is ever an infrastructure failure;
- its logs are kept from ``$HOME/logs/``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imagebench.sandbox.policy import WORKSPACE, SandboxPolicy
from imagebench.subjects.agents.base import AgentCliSubject
from imagebench.subjects.agents.envelope import AgentUsage, Envelope, json_objects, text, whole
from imagebench.subjects.agents.home import HOME, write_home
from imagebench.subjects.base import AgentOptions, SubjectError
from imagebench.subjects.registry import subject_kind

if TYPE_CHECKING:
    from imagebench.sandbox.workspace import Workspace

CONFIG = ".config/imagebench/mcp.json"
MCP_CONFIG_ENV = "IMAGEBENCH_MCP_CONFIG"
EX_TEMPFAIL = 75


@subject_kind
@dataclass(frozen=True)
class GenericAgentSubject(AgentCliSubject):
    """An agent CLI of the generic interface (see the module): the command line is the user's."""

    cli = "agent-cli"
    prefix = "agent-cli:"
    program = ""
    log_folders = ("logs",)
    forms = (
        ("agent-cli:<shell command>", "any agent CLI of the generic interface (docs/agents.md), served MCP tools"),
    )

    agent_command: str = ""

    @classmethod
    def matches(cls, spec: str) -> bool:
        return spec.startswith("agent-cli:")

    @classmethod
    def parse(  # type: ignore[override]
        cls, spec: str, *, sandbox: SandboxPolicy | None, isolate: bool, mcp: bool, agent: AgentOptions | None = None
    ) -> GenericAgentSubject:
        command = spec[len("agent-cli:") :].strip()
        if not command:
            raise SubjectError(f"subject {spec!r}: the command is empty; expected agent-cli:<shell command>")
        agent = agent or AgentOptions()
        if agent.home is not None:
            from imagebench.sandbox.policy import harness_paths
            from imagebench.subjects.agents.home import check_template

            agent = AgentOptions(retries=agent.retries, home=check_template(agent.home, secret=harness_paths()))
        subject = cls(command=command, agent_command=command, sandbox=sandbox or SandboxPolicy(), mcp=True, agent=agent)
        subject.check_sandbox()
        return subject

    def spec(self) -> str:
        return f"agent-cli:{self.agent_command}"

    @property
    def name(self) -> str:
        if self.given_name is not None:
            return self.given_name
        return f"agent-cli-{hashlib.sha256(self.agent_command.encode('utf-8')).hexdigest()[:8]}"

    @classmethod
    def describe_spec(cls, spec: str) -> dict[str, Any]:
        from imagebench.subjects.command import _program_name

        command = spec[len("agent-cli:") :].strip()
        return {
            "form": "agent-cli",
            "program": _program_name(command),
            "command_sha256": hashlib.sha256(command.encode("utf-8")).hexdigest(),
        }

    def identity_parts(self) -> dict[str, Any]:
        from imagebench.subjects.identity import code_tree, expose_code

        return {
            "kind": "agent-cli",
            "command_sha256": hashlib.sha256(self.agent_command.encode("utf-8")).hexdigest(),
            "expose": expose_code(self.sandbox.expose),
            "home": code_tree(self.agent.home, role="--subject-home") if self.agent.home is not None else None,
        }

    def argv(self, prompt: str, home: str) -> list[str]:
        raise SubjectError("agent-cli: the command line is the user's")

    def configure(self, ws: Workspace, server: dict[str, Any], *, workdir: str) -> None:
        write_home(ws, CONFIG, json.dumps({"mcpServers": {"imagebench": server}}, indent=2) + "\n")

    def environment(self, sandboxed: bool, root: str) -> dict[str, str]:
        where = f"{WORKSPACE}/{HOME}" if sandboxed else f"{root}/{HOME}"
        return {MCP_CONFIG_ENV: f"{where}/{CONFIG}"}

    def envelope(self, stdout: str) -> Envelope:
        found = [o for o in json_objects(stdout) if isinstance(o.get("result", o.get("response")), str)]
        if not found:
            return Envelope(
                problem="stdout holds no JSON object with a result or response string: stdout is the final message"
            )
        o = found[-1]
        usage = o.get("usage") if isinstance(o.get("usage"), dict) else {}
        return Envelope(
            parsed=True,
            final_message=o.get("result", o.get("response")),
            is_error=bool(o.get("is_error")),
            error=text(o.get("error")),
            usage=AgentUsage(
                model=text(usage.get("model"), 200),
                input_tokens=whole(usage.get("input_tokens")),
                output_tokens=whole(usage.get("output_tokens")),
            ),
        )

    def infra(self, envelope: Envelope, exit_code: int, stderr: str) -> str | None:
        if exit_code != EX_TEMPFAIL:
            return None
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        return f"exit {EX_TEMPFAIL} (EX_TEMPFAIL): {lines[-1][:300] if lines else 'no reason on stderr'}"
