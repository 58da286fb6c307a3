"""Packaging: every import is declared once, the version is written once, the plugin manifest ships."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
from unittest import mock

import pytest

import imagebench

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
OWN = {"imagebench", "napari_imagebench"}


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _imports(package: str, skip: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """Top-level third-party modules imported anywhere in ``src/<package>`` (but the sub-folders ``skip``)
    -> the files importing them."""
    found: dict[str, set[str]] = {}
    for path in (SRC / package).rglob("*.py"):
        if any(path.is_relative_to(SRC / package / folder) for folder in skip):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top not in OWN and top != "__future__":
                    found.setdefault(top, set()).add(path.relative_to(SRC).as_posix())
    return found


def _declared(*extras: str) -> set[str]:
    names = {_name(r) for r in PROJECT["dependencies"]}
    for extra in extras:
        names |= {_name(r) for r in PROJECT["optional-dependencies"][extra]}
    return names


#: the core's optional parts, each with the extra that brings what it imports (the core never imports them)
OPTIONAL = {"imagebench/inspectai": ("agents",)}


@pytest.mark.parametrize(
    ("package", "extras"),
    [("imagebench", ()), ("napari_imagebench", ("napari",)), *OPTIONAL.items()],
)
def test_every_import_is_declared(package: str, extras: tuple[str, ...]) -> None:
    dists = packages_distributions()
    declared = _declared(*extras)
    skip = tuple(
        Path(p).relative_to(package).as_posix() for p in OPTIONAL if Path(p).is_relative_to(package) and p != package
    )
    missing = {}
    for module, files in sorted(_imports(package, skip).items()):
        owners = {_name(d) for d in dists.get(module, [])}
        assert owners, f"{module} (imported in {sorted(files)}) is not installed, so its distribution is unknown"
        if not owners & declared:
            missing[module] = (sorted(owners), sorted(files))
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_no_requirement_is_declared_twice() -> None:
    core = [_name(r) for r in PROJECT["dependencies"]]
    assert len(core) == len(set(core))
    for extra, requirements in PROJECT["optional-dependencies"].items():
        names = [_name(r) for r in requirements]
        assert len(names) == len(set(names)), extra
        assert not set(names) & set(core), f"extra {extra!r} repeats core dependencies {set(names) & set(core)}"


def test_the_napari_extra_pins_no_qt_binding_but_the_tests_get_one() -> None:
    bindings = {"pyqt5", "pyqt6", "pyside2", "pyside6"}
    assert not _declared("napari") & bindings
    test = PROJECT["optional-dependencies"]["test"]
    own = [r for r in test if _name(r) == "napari-imagebench"]
    assert own and "pyqt6" in own[0] and "napari" in own[0]  # Qt6, as napari recommends
    assert _name(PROJECT["optional-dependencies"]["pyqt6"][0]) == "pyqt6"
    assert _name(PROJECT["optional-dependencies"]["pyqt5"][0]) == "pyqt5"  # an extra for old set-ups
    assert "import-linter" in {_name(r) for r in test}


def test_the_version_is_written_once() -> None:
    assert "version" in PROJECT and "version" not in PROJECT.get("dynamic", [])
    init = (SRC / "imagebench" / "__init__.py").read_text(encoding="utf-8")
    assert PROJECT["version"] not in init
    assert imagebench.__version__ == PROJECT["version"]  # an installed (editable) checkout

    from importlib.metadata import PackageNotFoundError

    def not_installed(name: str) -> str:
        raise PackageNotFoundError(name)

    with mock.patch("importlib.metadata.version", not_installed):
        assert imagebench._version() == PROJECT["version"]  # read from the checkout's pyproject.toml


def test_the_plugin_manifest_is_a_real_copy_of_the_root_one() -> None:
    shipped = SRC / "napari_imagebench" / "napari.yaml"
    assert not shipped.is_symlink()  # a symlink breaks in sdists and on Windows
    assert shipped.read_bytes() == (ROOT / "napari.yaml").read_bytes()
    npe2 = pytest.importorskip("npe2")
    manifest = npe2.PluginManifest.from_file(shipped)
    assert manifest.name == PROJECT["name"]
