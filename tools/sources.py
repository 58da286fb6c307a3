"""Where the authoring scripts under ``tools/`` find their registry packages' pixels.

Three sources, each pinned by version so a re-run writes the same bytes:

- the stardist wheel from PyPI (``pip download --no-deps``; nothing is installed): DSB 2018
  nuclei in 2D and a 3D nuclei volume, each with its annotation;
- scikit-image's bundled images (``skimage/data/*.png``), read from the installed package;
- nibabel's test volumes (``nibabel/tests/data/*.nii*``), read from the installed package.

The stardist wheel is kept in ``$IMAGEBENCH_WHEELS`` (default: ``<venv>/share/imagebench-wheels``,
filled by ``make setup``), so ``tests/test_authoring.py`` re-runs every script without a network.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

STARDIST_VERSION = "0.9.2"
WHEELS_ENV = "IMAGEBENCH_WHEELS"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wheels_dir() -> Path:
    env = os.environ.get(WHEELS_ENV)
    return Path(env) if env else Path(sys.prefix) / "share" / "imagebench-wheels"


def stardist_wheel(version: str = STARDIST_VERSION, *, download: bool = True) -> Path:
    """The pinned stardist wheel, downloaded into :func:`wheels_dir` the first time."""
    folder = wheels_dir()
    found = sorted(folder.glob(f"stardist-{version}-*.whl"))
    if found:
        return found[0]
    if not download:
        raise FileNotFoundError(f"no stardist-{version} wheel in {folder} (run `make setup` or set ${WHEELS_ENV})")
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "download", f"stardist=={version}", "--no-deps",
        "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", str(folder),
    ]  # fmt: skip
    print("sources: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    found = sorted(folder.glob(f"stardist-{version}-*.whl"))
    if not found:
        raise SystemExit(f"sources: pip download left no stardist-{version} wheel in {folder}")
    return found[0]


def wheel_member(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        if member not in zf.namelist():
            held = sorted(n for n in zf.namelist() if n.startswith("stardist/data/"))
            raise SystemExit(f"sources: {wheel.name} has no {member} (stardist/data/ holds {held})")
        return zf.read(member)


def skimage_image(name: str) -> tuple[bytes, str]:
    """The bytes of one of scikit-image's bundled images, and the package version."""
    import skimage

    path = Path(skimage.__file__).parent / "data" / name
    if not path.is_file():
        raise SystemExit(f"sources: scikit-image {skimage.__version__} bundles no {name} (looked in {path.parent})")
    return path.read_bytes(), skimage.__version__


def nibabel_volume(name: str) -> tuple[bytes, str]:
    """The bytes of one of nibabel's test volumes, and the package version."""
    import nibabel

    path = Path(nibabel.__file__).parent / "tests" / "data" / name
    if not path.is_file():
        raise SystemExit(f"sources: nibabel {nibabel.__version__} ships no {name} (looked in {path.parent})")
    return path.read_bytes(), nibabel.__version__


if __name__ == "__main__":  # `python tools/sources.py`: fetch what the authoring scripts need
    print(stardist_wheel())
