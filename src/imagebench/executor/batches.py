"""Units batched into tasks for dask workers: fewer scheduler round trips, fewer driver wake-ups.

A *build* is one fixture and the samples that share it (:func:`imagebench.executor.serial.serial_builds`:
a case, or one seed of a sealed case). A build whose samples fit in one batch is one task on a
worker: it builds its fixture there and runs its samples one after another, as a serial run does,
so its fixture never travels. Near the end of the run batches get smaller (guided
self-scheduling: a batch is at most the units still to plan over ``SPREAD`` times the workers),
so that both workers stay busy to the end; a build split into several batches has its fixture
built once by a ``prepare`` task, which dask moves to the workers that run its batches.

The plan is pure and decided before anything is submitted: the same builds and workers give the
same batches, and every sample of every build is in exactly one batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.case.model import Case

# Units planned per worker in the guided rule: at the start of a run a batch may hold up to
# 1/(SPREAD x workers) of what remains, so the last batches are small.
SPREAD = 2
# A batch never holds more units than this (a long case's samples come back in steps).
MOST_PER_BATCH = 16


@dataclass(frozen=True)
class Batch:
    """Samples of one build run back to back in one task. ``shared`` when the build is split over
    several batches (its fixture is then built by a prepare task and moved by dask)."""

    case: Case
    seed: int | None
    samples: tuple[int, ...]
    build: int  # the index of its build in the plan's input
    shared: bool


def batch_size(remaining: int, workers: int, spread: int = SPREAD, most: int = MOST_PER_BATCH) -> int:
    """How many units the next batch may hold when ``remaining`` are still to plan."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return max(1, min(most, math.ceil(remaining / (spread * workers))))


def plan_batches(
    builds: Sequence[tuple[Case, int | None, Sequence[int]]],
    workers: int,
    *,
    spread: int = SPREAD,
    most: int = MOST_PER_BATCH,
) -> list[Batch]:
    """The batches of ``builds`` (``(case, seed, samples)``, in run order) for ``workers`` workers,
    in the order they are to be submitted."""
    remaining = sum(len(samples) for _, _, samples in builds)
    out: list[Batch] = []
    for index, (case, seed, samples) in enumerate(builds):
        left = list(samples)
        chunks: list[tuple[int, ...]] = []
        while left:
            size = batch_size(remaining, workers, spread, most)
            chunks.append(tuple(left[:size]))
            del left[:size]
            remaining -= len(chunks[-1])
        shared = len(chunks) > 1
        out.extend(Batch(case, seed, chunk, index, shared) for chunk in chunks)
    return out
