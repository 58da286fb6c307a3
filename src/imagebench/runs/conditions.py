"""The conditions a run's subject ran under: ``run.json`` ``extra["execution"]``, what C4 of
``imagebench compare`` checks (:mod:`imagebench.suite.compare`), each a name ``--allow-conditions``
takes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``run.json`` ``extra`` key of the conditions the subject ran under (:func:`execution_record`).
EXECUTION_KEY = "execution"
#: The execution conditions C4 checks, in the order a comparison names them.
EXECUTION_CONDITIONS: tuple[str, ...] = (
    "sandbox", "network", "limits", "env_pass", "isolate", "mcp", "tool_env", "access", "sealing", "harness",
)  # fmt: skip


def execution_record(subject: object, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The conditions a run's subject ran under, each a name ``compare --allow-conditions`` takes:
    ``sandbox``, ``network``, ``limits``, ``env_pass``, ``isolate``, ``mcp``, ``tool_env``, ``access``
    (the access setting and its enforcement; :func:`imagebench.subjects.execution_of`), ``sealing`` (:func:`imagebench.runs.sealed.sealing_of`)
    and ``harness`` (the imagebench version and the digest of its source tree that ran it)."""
    from imagebench.runs.receipt import source_tree_hash
    from imagebench.runs.sealed import sealing_of
    from imagebench.scoring.manifest import package_version
    from imagebench.subjects import execution_of

    try:
        tree = "sha256:" + source_tree_hash()
    except Exception as exc:  # recorded as unknown: two such runs still differ from a known one
        tree = f"unknown ({type(exc).__name__})"
    harness = {"version": package_version(), "source_tree": tree}
    return {**execution_of(subject), "sealing": sealing_of(extra), "harness": harness}


__all__ = ["EXECUTION_CONDITIONS", "EXECUTION_KEY", "execution_record"]
