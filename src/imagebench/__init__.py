"""imagebench: the headless core of napari-imagebench.

The public vocabulary is importable from here; submodules load on first use so that
``import imagebench`` stays light (no Qt, napari, vispy, dask, pyarrow or tifffile).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from imagebench._lazy import declared_exports

# ``__version__`` is the installed distribution's (pyproject.toml is the one place it is written);
# resolved on first use, see __getattr__.
_DISTRIBUTION = "napari-imagebench"

# The public names are declared once, as the imports of the TYPE_CHECKING block at the end.
_EXPORTS = declared_exports(__name__, __file__)

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
    from imagebench.case.model import Case, Collect, Layer, Skill
    from imagebench.case.session import Session, collect_attempt, open_session
    from imagebench.executor import run_cases
    from imagebench.fixtures.fixture import (
        Attempt,
        Fixture,
        FixtureError,
        Metric,
        Outcome,
        read_array,
        read_scalar,
    )
    from imagebench.fixtures.refs import ArrayRef, FileRef, NpzRef, ref_missing
    from imagebench.fixtures.specs import FixtureSpec, OnDisk, Procedural
    from imagebench.runs.artifacts import save_png, shared_range, write_report
    from imagebench.runs.layout import artifact_root
    from imagebench.runs.receipt import build_receipt, write_receipt
    from imagebench.runs.runner import run_unit
    from imagebench.scoring import (
        TaskContract,
        parse_answer,
        pass_at_k,
        score_answer,
        structured_verifier,
    )
    from imagebench.subjects import parse_subject
