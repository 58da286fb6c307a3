"""What a local cluster's worker processes share: the imports of one forkserver they are forked from.

A local cluster's workers (:func:`imagebench.executor.cluster.local_cluster`) are forked from a
forkserver (:mod:`imagebench.executor.forked`) whose first import is this module. When it is
imported there (``WARM_ENV`` set), it gives the process one-thread BLAS and OpenMP pools before
any of them loads, then imports what every unit needs (dask's worker, the runner and what it
imports lazily, the scientific libraries the built-in cases' references and verifiers use) and
the run's case modules, so that each worker starts with them imported: paid once, by one process,
while the driver writes the run's records, instead of once per worker before its first unit.
Every import is best effort: one that fails here fails the unit that needs it, where it is reported.

Imported anywhere else (no ``WARM_ENV``) it does nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
from collections.abc import Sequence

from imagebench.executor.forked import WARM_ENV

# The harness: dask's worker and what a unit imports on its way (the runner imports lazily).
HARNESS = (
    "distributed",
    "distributed.worker",
    "distributed.nanny",
    "imagebench.runs.runner",
    "imagebench.executor.workers",
    "imagebench.runs.artifacts",
    "imagebench.runs.explain",
    "imagebench.runs.fingerprint",
    "imagebench.runs.spent",
    "imagebench.fixtures.cache",
    "imagebench.fixtures.fixture_digest",
    "imagebench.subjects.reference",
    "imagebench.subjects.running",
    "imagebench.sandbox.policy",
    "imagebench.cases",
)
# The libraries the built-in cases' builders, references and verifiers import when they first run
# (measured: the modules a worker had imported after one unit of each built-in case).
LIBRARIES = (
    "numpy",
    "scipy.ndimage",
    "scipy.optimize",
    "scipy.sparse",
    "scipy.stats",
    "scipy.signal",
    "scipy.spatial",
    "scipy.interpolate",
    "scipy.linalg",
    "skimage.draw",
    "skimage.exposure",
    "skimage.feature",
    "skimage.filters",
    "skimage.measure",
    "skimage.metrics",
    "skimage.morphology",
    "skimage.registration",
    "skimage.restoration",
    "skimage.segmentation",
    "skimage.transform",
    "skimage.util",
    "PIL.Image",
    "PIL.PngImagePlugin",
    "tifffile",
)


def warm(modules: Sequence[str]) -> float:
    """Import the harness, the libraries and ``modules``, each best effort; the seconds it took."""
    start = time.perf_counter()
    for name in (*HARNESS, *LIBRARIES, *modules):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    return time.perf_counter() - start


def _from_environment() -> None:
    raw = os.environ.pop(WARM_ENV, None)
    if raw is None:
        return
    from imagebench.executor.cluster import THREAD_ENV

    os.environ.update(THREAD_ENV)  # before numpy loads its BLAS: one thread, and no pool threads to fork
    try:
        given = json.loads(raw)
    except ValueError:
        given = {}
    given = given if isinstance(given, dict) else {}
    path = [p for p in given.get("path") or [] if isinstance(p, str)]
    sys.path[:] = [*path, *(p for p in sys.path if p not in path)]  # the driver's, so modules import as there
    modules = [m for m in given.get("modules") or [] if isinstance(m, str)]
    try:
        warm(modules)
    except KeyboardInterrupt:
        # a Ctrl-C to the run's process group while this imports: the run is ending (it stops this
        # forkserver as its cluster closes); no traceback of ours on its stderr
        pass


_from_environment()
