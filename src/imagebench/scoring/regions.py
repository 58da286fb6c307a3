"""Packed regions: a boolean mask as ``{"shape": [...], "packed": <base64 of np.packbits>}``.

The gold of ``voxel_member_of_set`` is such a region (the mask is its tolerance); a task file
carries it as text, so the bits are packed in C order, most significant bit first.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from imagebench.scoring.values import plain, short


def pack_region(mask: Any) -> dict[str, Any]:
    """A boolean mask as a packed region: ``{"shape": [...], "packed": <base64 of np.packbits>}``.

    Bits are packed in C order, most significant bit first (numpy's default ``bitorder="big"``).
    """
    arr = np.asarray(mask)
    if arr.dtype != bool:
        raise ValueError(f"a region mask is boolean, got dtype {arr.dtype}")
    if arr.ndim < 1:
        raise ValueError("a region mask has at least one dimension")
    packed = np.packbits(arr.ravel(order="C"))
    return {"shape": [int(s) for s in arr.shape], "packed": base64.b64encode(packed.tobytes()).decode("ascii")}


def unpack_region(region: Any) -> np.ndarray:
    """The boolean mask of a packed region (see :func:`pack_region`). ``packed`` may be base64
    text, bytes, a uint8 array or a list of byte values. Raises ValueError when malformed."""
    if not isinstance(region, Mapping) or set(region) != {"shape", "packed"}:
        raise ValueError("a packed region is an object with exactly 'shape' and 'packed'")
    shape = plain(region["shape"])
    if (
        not isinstance(shape, list)
        or not shape
        or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)
    ):
        raise ValueError(f"the region's shape {short(shape)} is not a list of positive integers")
    packed = region["packed"]
    if isinstance(packed, str):
        try:
            raw = np.frombuffer(base64.b64decode(packed.encode("ascii"), validate=True), dtype=np.uint8)
        except (ValueError, UnicodeEncodeError) as exc:
            raise ValueError(f"the region's packed bits are not base64: {exc}") from None
    elif isinstance(packed, (bytes, bytearray)):
        raw = np.frombuffer(bytes(packed), dtype=np.uint8)
    elif isinstance(packed, np.ndarray):
        if packed.dtype != np.uint8 or packed.ndim != 1:
            raise ValueError(
                f"the region's packed bits are a {packed.dtype} array of {packed.ndim} dims, expected 1-D uint8"
            )
        raw = packed
    elif isinstance(packed, list) and all(
        isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in packed
    ):
        raw = np.asarray(packed, dtype=np.uint8)
    else:
        raise ValueError("the region's packed bits are neither base64 text, bytes, a uint8 array nor byte values")
    size = math.prod(shape)
    if raw.size != (size + 7) // 8:
        raise ValueError(f"the region holds {raw.size} packed bytes; shape {shape} needs {(size + 7) // 8}")
    return np.unpackbits(raw, count=size).astype(bool).reshape(shape)
