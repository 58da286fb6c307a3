"""A reference solution for the cases the save-as-case tests write (named ``savecase_solutions:reference``).

The saved cases show one image, ``nuclei``: bright squares on a dim, noisy background. The
reference thresholds it halfway and labels the connected components, which is exactly the truth
painted there; the baseline leaves one object covering the whole field, which must fail."""

from __future__ import annotations

from typing import Any

import numpy as np


def reference(session: Any) -> None:
    from scipy import ndimage as ndi

    image = np.asarray(session.namespace["nuclei"], dtype=np.float64)
    labels, _ = ndi.label(image > 0.5 * (image.min() + image.max()))
    session.namespace["labels"] = labels.astype(np.int32)


def baseline(session: Any) -> None:
    session.namespace["labels"] = np.ones(np.shape(session.namespace["nuclei"]), dtype=np.int32)


def field(size: tuple[int, int] = (48, 64), seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The image and the label image a person would paint over it."""
    labels = np.zeros(size, dtype=np.int32)
    labels[6:16, 8:20] = 1
    labels[26:40, 30:46] = 2
    labels[10:18, 50:60] = 3
    rng = np.random.default_rng(seed)
    image = ((labels > 0) * 200.0 + rng.normal(20.0, 4.0, size)).astype(np.float32)
    return image, labels


def centres(session: Any) -> None:
    """The reference of the points case: the centre of each bright object, as ``spots``."""
    from scipy import ndimage as ndi

    image = np.asarray(session.namespace["nuclei"], dtype=np.float64)
    labels, n = ndi.label(image > 0.5 * (image.min() + image.max()))
    session.namespace["spots"] = np.array(ndi.center_of_mass(image > 0, labels, range(1, n + 1)), dtype=np.float64)
