"""What one sample's subject spent, as its summary records it (``usage``), and its budget.

The harness's own measure (the turn's wall time; the MCP tool calls it dispatched for a subject
that worked in a process of its own or over its channels) is merged with the subject's account
under ``session.notes["usage"]`` (:data:`imagebench.usage.USAGE_NOTE`). That account is kept as
``reported`` unless the subject's kind is one whose turn is an agent loop the harness drives and
counts (``SubjectKind.measures_usage``): an in-process subject that writes a ``measured`` figure
into its own session cannot make it the harness's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from imagebench.usage import USAGE_NOTE, Usage, measured_usage, merge_usage

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.subjects import SubjectRun

#: how a subject ran when the MCP calls in its session notes are the harness's count (as
#: imagebench.runs.runner.OBSERVING: a process of its own, or only the harness's channels)
COUNTED = frozenset({"bubblewrap", "none"})
#: the flag of a sample whose subject left something under the usage note that is not a Usage
UNREADABLE_USAGE_FLAG = "usage-unreadable"


def as_reported(usage: Usage) -> Usage:
    """``usage`` with every figure relabelled ``reported`` (what the subject said, not a measure)."""
    values: dict[str, Any] = {}
    for name in Usage.model_fields:
        figure = getattr(usage, name)
        if figure is not None:
            values[name] = figure.model_copy(update={"source": "reported", "reported": None})
    return Usage(**values)


def sample_usage(
    session: Session | None, run: SubjectRun | None, *, confinement: str | None, measures: bool
) -> tuple[Usage | None, list[str]]:
    """The usage a sample's summary records, and the flags it adds (``usage-unreadable``)."""
    if session is None or run is None:
        return None, []
    flags: list[str] = []
    noted = session.notes.get(USAGE_NOTE)
    account: Usage | None = None
    if isinstance(noted, Usage):
        account = noted if measures else as_reported(noted)
    elif noted is not None:
        flags.append(UNREADABLE_USAGE_FLAG)
    mcp = session.notes.get("mcp")
    calls = mcp.get("calls") if isinstance(mcp, dict) and confinement in COUNTED else None
    counted = measured_usage(
        wall_s=run.seconds,
        tool_calls=calls if isinstance(calls, int) and not isinstance(calls, bool) and calls >= 0 else None,
    )
    return merge_usage(account, counted), flags
