"""``voxel_member_of_set``: the predicted voxel lies inside the gold's packed region; the mask is
the tolerance, so there is nothing numeric to tune.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

# Helpers are bound under the names the comparator bodies have always used: the registry hash
# pins each comparator's source text from its ``def`` line, so a body reads the same wherever
# its helpers live.
from imagebench.scoring.regions import pack_region, unpack_region
from imagebench.scoring.registry import ContractError, Example, FieldResult, comparator
from imagebench.scoring.registry import check_config as _config
from imagebench.scoring.registry import is_bool as _is_bool
from imagebench.scoring.registry import no as _no
from imagebench.scoring.registry import ok as _ok
from imagebench.scoring.values import is_number as _is_number
from imagebench.scoring.values import plain as _plain
from imagebench.scoring.values import short as _short


def _prep_voxel(gold: Any, config: Mapping[str, Any] | None) -> tuple[np.ndarray, dict[str, Any]]:
    cfg = _config("voxel_member_of_set", config, {"round": _is_bool})
    try:
        mask = unpack_region(gold)
    except ValueError as exc:
        raise ContractError(f"voxel_member_of_set: gold region: {exc}") from None
    if not mask.any():
        raise ContractError("voxel_member_of_set: the gold region is empty, so no answer could match")
    return mask, cfg


def _first_voxel(gold: Any) -> list[int]:
    """The region's first voxel in C order: an answer that must match it."""
    mask = unpack_region(gold)
    return [int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape)]


@comparator(
    prepare=_prep_voxel,
    exemplar=_first_voxel,
    example=Example(pack_region(np.pad(np.ones((2, 2, 2), bool), 1)), {}, [1, 2, 1], [0, 0, 0]),
)
def voxel_member_of_set(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """The predicted voxel index lies inside the gold's packed region (the mask is the tolerance).

    The prediction is a list of integer indices, one per axis of the region, in the region's
    axis order (e.g. ``[z, y, x]``). Negative or out-of-range indices are outside (there is no
    wrap-around). Floats are refused unless ``round`` is set, when they round half away from zero.
    Gold: ``{"shape": [...], "packed": ...}`` (:func:`pack_region`). Config: ``round`` (bool).
    """
    mask, cfg = _prep_voxel(gold, config)
    predicted = _plain(predicted)
    if not isinstance(predicted, list) or len(predicted) != mask.ndim:
        return _no(f"expected a list of {mask.ndim} voxel indices, got {_short(predicted)}")
    index: list[int] = []
    for axis, value in enumerate(predicted):
        if isinstance(value, int) and not isinstance(value, bool):
            index.append(value)
        elif cfg.get("round") and _is_number(value):
            index.append(int(math.copysign(math.floor(abs(value) + 0.5), value)))
        else:
            return _no(f"index {axis} is {_short(value)}, expected an integer")
    for axis, (i, n) in enumerate(zip(index, mask.shape, strict=True)):
        if not 0 <= i < n:
            return _no(f"index {axis} = {i} lies outside the volume (0..{n - 1})")
    if mask[tuple(index)]:
        return _ok(f"voxel {index} is inside the region")
    return _no(f"voxel {index} is outside the region")
