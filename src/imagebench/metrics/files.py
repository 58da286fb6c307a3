"""One image file (TIFF or NumPy ``.npy``) read as an array for ``imagebench metrics``, errors naming the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["InputError", "read_image_file"]

_TIFF = (".tif", ".tiff")


class InputError(ValueError):
    """A file that cannot be read as an image; the message names it."""


def read_image_file(path: str | Path) -> np.ndarray:
    """The array in ``path``: ``.npy`` by ``numpy.load`` (no pickles), ``.tif``/``.tiff`` by tifffile."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".npy", *_TIFF):
        raise InputError(
            f"{p}: expected a TIFF (.tif, .tiff) or NumPy (.npy) file, got suffix {p.suffix or '(none)'!r}"
        )
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    try:
        if suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
        else:
            import tifffile

            arr = tifffile.imread(p)
    except Exception as exc:  # any reader's failure is the file's: say which and why
        raise InputError(f"{p}: cannot be read as an image ({type(exc).__name__}: {exc})") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(f"{p}: expected one array, found {type(arr).__name__}")
    return arr
