"""What a warm run no longer imports: the harness uploads a fixture file to the data plane without
dask (and the xarray, pandas and distributed it pulls in), and a plane client never imports the
server's zarr store. Each checked in a fresh interpreter, with the upload's content checked too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import imagebench

pytest.importorskip("pyarrow.flight")
pytest.importorskip("zarr")

UPLOAD = """
import json, sys
from dataclasses import replace
import numpy as np
from helpers import make_toy_case
from imagebench.case.model import Layer
from imagebench.fixtures.fixture import Fixture
from imagebench.fixtures.refs import FileRef
from imagebench.plane import RunPlane

layer = Layer("image", "image", "image", presentation="tensor", chunks=(16, 16), dim_labels=("y", "x"))
case = replace(make_toy_case("file-backed"), layers=(layer,))
ref = FileRef(sys.argv[1])
fixture = Fixture(provenance="test", data={"image": ref}, truth={}, skill_id="toy", case_id="file-backed")
with RunPlane.start() as plane:
    ids = plane.upload_fixture(case, fixture)
    client = plane.client
    stored = np.concatenate([np.concatenate([client.read_chunk(ids["image"], (i, j)) for j in range(3)], axis=1)
                             for i in range(3)], axis=0)
    same = bool(np.array_equal(stored, np.load(sys.argv[1])))
    overwritten = plane.overwritten(case)
loaded = sorted(m for m in ("dask", "dask.array", "xarray", "pandas", "distributed", "zarr") if m in sys.modules)
print(json.dumps({"same": same, "loaded": loaded, "overwritten": overwritten, "mmapped": ref.mmapped}))
"""


def fresh(code: str, *args: str) -> dict:
    src = Path(imagebench.__file__).resolve().parents[1]
    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(tests)]), "IMAGEBENCH_CACHE": "off"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=180, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_file_fixture_reaches_the_plane_without_dask(tmp_path: Path) -> None:
    path = tmp_path / "image.npy"
    np.save(path, np.random.default_rng(3).random((48, 48)).astype(np.float32))
    found = fresh(UPLOAD, str(path))
    assert found["mmapped"] and found["same"], found
    assert found["overwritten"] == []
    assert found["loaded"] == [], f"the upload imported {found['loaded']}"


def test_a_plane_client_does_not_import_the_server() -> None:
    found = fresh(
        """
        import json, sys
        import imagebench.plane.client, imagebench.plane.process
        print(json.dumps({"loaded": sorted(m for m in ("zarr", "imagebench.plane.server", "dask") if m in sys.modules)}))
        """
    )
    assert found["loaded"] == []
