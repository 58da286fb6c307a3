"""The Arrow side of the plane's wire: the record batches an upload and a box of chunks travel in.

Both ends speak it: the client (in the harness's process and a subject's) and the server (its own
process). Kept apart from :mod:`imagebench.plane.server` so that a client imports pyarrow and
numpy only, never the server's zarr store and what it pulls in (fsspec, numcodecs: about half a
second of a run's start).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from imagebench.plane.protocol import DATA_FIELD, INDEX_FIELD

UPLOAD_SCHEMA = pa.schema([(INDEX_FIELD, pa.list_(pa.int64())), (DATA_FIELD, pa.large_binary())])
# A box of chunks read with one ticket (``span``) comes back the way an upload goes: a batch per chunk.
BOX_SCHEMA = UPLOAD_SCHEMA
CHUNK_SCHEMA = pa.schema([(DATA_FIELD, pa.large_binary())])


def binary_column(data: Any) -> pa.Array:
    """One large_binary value that wraps ``data``'s bytes without a copy."""
    buf = pa.py_buffer(data)
    offsets = pa.py_buffer(np.array([0, buf.size], dtype=np.int64))
    return pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, buf])


BOX_BATCH_BYTES = 4 << 20  # a box of chunks is streamed in record batches of about this many bytes


def index_rows(indices: Sequence[Sequence[int]]) -> pa.Array:
    """One list<int64> value per chunk index, built from buffers (see :func:`index_column`)."""
    values = np.asarray(indices, dtype=np.int64).reshape(len(indices), -1)
    offsets = np.arange(0, values.size + 1, values.shape[1], dtype=np.int32)
    off = pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)])
    items = pa.Array.from_buffers(pa.int64(), values.size, [None, pa.py_buffer(np.ascontiguousarray(values))])
    return pa.ListArray.from_arrays(off, items)


def index_column(index: Any) -> pa.Array:
    """One list<int64> value holding a chunk's grid index, built from buffers (``pa.array`` would
    import pandas, a third of a second, to check whether it was handed a pandas object)."""
    values = np.asarray(index, dtype=np.int64)
    offsets = pa.Array.from_buffers(pa.int32(), 2, [None, pa.py_buffer(np.array([0, values.size], dtype=np.int32))])
    items = pa.Array.from_buffers(pa.int64(), values.size, [None, pa.py_buffer(values)])
    return pa.ListArray.from_arrays(offsets, items)


__all__ = [
    "BOX_BATCH_BYTES",
    "BOX_SCHEMA",
    "CHUNK_SCHEMA",
    "UPLOAD_SCHEMA",
    "binary_column",
    "index_column",
    "index_rows",
]
