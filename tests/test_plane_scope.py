"""What a subject is given of the plane reads its own sample's arrays and nothing else.

A run's plane asks every call for a read token (imagebench.plane.token); the harness holds the
run's read key, a sample is given a token scoped to its fixture's ids. Tried here with subjects
that look where they were not sent: another case's array, the whole listing, the upload key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyarrow.flight")

from helpers import make_toy_case, truth_leaks  # noqa: E402
from test_plane_run import TENSOR_LAYER, tensor_case, tensor_reference  # noqa: E402

from imagebench.executor import run_cases  # noqa: E402
from imagebench.plane import RunPlane  # noqa: E402
from imagebench.plane import token as tokens  # noqa: E402
from imagebench.runs.layout import sample_dir  # noqa: E402
from imagebench.subjects import parse_subject  # noqa: E402

SEEN: dict[str, dict[str, Any]] = {}


@dataclass(frozen=True)
class Snoop:
    """Solves the case, and on the way tries to read every id it can name or list."""

    others: tuple[str, ...] = ()
    name: str = "snoop"

    def __call__(self, session: Any) -> None:
        client = session.client
        mine = set(session.namespace["fixture_tensors"].values())
        refused = []
        for sid in self.others:
            try:
                client.read_chunk(sid, (0, 0))
            except Exception as exc:
                refused.append(type(exc).__name__)
        SEEN[session.label] = {
            "listed": set(client.list()), "mine": mine, "refused": refused, "key": client.key,
            "token": client.token,
        }  # fmt: skip
        tensor_reference(session)


@pytest.fixture(scope="module")
def plane() -> Any:
    with RunPlane.start() as p:
        yield p


def test_a_samples_client_reads_its_own_ids_only(plane: RunPlane, tmp_path: Path) -> None:
    first, second = tensor_case("scope-a"), tensor_case("scope-b")
    run_cases([first], Snoop(), out=tmp_path / "a", progress=False, plane=plane)
    others = tuple(plane.fixture_ids(first).values())
    result = run_cases([second], Snoop(others), out=tmp_path / "b", progress=False, plane=plane)
    assert result.verdicts == {second.label: "pass"}
    seen = SEEN[second.label]
    assert seen["listed"] == seen["mine"] == set(plane.fixture_ids(second).values())
    assert seen["refused"] == ["FlightServerError"] * len(others) and others
    # no upload key (its uploads are a guest's, budgeted) and not the run's read key
    assert seen["key"] is None and seen["token"] != plane.process.read_key
    grant = tokens.grant_of(plane.process.read_key, seen["token"])
    assert grant is not None and not grant.full and grant.ids == seen["mine"]
    # the harness itself still reads everything
    assert set(plane.client.list()) >= set(others) | seen["mine"]


@dataclass(frozen=True)
class Neighbour:
    """Sample 0 uploads a result; sample 1 (the same case, the same fixture ids) looks for it by name."""

    name: str = "neighbour"

    def __call__(self, session: Any) -> None:
        from imagebench.plane.protocol import source_id

        client = session.client
        sid = source_id("sample-result")
        try:
            client.upload(np.ones((4, 4), np.uint8), "sample-result", chunks=(4, 4))
            SEEN["uploaded"] = {"by": client.token}
        except Exception as exc:  # the second sample: the id exists, uploaded by the first
            try:
                client.describe(sid)
                SEEN["neighbour"] = {"read": True}
            except Exception as refused:
                SEEN["neighbour"] = {"read": False, "why": str(refused), "upload": str(exc), "token": client.token}
        tensor_reference(session)


def test_two_samples_of_one_case_do_not_read_each_others_uploads(plane: RunPlane, tmp_path: Path) -> None:
    case = tensor_case("scope-neighbours")
    result = run_cases([case], Neighbour(), samples=2, out=tmp_path, progress=False, plane=plane)
    assert [s.status for s in result.samples[case.label]] == ["ok", "ok"]
    assert SEEN["neighbour"]["read"] is False and "no array with id" in SEEN["neighbour"]["why"]
    assert SEEN["neighbour"]["token"] != SEEN["uploaded"]["by"]


def test_a_command_gets_a_token_for_its_ids_and_never_the_key(plane: RunPlane, tmp_path: Path) -> None:
    command = parse_subject('command:echo "token=${IMAGEBENCH_TENSOR_TOKEN:-none}"; env | grep -c PLANE_ || true')
    lazy, eager = tensor_case("token-lazy"), make_toy_case("token-eager")
    result = run_cases([lazy, eager], command, out=tmp_path, progress=False, plane=plane)
    out_lazy = (sample_dir(result.run_dir, command.name, lazy, 0) / "stdout.txt").read_text().splitlines()
    out_eager = (sample_dir(result.run_dir, command.name, eager, 0) / "stdout.txt").read_text().splitlines()
    token = out_lazy[0].removeprefix("token=")
    grant = tokens.grant_of(plane.process.read_key, token)
    assert grant is not None and not grant.full and grant.ids == set(plane.fixture_ids(lazy).values())
    assert out_lazy[1] == "0"  # neither the read key nor the upload key is in its environment
    assert out_eager[0] == "token=none"
    # nothing the run wrote holds the run's read key or the upload key
    for path in result.run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert plane.process.read_key.encode() not in data and plane.process.upload_key.encode() not in data, path


def test_the_plane_holds_inputs_only_never_truth(plane: RunPlane, tmp_path: Path) -> None:
    # a case whose truth is a tensor-sized array of its own: only the tensor layer's data is uploaded
    case = make_toy_case("scope-truth", layers=(TENSOR_LAYER,), reference=tensor_reference)
    run_cases([case], Snoop(), samples=2, out=tmp_path, progress=False, plane=plane)
    fixture = case.build()
    client = plane.client
    for sid in client.list():
        value = np.asarray(client.get(sid).compute())
        assert not truth_leaks(dict(fixture.truth), blob=value.tobytes(), array=value), sid
    assert json.dumps(sorted(plane.fixture_ids(case))) == '["image"]'
