"""The headless core stays headless and light.

``import imagebench`` (and the CLI module, and the fixture modules) must load no Qt, napari or
vispy, nor dask, pyarrow or tifffile; and no source file under ``src/imagebench`` may import
qtpy, napari or vispy at all, not even lazily inside a function.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "src" / "imagebench"
HEAVY = ("qtpy", "napari", "vispy", "PyQt5", "PyQt6", "PySide2", "PySide6", "dask", "pyarrow", "tifffile")
GUI = ("qtpy", "napari", "vispy", "PyQt5", "PyQt6", "PySide2", "PySide6", "napari_imagebench")


def _loaded_after(statement: str) -> list[str]:
    code = (
        f"import sys, json\n{statement}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "statement",
    [
        "import imagebench",
        "import imagebench.cli",
        "import imagebench.fixtures.fixture",
        "import imagebench.fixtures.refs",
        "import imagebench.fixtures.tree",
        "import imagebench.runs.artifacts",
        "from imagebench import Fixture, Metric, FileRef, NpzRef, ref_missing, write_report",
    ],
)
def test_import_loads_no_heavy_or_gui_module(statement):
    assert _loaded_after(statement) == []


def _gui_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if fname in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                names = [str(node.args[0].value)]
        for name in names:
            if name.split(".")[0] in GUI:
                found.append(f"{path.relative_to(CORE.parent)}:{node.lineno}: {name}")
    return found


def test_no_core_source_imports_qt_napari_or_vispy():
    files = sorted(CORE.rglob("*.py"))
    assert files, CORE
    offenders = [hit for f in files for hit in _gui_imports(f)]
    assert offenders == []


def test_the_source_check_would_catch_an_offender(tmp_path, monkeypatch):
    bad = tmp_path / "imagebench" / "bad.py"
    bad.parent.mkdir()
    bad.write_text(
        "def f():\n    import napari.viewer\n    from qtpy import QtWidgets\n    importlib.import_module('vispy')\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "CORE", tmp_path / "imagebench")
    assert len(_gui_imports(bad)) == 3


def test_the_supervisor_parses_run_without_numpy() -> None:
    """``imagebench run`` parses its arguments in the supervising process before the run starts
    in a child; that parse must cost no numpy (nor anything heavier)."""
    from imagebench.case.model import FIXTURE_CHOICES
    from imagebench.cli.run import FIXTURE_KINDS

    assert FIXTURE_KINDS == FIXTURE_CHOICES
    code = (
        "import sys, json\nfrom imagebench.cli import build_parser\n"
        "build_parser(['run', '--subject', 'nop']).parse_args(['run', '--subject', 'nop'])\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'pydantic', 'scipy'})))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
