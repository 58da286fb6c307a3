"""Agent CLIs as subjects: Claude Code (``claude-code``), Codex CLI (``codex``), Gemini CLI
(``gemini-cli``) and any other CLI that follows the generic interface (``agent-cli:``).

:mod:`.base` is what they share (a ``command:`` subject whose command line its kind builds, served
the case's MCP tools, with a private HOME, its envelope parsed, infrastructure failures told
apart, its logs kept); :mod:`.home` the private HOME; :mod:`.envelope` what the CLI's own output
said (``agent.json``); one module a kind: :mod:`.claude`, :mod:`.codex`, :mod:`.gemini`,
:mod:`.generic` (docs/agents.md, "Agent CLI subjects").
"""
