"""The paired statistics of a comparison: McNemar's exact test and a seeded paired bootstrap
interval, both from ``scipy.stats`` (:mod:`imagebench.suite.compare` says over what they run)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` pairs that pass only in A and ``c`` only in B.

    Under the null each discordant pair is a fair coin, so this is the exact binomial test of
    ``b`` successes in ``b + c`` trials with p = 1/2 (``scipy.stats.binomtest``). Its two-sided p
    sums the outcomes no likelier than ``b``; the distribution being symmetric, that is
    min(1, 2 * P[X <= min(b, c)]) with X ~ Binomial(b + c, 1/2). 1.0 when no pair is discordant.
    """
    for name, v in (("b", b), ("c", c)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a count >= 0, got {v!r}")
    if b + c == 0:
        return 1.0  # binomtest needs a trial; with no discordant pair nothing argues either way
    from scipy.stats import binomtest

    return float(binomtest(b, b + c, 0.5).pvalue)


def _mean_difference(x: Any, y: Any, axis: int = -1) -> Any:
    import numpy as np

    return np.mean(y - x, axis=axis)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, seed: int, resamples: int = 2000, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile interval of mean(b - a), resampling the pairs together: ``scipy.stats.bootstrap``
    (``paired=True``, ``method="percentile"``) with ``numpy.random.default_rng(seed)``.

    None with fewer than two pairs (no spread to resample).
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length ({len(a)} and {len(b)})")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if len(a) < 2:
        return None
    import numpy as np
    from scipy import stats

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with warnings.catch_warnings():
        # scipy also takes the standard deviation of the resampled means, which has no degrees
        # of freedom with a single resample (numpy warns twice); that number is not used here
        warnings.filterwarnings("ignore", "Degrees of freedom <= 0", RuntimeWarning)
        warnings.filterwarnings("ignore", "invalid value encountered in scalar divide", RuntimeWarning)
        result = stats.bootstrap(
            (x, y),
            _mean_difference,
            paired=True,
            vectorized=True,
            n_resamples=resamples,
            # about 2M resampled values at a time, as before: the same draws, bounded memory
            batch=max(1, 2_000_000 // x.size),
            confidence_level=level,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


__all__ = ["mcnemar_exact", "paired_bootstrap"]
