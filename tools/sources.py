"""Where the authoring scripts under ``tools/`` find their registry packages' pixels.

Three sources, each pinned by version so a re-run writes the same bytes:

- the stardist wheel from PyPI (``pip download --no-deps``; nothing is installed): DSB 2018
  nuclei in 2D and a 3D nuclei volume, each with its annotation;
- scikit-image's bundled images (``skimage/data/*.png``), read from the installed package;
- nibabel's test volumes (``nibabel/tests/data/*.nii*``), read from the installed package.

The stardist wheel is kept in ``$IMAGEBENCH_WHEELS`` (default: the user cache,
``~/.cache/imagebench/wheels``, filled by ``make setup``), so ``tests/test_authoring.py`` re-runs
every script without a network. It holds annotations, so it lies outside every Python
environment a sandboxed subject is shown, and the sandbox hides it anyway
(:mod:`imagebench.fixtures.registry`), as it hides the scikit-image and nibabel data files.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "src" / "imagebench" / "data" / "fixtures"  # the tree shipped in the package
STARDIST_VERSION = "0.9.2"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wheels_dir() -> Path:
    from imagebench.fixtures.registry import wheels_dir as where

    return where()


def stardist_wheel(version: str = STARDIST_VERSION, *, download: bool = True) -> Path:
    """The pinned stardist wheel, downloaded into :func:`wheels_dir` the first time."""
    folder = wheels_dir()
    found = sorted(folder.glob(f"stardist-{version}-*.whl"))
    if found:
        return found[0]
    if not download:
        raise FileNotFoundError(f"no stardist-{version} wheel in {folder} (run `make setup` or set $IMAGEBENCH_WHEELS)")
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


def stardist_members(members: dict[str, str], wheel: Path | None = None) -> dict[str, bytes]:
    """``{key: bytes}`` of the wheel's ``members`` (``{key: member path}``): ``wheel`` or the pinned one."""
    wheel = wheel if wheel is not None else stardist_wheel()
    return {key: wheel_member(wheel, member) for key, member in members.items()}


def author_parser(doc: str | None, *, wheel: bool = False) -> argparse.ArgumentParser:
    """The arguments every authoring script takes: ``--out`` (and ``--wheel`` for stardist's)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"fixture tree root (default {DEFAULT_OUT})")
    if wheel:
        parser.add_argument(
            "--wheel", type=Path, default=None, help="use this stardist wheel instead of the pinned one"
        )
    return parser


def save_npy(path: Path, array: object) -> None:
    """``array`` as a C-ordered ``.npy`` (a 0-d array stays 0-d); the same bytes on every run."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    arr = np.asarray(array)
    with open(path, "wb") as fh:
        np.save(fh, np.ascontiguousarray(arr) if arr.ndim else arr, allow_pickle=False)


def copy_case(
    out: Path,
    skill: str,
    case_id: str,
    raw: dict[str, bytes],
    names: dict[str, str],
    *,
    about: str,
    provenance: str,
    citation: str,
    data: tuple[str, ...] = ("image",),
    truth: tuple[str, ...] = ("labels",),
) -> None:
    """A case whose files are registry members copied byte for byte: ``raw[key]`` is written as
    ``names[key]``, each file holding the one array named by its key; ``data`` and ``truth`` name
    the keys on each side of the partition."""
    from imagebench.fixtures import tree

    folder = out / skill / case_id
    folder.mkdir(parents=True, exist_ok=True)
    for key, name in names.items():
        (folder / name).write_bytes(raw[key])
    tree.write_case_layout(
        out, skill, case_id, about=about, data={k: names[k] for k in data}, truth={k: names[k] for k in truth}
    )
    tree.write_manifest_entry(
        out, skill, case_id, provenance=provenance, citation=citation, files={names[k]: [k] for k in names}
    )


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
