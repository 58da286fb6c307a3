"""The one error a tool raises: a call the session refuses, returned to the agent as a tool error."""

from __future__ import annotations


class ToolError(Exception):
    """A tool call the session refuses: the message says what was wrong and what is expected."""
