"""The tensor data plane: an Apache Arrow Flight server a run (or a viewer) shares with its subjects.

A case whose layer presents as ``tensor`` does not hand the subject an array: the harness uploads
the data to the plane under a per-run random name and gives the subject only the resulting id
(``fixture_tensors[layer]``) and a :class:`Client`; the subject reads it lazily, chunk by chunk,
as a dask array or a multiscale pyramid. See docs/plane.md for the protocol and the lifetime.

Importing this package loads neither pyarrow nor dask; the names below load on first use.

- :class:`Client` - ``upload``, ``get``, ``levels``, ``describe``, ``list``;
- :class:`PlaneProcess`, :func:`start_plane` - a server process and its temporary data;
- :class:`RunPlane` - the plane of one run (fixture uploads, overwrite checks);
- :func:`shared_plane` - one lazily started plane per process (the napari panel's);
- :class:`PlaneUnavailable` - no plane can run here, with the reason;
- :func:`source_id` - the id an upload under a name gets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)


if TYPE_CHECKING:  # pragma: no cover
    from imagebench.plane.client import Client, default_chunks
    from imagebench.plane.process import (
        PlaneProcess,
        PlaneUnavailable,
        RunPlane,
        flight_missing,
        shared_plane,
        start_plane,
    )
    from imagebench.plane.protocol import ArrayMeta, ProtocolError, source_id
    from imagebench.plane.server import PlaneServer
