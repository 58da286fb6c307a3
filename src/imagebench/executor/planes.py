"""The run's data plane as the executor drives it: started in the background when a tensor case
needs it, closed when the last one is done, and presented to workers by URL and ids.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.fixtures.fixture import Fixture
    from imagebench.runs.runner import Plane


@dataclass(frozen=True)
class PresentedPlane:
    """The run's plane as a worker sees it for one case: its URL and the ids of the fixture the
    driver uploaded (with a fingerprint of each stored corner, to check after each sample), and a
    read token scoped to those ids (:mod:`imagebench.plane.token`): the worker's harness reads
    with it and its subject is given it; it reads no other sample's or case's arrays.

    ``error`` replays an upload that failed on the driver, so the sample ends exactly as it
    would have serially (``harness-error`` with the same reason).
    """

    url: str
    ids: Mapping[str, str]
    fingerprints: Mapping[str, str]
    error: tuple[str, str] | None = None
    token: str | None = None

    @property
    def client(self) -> Any:
        from imagebench.plane.client import Client

        return Client(self.url, token=self.token)

    def for_unit(self, mint: Any) -> PresentedPlane:
        """This presentation with a token of one unit's own (``mint(ids)``, the run plane's
        ``token_for``): samples of one case read the same ids but not each other's uploads."""
        if mint is None or self.error is not None:
            return self
        return replace(self, token=mint(self.ids.values()))

    def token_for(self, ids: Any) -> str | None:
        """The token it carries, whatever ``ids`` are asked for: it cannot mint another."""
        return self.token

    def client_for(self, ids: Any) -> Any:
        return self.client

    def present(self, case: Case, fixture: Fixture) -> dict[str, str]:
        if self.error is not None:
            name, message = self.error
            raise type(name, (Exception,), {})(message)
        return dict(self.ids)

    def after_sample(self, case: Case, fixture: Fixture) -> list[str]:
        from imagebench.plane.process import OVERWRITTEN_FLAG

        return [OVERWRITTEN_FLAG] if changed_layers(self.client, self.ids, self.fingerprints) else []


def corner(client: Any, sid: str) -> str:
    from imagebench.plane.process import block_fingerprint

    ndim = len(client.describe(sid)["shape"])
    return block_fingerprint(client.read_chunk(sid, (0,) * ndim))


def changed_layers(client: Any, ids: Mapping[str, str], fingerprints: Mapping[str, str]) -> list[str]:
    changed = []
    for name, sid in ids.items():
        try:
            now = corner(client, sid)
        except Exception as exc:  # unreadable or gone counts as changed
            if type(exc).__name__ == "FlightUnauthenticatedError":
                raise  # the harness's own token refused: a harness matter, nothing a subject did
            now = ""
        if now != fingerprints.get(name):
            changed.append(name)
    return changed


def present_on_driver(plane: Plane, case: Case, fixture: Fixture) -> PresentedPlane:
    try:
        ids = dict(plane.present(case, fixture))
    except Exception as exc:
        return PresentedPlane(plane.url, {}, {}, error=(type(exc).__name__, str(exc)))
    client = plane.client
    scope = getattr(plane, "token_for", None)
    return PresentedPlane(
        plane.url,
        ids,
        {name: corner(client, sid) for name, sid in ids.items()},
        token=scope(ids.values()) if scope is not None else None,
    )


class PlaneStarter:
    """The run's plane: the caller's, or one started in a background thread when first needed."""

    def __init__(self, plane: Plane | None, needed: bool) -> None:
        self._plane: Any = plane
        self._reason = ""
        self.owned = plane is None and needed
        self._thread: threading.Thread | None = None
        self._closer: threading.Thread | None = None
        if self.owned:
            # Its modules (pyarrow, zarr) are imported on this thread first: the background thread
            # then only spawns the server and waits for it, importing nothing a subject might.
            with contextlib.suppress(ImportError):
                import imagebench.plane.client
                import imagebench.plane.process  # noqa: F401
            self._thread = threading.Thread(target=self._start, name="imagebench-plane-start", daemon=True)
            self._thread.start()

    def _start(self) -> None:
        from imagebench.plane import RunPlane

        try:
            self._plane, self._reason = RunPlane.try_start()
        except Exception as exc:  # try_start answers PlaneUnavailable itself; anything else is a reason too
            self._plane, self._reason = None, f"{type(exc).__name__}: {exc}"

    def ready(self) -> Any:
        """The plane when it is up, without waiting; None while it starts (or when it cannot)."""
        if self._thread is not None and self._thread.is_alive():
            return None
        return self._plane

    def get(self) -> tuple[Any, str]:
        """``(plane, "")``, or ``(None, reason)``; waits for a start in progress."""
        if self._thread is not None:
            self._thread.join()
        return self._plane, self._reason

    def close_soon(self) -> None:
        """Stop an owned plane in the background (its last tensor case is done)."""
        if not self.owned or self._closer is not None:
            return
        plane, _ = self.get()
        if plane is not None:
            self._closer = threading.Thread(target=plane.close, name="imagebench-plane-stop", daemon=True)
            self._closer.start()

    def close(self) -> None:
        if not self.owned:
            return
        plane, _ = self.get()
        if self._closer is not None:
            self._closer.join()
        if plane is not None:
            plane.close()  # idempotent
