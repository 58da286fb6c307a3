"""The plane's per-run read token: every call carries it, a scoped one reads its own ids only.

Each rule is tried with a dishonest client: no token, a wrong one, another plane's, the upload key
in its place, a scoped token widened by hand, and a token reading what it was not given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

fl = pytest.importorskip("pyarrow.flight")

from imagebench.plane import token as tokens  # noqa: E402
from imagebench.plane.client import Client, close_thread_connections  # noqa: E402
from imagebench.plane.process import PlaneProcess  # noqa: E402
from imagebench.plane.server import NotLoopback, PlaneServer, loopback_host  # noqa: E402

KEY = "k" * 64


@pytest.fixture
def served(tmp_path: Path) -> Iterator[PlaneServer]:
    server = PlaneServer(tmp_path / "plane", read_key=KEY, upload_key="u" * 32)
    try:
        yield server
    finally:
        close_thread_connections()
        server.shutdown()


def _stored(server: PlaneServer, *names: str) -> list[str]:
    harness = Client(server.url, key="u" * 32, token=KEY)
    return [harness.upload(np.full((8, 8), i, np.uint16), name, chunks=(4, 4)) for i, name in enumerate(names)]


def _every_call(client: Client, sid: str) -> list[str]:
    """The message of each kind of call that was refused (list, describe, do_get, an action, an upload)."""
    refused = []
    calls = [
        client.list,
        lambda: client.describe(sid),
        lambda: client._meta(sid),
        client.health,
        lambda: client.upload(np.zeros((4, 4), np.uint8), "guest", chunks=(4, 4)),
    ]
    for call in calls:
        with pytest.raises(fl.FlightError) as info:
            call()
        refused.append(str(info.value))
    from imagebench.plane.client import _read_chunk

    with pytest.raises(fl.FlightError) as info:
        _read_chunk(client.url, sid, 0, (0, 0), (8, 8), (4, 4), "uint16", client.token)
    refused.append(str(info.value))
    return refused


@pytest.mark.parametrize(
    "dishonest",
    ["", "not-the-key", "u" * 32, "x" * 64],  # none, wrong, the upload key, another run's key
)
def test_a_call_without_the_runs_token_is_refused(served: PlaneServer, dishonest: str, monkeypatch) -> None:
    monkeypatch.delenv(tokens.TENSOR_TOKEN_ENV, raising=False)
    (sid,) = _stored(served, "a")
    client = Client(served.url, token=dishonest or None)
    for message in _every_call(client, sid):
        assert "refused" in message and "read token" in message, message
    # nothing the dishonest client tried was stored
    assert Client(served.url, token=KEY).list() == [sid]


def test_a_token_of_another_plane_is_refused(served: PlaneServer, tmp_path: Path) -> None:
    other = PlaneServer(tmp_path / "other", read_key="o" * 64)
    try:
        (sid,) = _stored(served, "a")
        theirs = tokens.scoped_token("o" * 64, [sid])  # minted for the same id, by another run's key
        for message in _every_call(Client(served.url, token=theirs), sid):
            assert "did not issue" in message
    finally:
        close_thread_connections()
        other.shutdown()


def test_the_full_token_reads_everything(served: PlaneServer) -> None:
    a, b = _stored(served, "a", "b")
    client = Client(served.url, token=KEY)
    assert client.list() == sorted([a, b])
    assert client.read(b).tolist() == np.full((8, 8), 1, np.uint16).tolist()
    assert client.health()["arrays"] == 2


def test_a_scoped_token_reads_its_ids_and_nothing_else(served: PlaneServer) -> None:
    mine, theirs = _stored(served, "mine", "theirs")
    client = Client(served.url, token=tokens.scoped_token(KEY, [mine]))
    assert client.list() == [mine]
    assert client.health()["arrays"] == 1
    assert int(client.get(mine).compute().max()) == 0
    assert client.read(mine, streams=2).shape == (8, 8)
    # another sample's array: refused, told only what a missing id is told
    for read in (lambda: client.describe(theirs), lambda: client.read_chunk(theirs, (0, 0))):
        with pytest.raises(fl.FlightError, match="no array with id"):
            read()
    from imagebench.plane.client import _read_chunk, read_box

    with pytest.raises(fl.FlightError, match="no array with id"):
        _read_chunk(served.url, theirs, 0, (0, 0), (8, 8), (4, 4), "uint16", client.token)
    with pytest.raises(fl.FlightError, match="no array with id"):
        read_box(served.url, theirs, 0, (0, 0), (2, 2), (8, 8), (4, 4), "uint16", auth=client.token)


def test_a_scoped_token_widened_by_hand_is_refused(served: PlaneServer) -> None:
    mine, theirs = _stored(served, "mine", "theirs")
    given = tokens.scoped_token(KEY, [mine])
    _, _, nonce, mac = given.split(".")
    both = ",".join(sorted([mine, theirs]))
    for forged in (f"ids.{both}.{nonce}.{mac}", f"ids.{theirs}.{nonce}.{mac}", f"ids..{nonce}.{mac}",
                   f"ids.{mine}.{nonce}x.{mac}", f"ids.{mine}.{mac}", f"{given}.", given.upper()):  # fmt: skip
        with pytest.raises(fl.FlightUnauthenticatedError, match="did not issue"):
            Client(served.url, token=forged).describe(theirs)


def test_a_scoped_upload_is_readable_back_by_its_token_only(served: PlaneServer) -> None:
    (mine,) = _stored(served, "mine")
    first = Client(served.url, token=tokens.scoped_token(KEY, [mine]))
    second = Client(served.url, token=tokens.scoped_token(KEY, []))
    result = first.upload(np.arange(16, dtype=np.uint8).reshape(4, 4), "my-result", chunks=(4, 4))
    assert first.read(result).sum() == 120 and sorted(first.list()) == sorted([mine, result])
    # another sample uploads under the same name: a name gives no way into the first one's result
    with pytest.raises(fl.FlightError, match="no array with id"):
        second.describe(result)
    assert second.list() == []


def test_two_tokens_for_the_same_ids_do_not_read_each_others_uploads(served: PlaneServer) -> None:
    (shared,) = _stored(served, "shared")  # two samples of one case: the same fixture ids
    first, second = (Client(served.url, token=tokens.scoped_token(KEY, [shared])) for _ in range(2))
    assert first.token != second.token
    result = first.upload(np.ones((4, 4), np.uint8), "result", chunks=(4, 4))
    assert second.list() == [shared]
    with pytest.raises(fl.FlightError, match="no array with id"):
        second.read(result)


def test_a_token_is_refused_when_minted_for_something_not_an_id() -> None:
    with pytest.raises(ValueError, match="plane ids only"):
        tokens.scoped_token(KEY, ["cache_0123456789ab,cache_000000000000"])


def test_off_loopback_only_with_a_read_key() -> None:
    with pytest.raises(NotLoopback, match="--host '192.0.2.9' is not a loopback address.*IMAGEBENCH_PLANE_READ_KEY"):
        loopback_host("192.0.2.9")
    assert loopback_host("192.0.2.9", KEY) == "192.0.2.9"
    with pytest.raises(NotLoopback, match="wildcard"):
        loopback_host("0.0.0.0", KEY)
    assert loopback_host("localhost") == "127.0.0.1"


def test_serve_refuses_a_non_loopback_host_without_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != tokens.READ_KEY_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "imagebench.plane", "serve", "--host", "192.0.2.9", "--data-dir", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--host '192.0.2.9'" in proc.stderr and tokens.READ_KEY_ENV in proc.stderr


def test_the_read_key_is_in_the_servers_environment_only() -> None:
    with PlaneProcess() as plane:
        assert plane.proc is not None and plane.read_key not in " ".join(plane.argv())
        assert plane.client.token == plane.read_key and plane.client.health()["ok"]
        # nothing on its command line another user's `ps` shows
        assert plane.read_key.encode() not in Path(f"/proc/{plane.proc.pid}/cmdline").read_bytes()
        with pytest.raises(fl.FlightUnauthenticatedError):
            Client(plane.url, token="").health()


def _routable_address() -> str | None:
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: the kernel picks the outgoing address
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def test_a_plane_bound_off_loopback_needs_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    address = _routable_address()
    if address is None:
        pytest.skip("this machine has no address other than loopback")
    monkeypatch.setenv("IMAGEBENCH_PLANE_HOST", address)
    with PlaneProcess() as plane:
        assert plane.url == f"grpc://{address}:{plane.url.rsplit(':', 1)[1]}"
        assert plane.client.health()["ok"]
        with pytest.raises(fl.FlightUnauthenticatedError):
            Client(plane.url, token=None).list()
