"""imagebench: the headless core of napari-imagebench.

The public vocabulary is importable from here; submodules load on first use so that
``import imagebench`` stays light (no Qt, napari, vispy, dask, pyarrow or tifffile).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ``__version__`` is the installed distribution's (pyproject.toml is the one place it is written);
# resolved on first use, see __getattr__.
_DISTRIBUTION = "napari-imagebench"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # fixture vocabulary
    "Fixture": "imagebench.fixture",
    "Attempt": "imagebench.fixture",
    "Metric": "imagebench.fixture",
    "Outcome": "imagebench.fixture",
    "FixtureSpec": "imagebench.specs",
    "FixtureError": "imagebench.fixture",
    "Procedural": "imagebench.specs",
    "OnDisk": "imagebench.specs",
    "read_array": "imagebench.fixture",
    "read_scalar": "imagebench.fixture",
    # handles
    "ArrayRef": "imagebench.refs",
    "NpzRef": "imagebench.refs",
    "FileRef": "imagebench.refs",
    "ref_missing": "imagebench.refs",
    # artifacts
    "write_report": "imagebench.artifacts",
    "save_png": "imagebench.artifacts",
    "shared_range": "imagebench.artifacts",
    "artifact_root": "imagebench.artifacts",
    # cases and sessions
    "Case": "imagebench.case",
    "Layer": "imagebench.case",
    "Collect": "imagebench.case",
    "Skill": "imagebench.case",
    "Session": "imagebench.session",
    "open_session": "imagebench.session",
    "collect_attempt": "imagebench.session",
    # subjects and running
    "parse_subject": "imagebench.subjects",
    "run_cases": "imagebench.executor",
    "run_unit": "imagebench.runner",
    # structured answers, scoring and receipts
    "TaskContract": "imagebench.scoring",
    "score_answer": "imagebench.scoring",
    "structured_verifier": "imagebench.scoring",
    "parse_answer": "imagebench.scoring",
    "pass_at_k": "imagebench.scoring",
    "build_receipt": "imagebench.receipt",
    "write_receipt": "imagebench.receipt",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def _version() -> str:
    """The installed version; in a checkout that is not installed, pyproject.toml's; else 0+unknown."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DISTRIBUTION)
    except PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, ValueError):
        return "0+unknown"
    return str(project.get("version", "0+unknown")) if project.get("name") == _DISTRIBUTION else "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'imagebench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # pragma: no cover
    from imagebench.artifacts import artifact_root, save_png, shared_range, write_report
    from imagebench.case import Case, Collect, Layer, Skill
    from imagebench.executor import run_cases
    from imagebench.fixture import (
        Attempt,
        Fixture,
        FixtureError,
        Metric,
        Outcome,
        read_array,
        read_scalar,
    )
    from imagebench.receipt import build_receipt, write_receipt
    from imagebench.refs import ArrayRef, FileRef, NpzRef, ref_missing
    from imagebench.runner import run_unit
    from imagebench.scoring import (
        TaskContract,
        parse_answer,
        pass_at_k,
        score_answer,
        structured_verifier,
    )
    from imagebench.session import Session, collect_attempt, open_session
    from imagebench.specs import FixtureSpec, OnDisk, Procedural
    from imagebench.subjects import parse_subject
