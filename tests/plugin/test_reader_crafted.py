"""The napari reader and a hand-made run folder (found by a red team): a run folder whose journal
carries no MAC at all (the summaries rewritten, their digests recomputed, the MACs stripped, a
fresh run id so the state folder anchors nothing of it) shows no sample titled ``[ok]``, as the
Compare tab and ``imagebench compare`` refuse it; and a pane is read only from a plain file name
in its sample's folder, never from a path the summary names elsewhere."""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
from helpers import make_toy_case

from imagebench.executor import run_cases
from imagebench.subjects import NopSubject
from napari_imagebench._compare_model import CompareModel
from napari_imagebench._reader import run_folder_layers


def _crafted(tmp_path: Path) -> tuple[Path, Path]:
    import imageio.v3 as iio

    run = run_cases([make_toy_case()], NopSubject(), out=tmp_path / "real", progress=False).run_dir
    fake = tmp_path / "crafted" / run.name
    shutil.copytree(run, fake)
    record = json.loads((fake / "run.json").read_text())
    record["run_id"] += "-crafted"  # no anchor of this run in the state folder
    (fake / "run.json").write_text(json.dumps(record))
    (fake / "receipt.json").unlink()
    outside = tmp_path / "elsewhere" / "secret.png"
    outside.parent.mkdir()
    iio.imwrite(outside, (np.eye(32) * 255).astype(np.uint8))
    sample = next(fake.glob("*/toy/rectangle/sample-0/summary.json"))
    raw = json.loads(sample.read_text())
    raw.update(status="ok", reason="", artifacts=[str(outside)])
    sample.write_text(json.dumps(raw))
    lines = []
    for line in (fake / "journal.jsonl").read_text().splitlines():
        entry = json.loads(line)
        entry.pop("mac", None)
        entry.pop("key", None)
        if entry.get("event") == "unit":
            entry.update(status="ok", sha256=hashlib.sha256(sample.read_bytes()).hexdigest())
        lines.append(json.dumps(entry))
    (fake / "journal.jsonl").write_text("\n".join(lines) + "\n")
    case_summary = next(fake.glob("*/toy/rectangle/summary.json"))
    raw = json.loads(case_summary.read_text())
    raw.update(counts={"ok": 1}, passed=1)
    case_summary.write_text(json.dumps(raw))
    return fake, outside


def test_the_reader_shows_no_ok_of_an_unsigned_hand_made_run_that_compare_refuses(tmp_path: Path) -> None:
    fake, _ = _crafted(tmp_path)
    assert CompareModel().set_run("A", fake) is None  # the Compare tab refuses it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layers = run_folder_layers(fake / "run.json")
    shown = [kwargs["name"] for _, kwargs, _ in layers]
    assert not any("[ok]" in name for name in shown), f"a hand-made run's forged ok sample is shown: {shown}"


def test_the_reader_never_follows_an_artifact_path_outside_the_run_folder(tmp_path: Path) -> None:
    fake, outside = _crafted(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layers = run_folder_layers(fake / "run.json")
    read_from = [Path(kwargs["metadata"]["imagebench_artifact"]) for _, kwargs, _ in layers]
    assert all(fake in p.resolve().parents for p in read_from), f"read from outside the run folder: {read_from}"
