"""Points matched to true points: detection scored one-to-one within a distance.

:func:`match_points` pairs answered points with true points one-to-one (Hungarian matching,
``scipy.optimize.linear_sum_assignment``) so that as many pairs as possible lie within
``radius`` pixels of each other and, among those matchings, their total distance is least. A pair
farther apart than ``radius`` is no match. The cost of a pair beyond ``radius`` is a constant
larger than every within-radius matching costs together, which is what makes the assignment
prefer one more match to any saving in distance.

:func:`score_points` turns a matching into the metrics of the ``points`` verifier
(:mod:`imagebench.cases.verifiers`): ``f1_shortfall`` (1 - F1 of the matching), ``missed_fraction``
(true points with no match / true points), ``false_fraction`` (answered points with no match /
answered points) and ``localization_error`` (the mean distance of the matched pairs, px), and, when
a limit asks for them (:data:`EXTRA_POINT_METRICS`), ``localization_rmse`` (the root mean square
distance of the matched pairs, px) and ``count_error`` (``|answered - true| / true``, the relative
error of the count; 0 for an empty truth answered empty, the answered count for an empty truth).
Points are coordinates in pixels of the data grid, in napari's order (``(row, col)`` or ``(plane, row, col)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from imagebench.cases._overlay import GREEN, MAGENTA, Overlay, answer_legend
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError, Metric, Outcome, WhyNot, read_array

#: the most points a side may hold: the distance matrix is true x answered
MAX_POINTS = 20_000

POINT_METRICS: tuple[tuple[str, str], ...] = (
    ("f1_shortfall", "1 - F1 of the one-to-one matching within the radius"),
    ("missed_fraction", "true points with no match / true points"),
    ("false_fraction", "answered points with no match / answered points"),
    ("localization_error", "mean distance of the matched pairs, px"),
)
#: scored only when the limits name them (a case of the spot-detection skill does; the ``points``
#: verifier by name when its ``metrics`` parameter does)
EXTRA_POINT_METRICS: tuple[tuple[str, str], ...] = (
    ("localization_rmse", "root mean square distance of the matched pairs, px"),
    ("count_error", "|answered points - true points| / true points (the answered count when the truth is empty)"),
)
_PX = frozenset({"localization_error", "localization_rmse"})

DRAWN = (
    "overlay: the image with each true point (green circle of the matching radius) and each answered one "
    "(magenta cross), a magenta line joining each matched pair; the legend under it names the colours"
)


@dataclass(frozen=True)
class PointMatch:
    """The pairs ``(true index, answered index)`` within the radius and their distances."""

    pairs: np.ndarray  # (k, 2) int
    distances: np.ndarray  # (k,) float
    n_true: int
    n_pred: int

    @property
    def tp(self) -> int:
        return int(self.pairs.shape[0])

    @property
    def rmse(self) -> float | None:
        """The root mean square distance of the matched pairs (None without a pair)."""
        return float(np.sqrt(np.mean(self.distances**2))) if self.tp else None

    @property
    def count_error(self) -> float:
        """``|n_pred - n_true| / n_true`` (``n_pred`` when the truth is empty)."""
        return abs(self.n_pred - self.n_true) / self.n_true if self.n_true else float(self.n_pred)

    @property
    def f1(self) -> float:
        total = self.n_true + self.n_pred
        return 1.0 if total == 0 else 2.0 * self.tp / total

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_true": self.n_true,
            "n_pred": self.n_pred,
            "tp": self.tp,
            "fn": self.n_true - self.tp,
            "fp": self.n_pred - self.tp,
            "f1": self.f1,
            "rmse": self.rmse,
            "count_error": self.count_error,
        }


def match_points(truth: np.ndarray, answer: np.ndarray, radius: float) -> PointMatch:
    """Match ``answer`` (m, d) to ``truth`` (n, d) one-to-one within ``radius`` (see the module docstring)."""
    from scipy.optimize import linear_sum_assignment

    truth, answer = np.asarray(truth, dtype=np.float64), np.asarray(answer, dtype=np.float64)
    n, m = truth.shape[0], answer.shape[0]
    empty = PointMatch(np.zeros((0, 2), np.intp), np.zeros(0), n, m)
    if n == 0 or m == 0:
        return empty
    with np.errstate(over="ignore", invalid="ignore"):
        dist = np.sqrt(((truth[:, None, :] - answer[None, :, :]) ** 2).sum(axis=-1))
    near = np.isfinite(dist) & (dist <= radius)
    if not near.any():
        return empty
    # more than every within-radius matching costs together: one more match always wins
    beyond = 2.0 * (min(n, m) + 1) * float(radius) + 1.0
    cost = np.where(near, dist, beyond)
    rows, cols = linear_sum_assignment(cost)
    keep = near[rows, cols]
    pairs = np.stack([rows[keep], cols[keep]], axis=1).astype(np.intp)
    return PointMatch(pairs, dist[rows[keep], cols[keep]], n, m)


class PointsFileError(ValueError):
    """A points file that cannot be scored (names the file and what was expected)."""


def load_points_file(path: str | Path) -> np.ndarray:
    """(n, d) float coordinates from ``path``: a ``.npy`` (no pickle) or a ``.csv`` of numbers, one
    point a row (a first row that is not numbers is a header, skipped). :class:`PointsFileError`
    for anything else: another suffix, a shape not (n, 2 or 3), a coordinate not finite, more than
    :data:`MAX_POINTS` points."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(path, allow_pickle=False, mmap_mode="r")  # the shape checked before a value is read
        elif suffix == ".csv":
            lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            if len(lines) > MAX_POINTS + 1:
                raise PointsFileError(f"{path}: more than the {MAX_POINTS} points a file may hold")
            if lines and not _numeric_row(lines[0]):
                lines = lines[1:]
            rows = [[float(v) for v in ln.split(",")] for ln in lines]
            widths = {len(r) for r in rows}
            if len(widths) > 1:
                raise PointsFileError(f"{path}: rows of {sorted(widths)} values, expected the same 2 or 3 in each")
            arr = np.asarray(rows, dtype=np.float64).reshape(len(rows), widths.pop() if widths else 2)
        else:
            raise PointsFileError(f"{path}: suffix {path.suffix!r}, expected .npy or .csv")
    except PointsFileError:
        raise
    except (OSError, ValueError) as exc:
        raise PointsFileError(f"{path}: could not be read as points: {exc}") from None
    if arr.dtype.kind not in "iuf":
        raise PointsFileError(f"{path}: dtype {arr.dtype}, expected numbers")
    if arr.ndim != 2 or arr.shape[1] not in (2, 3):
        raise PointsFileError(f"{path}: shape {tuple(arr.shape)}, expected (points, 2 or 3): one row per point")
    if arr.shape[0] > MAX_POINTS:
        raise PointsFileError(f"{path}: {arr.shape[0]} points, more than the {MAX_POINTS} a file may hold")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise PointsFileError(f"{path}: a NaN or infinite coordinate, expected finite numbers")
    return arr


def _numeric_row(line: str) -> bool:
    try:
        [float(v) for v in line.split(",")]
    except ValueError:
        return False
    return True


def _read_points(attempt: Attempt, name: str, dims: int) -> tuple[np.ndarray | None, WhyNot | None]:
    points, why = read_array(attempt, name, dtype="iuf")
    if points is None:
        return None, why
    if points.size == 0:
        return np.zeros((0, dims)), None
    if points.ndim != 2 or points.shape[1] != dims:
        return None, WhyNot(f"{name!r} has shape {tuple(points.shape)}, expected (points, {dims}): one row per point")
    if points.shape[0] > MAX_POINTS:
        return None, WhyNot(f"{name!r} holds {points.shape[0]} points, more than the {MAX_POINTS} a case scores")
    points = points.astype(np.float64)
    if not np.all(np.isfinite(points)):
        bad = int((~np.isfinite(points)).any(axis=1).sum())
        return None, WhyNot(
            f"{name!r} has {bad} point(s) with a NaN or infinite coordinate: every coordinate must be finite"
        )
    return points, None


def _truth_points(fixture: Fixture, key: str) -> np.ndarray:
    truth = np.asarray(fixture.truth[key], dtype=np.float64)
    if truth.ndim != 2 or truth.shape[1] not in (2, 3) or not np.all(np.isfinite(truth)):
        raise FixtureError(
            f"case {fixture.label}: truth {key!r} must be finite (points, 2 or 3) coordinates, got shape {truth.shape}"
        )
    if truth.shape[0] > MAX_POINTS:
        raise FixtureError(f"case {fixture.label}: truth {key!r} holds more than {MAX_POINTS} points")
    return truth


def score_points(
    fixture: Fixture,
    attempt: Attempt,
    *,
    radius: float,
    limits: dict[str, float],
    truth_key: str = "points",
    leaving: str = "points",
    image_key: str | None = "image",
) -> Outcome:
    """The ``points`` verifier's outcome: the metrics of :data:`POINT_METRICS` and
    :data:`EXTRA_POINT_METRICS` that ``limits`` gives a limit, each scored against it."""
    scored = [(name, about) for name, about in POINT_METRICS + EXTRA_POINT_METRICS if name in limits]
    if not scored:
        raise FixtureError(f"case {fixture.label}: the points verifier was given a limit for none of its metrics")
    truth = _truth_points(fixture, truth_key)
    answer, why = _read_points(attempt, leaving, truth.shape[1])
    image = None if image_key is None else np.asarray(fixture.data[image_key])
    if answer is None:
        metrics = [Metric.missing(name, limits[name], why or "unreadable") for name, _ in scored]
        return Outcome(
            fixture, attempt, metrics, detail={"why": str(why)}, artifacts=_artifacts(image, truth, None, None, radius)
        )
    r = match_points(truth, answer, radius)
    values: dict[str, float | None] = {
        "f1_shortfall": 1.0 - r.f1,
        "missed_fraction": (r.n_true - r.tp) / r.n_true if r.n_true else 0.0,
        "false_fraction": (r.n_pred - r.tp) / r.n_pred if r.n_pred else 0.0,
        "localization_error": float(r.distances.mean()) if r.tp else None,
        "localization_rmse": r.rmse,
        "count_error": r.count_error,
    }
    metrics = []
    for name, _ in scored:
        value = values[name]
        if value is None:
            because = "unusable" if r.n_true else "truth"
            reason = (
                f"no answered point lies within {radius:g} px of a true one" if r.n_true else "the truth has no point"
            )
            metrics.append(Metric.missing(name, limits[name], reason, unit="px", because=because))
        else:
            metrics.append(Metric(name, value, limits[name], unit="px" if name in _PX else ""))
    detail = {"matching": {**r.as_dict(), "radius_px": float(radius)}}
    artifacts = _artifacts(image, truth, answer, r, radius)
    if artifacts:
        detail["drawn"] = DRAWN
    return Outcome(fixture, attempt, metrics, detail=detail, artifacts=artifacts)


def _artifacts(
    image: np.ndarray | None, truth: np.ndarray, answer: np.ndarray | None, match: PointMatch | None, radius: float
) -> dict[str, Any]:
    """The overlay on the image (a 3-D image and 3-D points: its maximum projection, the points' last two axes)."""
    if image is None or image.ndim not in (2, 3) or (image.ndim == 3 and truth.shape[1] != 3):
        return {}
    plane = image if image.ndim == 2 else image.max(axis=0)
    view = Overlay(plane)
    yx = slice(-2, None)
    if answer is not None and match is not None:
        for t, p in match.pairs:
            view.line(truth[t, yx], answer[p, yx], MAGENTA)
    for t in truth:
        view.circle(t[yx], max(1.0, radius), GREEN)
    if answer is not None:
        for p in answer:
            view.cross(p[yx], 2, MAGENTA)
    view.legend(answer_legend(answer is not None))
    return {"image": np.asarray(plane, dtype=np.float32), "overlay": view.rgb}


__all__ = [
    "EXTRA_POINT_METRICS",
    "MAX_POINTS",
    "POINT_METRICS",
    "PointsFileError",
    "load_points_file",
    "PointMatch",
    "match_points",
    "score_points",
]
