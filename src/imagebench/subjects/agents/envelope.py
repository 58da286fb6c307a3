"""What an agent CLI's own output said: its final message, its error, its usage (``agent.json``).

Each CLI prints a documented envelope (Claude Code's ``--output-format json`` result object, Codex's
``exec --json`` JSON lines, Gemini CLI's ``--output-format json`` object); its kind parses it into an
:class:`Envelope`. The harness keeps the parsed envelope as ``agent.json`` in the sample folder
(:class:`AgentRecord`, ``imagebench schema agent``). Usage is recorded as the agent *reported* it;
summing, pricing and budgets are not this module's.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from imagebench.records import Record

AGENT_RECORD = "agent.json"
AGENT_SCHEMA_VERSION = 1


class AgentUsage(Record):
    """The usage an agent's envelope reported (``source: reported``: never measured by the harness)."""

    source: Literal["reported"] = "reported"
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    turns: int | None = None
    tool_calls: int | None = None
    cost_usd: float | None = None


class Envelope(Record):
    """One CLI run's envelope, parsed: ``parsed`` False when stdout held none (``problem`` says why)."""

    parsed: bool = False
    problem: str | None = None
    final_message: str | None = None
    is_error: bool = False
    error: str | None = None
    session_id: str | None = None
    usage: AgentUsage = Field(default_factory=AgentUsage)
    # a tool call or command of the agent's was still running where the output ends (the CLI was
    # waiting on it, not on its model): a time-out then is the agent's, whatever error came before
    busy: bool = False


class AgentLog(Record):
    """One log file of the agent's, copied from its private HOME into the sample folder."""

    home_path: str  # where it lay, relative to the private HOME
    kept_as: str | None = None  # its name in the sample folder (None: left out, see ``why``)
    bytes: int = 0
    why: str | None = None


class AgentAttempt(Record):
    """One run of the CLI in a sample: its exit code, its envelope, and the infrastructure failure it reported."""

    exit_code: int | None = None
    envelope: Envelope = Field(default_factory=Envelope)
    infra_error: str | None = None


class AgentRecord(Record):
    """``agent.json``: the agent CLI that worked a sample, each attempt (a retry after an
    infrastructure failure is another), and the log files kept."""

    schema_version: Literal[1] = AGENT_SCHEMA_VERSION
    cli: str
    program: str
    model: str | None = None
    home_template: bool = False
    attempts: list[AgentAttempt] = Field(default_factory=list)
    logs: list[AgentLog] = Field(default_factory=list)


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` that is a JSON object, in order (a JSON-lines stream, or one object
    printed on one line); the whole text when it is one object over several lines; else each object
    that starts a line and runs over several."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            whole = json.loads(stripped)
        except ValueError:
            whole = None
        if isinstance(whole, dict):
            return [whole]
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    if not out:  # one object printed over several lines after other text (Gemini CLI's error on stderr)
        decoder = json.JSONDecoder()
        at = 0
        while (start := text.find("{", at)) != -1:
            if start and text[start - 1] != "\n":
                at = start + 1
                continue
            try:
                value, end = decoder.raw_decode(text, start)
            except ValueError:
                at = start + 1
                continue
            if isinstance(value, dict):
                out.append(value)
            at = end
    return out


def whole(value: Any) -> int | None:
    """``value`` when it is a whole number (never a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def text(value: Any, cap: int = 4000) -> str | None:
    """``value`` as a short string (an error's message), or None."""
    if value is None:
        return None
    s = value if isinstance(value, str) else json.dumps(value, default=str)
    return s[:cap]
