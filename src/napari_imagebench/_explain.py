"""A scored sample explained for a person: the panel's name for :mod:`imagebench.runs.explain`.

The derivation lives in the core, once: ``report.html``, ``imagebench run``'s results table and
the results pane read the same per-field reasons, per-probe errors, matching and legend from a
sample's ``summary.json``. This module only keeps the panel's imports where they were.
"""

from __future__ import annotations

from imagebench.runs.explain import (
    FOLD_OVER,
    PLAIN_MAX,
    PROBE_METRIC,
    STRUCTURED_METRIC,
    Explanation,
    Reason,
    explain,
    field_reasons,
    plain,
    probe_reasons,
    sample_number,
)

__all__ = [
    "FOLD_OVER",
    "PLAIN_MAX",
    "PROBE_METRIC",
    "STRUCTURED_METRIC",
    "Explanation",
    "Reason",
    "explain",
    "field_reasons",
    "plain",
    "probe_reasons",
    "sample_number",
]
