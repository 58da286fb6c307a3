"""The registry data curated fixtures are authored from, and where it lies on this machine.

A curated fixture made from a registry package (``tools/author_*.py``) keeps a copy of its
source's pixels, and often its truth, somewhere a subject could look: the stardist wheel holds
the DSB 2018 and 3D annotations themselves; scikit-image's bundled images and nibabel's test
volumes are the untouched originals that a drift, a warp, a vignetting field or re-placed slices
were applied to. The sandbox hides all of it (:func:`source_paths`, used by
:func:`imagebench.sandbox.harness_paths`); the authoring scripts keep the wheel in
:func:`wheels_dir`, which is outside every Python environment a subject is shown.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

WHEELS_ENV = "IMAGEBENCH_WHEELS"
# (package, folder inside it) whose data files fixtures are authored from; their code stays visible.
PACKAGE_DATA: tuple[tuple[str, str], ...] = (("skimage", "data"), ("nibabel", "tests/data"))
_CODE_SUFFIXES = (".py", ".pyi", ".pyc")


def wheels_dir() -> Path:
    """Where downloaded source wheels are kept: ``$IMAGEBENCH_WHEELS``, else the user cache
    (``$XDG_CACHE_HOME/imagebench/wheels`` or ``~/.cache/imagebench/wheels``)."""
    env = os.environ.get(WHEELS_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "imagebench" / "wheels"


def package_data_dir(package: str, folder: str) -> Path | None:
    """``folder`` inside the installed ``package`` (found without importing it), or None."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(loc) / folder
        if path.is_dir():
            return path
    return None


def source_paths() -> list[str]:
    """Every path holding registry data a curated fixture was made from: the wheels folder, and
    each data file (not the code) of the :data:`PACKAGE_DATA` folders."""
    found = [os.path.realpath(wheels_dir())]
    for package, folder in PACKAGE_DATA:
        root = package_data_dir(package, folder)
        if root is None:
            continue
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if entry.name == "__pycache__" or entry.name.endswith(_CODE_SUFFIXES):
                continue
            found.append(os.path.realpath(entry.path))
    return found
