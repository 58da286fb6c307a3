"""Per-thread Flight connections of the data-plane client are closed deterministically on request.

A worker thread that Python did not create (a Qt pool thread) crashes the process if a Flight
connection is released while its Python state is torn down, so such work closes its own
connections before it returns. No Qt here: short-lived Python threads stand in for the workers,
and each keeps a reference to its connection so that only an explicit close (never garbage
collection at thread exit) can close it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

fl = pytest.importorskip("pyarrow.flight")
pa = pytest.importorskip("pyarrow")

from imagebench.plane import Client  # noqa: E402
from imagebench.plane import client as client_mod  # noqa: E402
from imagebench.plane.client import (  # noqa: E402
    close_thread_connections,
    closing_thread_connections,
    thread_connections,
)
from imagebench.plane.server import PlaneServer  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlaneServer]:
    srv = PlaneServer(tmp_path_factory.mktemp("plane-threads"))
    yield srv
    srv.shutdown()


def is_closed(conn: Any) -> bool:
    """True when the Flight connection refuses work because it was closed."""
    try:
        list(conn.do_action(fl.Action("health", b"")))
    except pa.ArrowInvalid as exc:
        assert "closed" in str(exc)
        return True
    return False


def in_thread(work: Callable[[], Any]) -> Any:
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # pragma: no cover - shown by the assertion below
            out["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(30)
    assert not t.is_alive()
    assert "error" not in out, out.get("error")
    return out["value"]


def test_connections_opened_in_short_lived_workers_are_closed_when_they_finish(server: PlaneServer) -> None:
    client = Client(server.url)
    captured: list[tuple[Any, list[str]]] = []

    def work() -> dict[str, Any]:
        health = client.health()
        captured.append((client_mod._connection(server.url), thread_connections()))
        return health

    results = [in_thread(closing_thread_connections(work)) for _ in range(4)]
    assert all(r["ok"] for r in results)
    assert len(captured) == 4 and len({id(conn) for conn, _ in captured}) == 4  # one connection per thread
    assert all(urls == [server.url] for _, urls in captured)
    assert all(is_closed(conn) for conn, _ in captured)

    # control: without the wrapper a worker's connection outlives it while anything holds it
    kept = in_thread(lambda: (client.health(), client_mod._connection(server.url))[1])
    assert not is_closed(kept)
    kept.close()


def test_a_worker_that_raises_still_closes_its_connections(server: PlaneServer) -> None:
    client = Client(server.url)
    seen: list[Any] = []

    def work() -> None:
        client.list()
        seen.append(client_mod._connection(server.url))
        raise RuntimeError("the worker failed")

    def run() -> str:
        try:
            closing_thread_connections(work)()
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert in_thread(run) == "the worker failed"
    assert len(seen) == 1 and is_closed(seen[0])


def test_close_thread_connection_closes_only_this_thread_s_and_reconnects(server: PlaneServer) -> None:
    client = Client(server.url)
    assert client.health()["ok"]
    mine = client_mod._connection(server.url)
    assert server.url in thread_connections()

    def other() -> tuple[bool, bool, bool, list[str]]:
        client.health()
        theirs = client_mod._connection(server.url)
        first = client.close_thread_connection()
        again = client.close_thread_connection()
        return first, again, is_closed(theirs), thread_connections()

    first, again, theirs_closed, left = in_thread(other)
    assert (first, again, theirs_closed, left) == (True, False, True, [])
    assert not is_closed(mine)  # the other thread's close left this thread's connection alone

    assert client.close_thread_connection() is True
    assert is_closed(mine) and server.url not in thread_connections()
    assert client.health()["ok"]  # the next call reconnects
    fresh = client_mod._connection(server.url)
    assert fresh is not mine and not is_closed(fresh)
    assert close_thread_connections() >= 1 and thread_connections() == []


def test_closing_never_raises_for_a_connection_that_fails_to_close() -> None:
    class Broken:
        def close(self) -> None:
            raise OSError("the channel is gone")

    def work() -> tuple[int, list[str]]:
        client_mod._thread_conns()["grpc://127.0.0.1:1"] = Broken()  # type: ignore[assignment]
        return close_thread_connections(), thread_connections()

    assert in_thread(work) == (1, [])

