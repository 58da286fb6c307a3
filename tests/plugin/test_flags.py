"""What a person at the panel has seen is remembered for the sitting and read over a case's kin
(found by a red team: a second Load forgot it; another case's data or artifacts that are the
loaded case's truth went unflagged; a served agent's layers did not count as seen results).

Qt-free: driven through ``napari_imagebench._model.BenchModel`` as the panel drives it; a layer the
reader puts on the viewer reaches the model as the panel's inserted event hands it
(``BenchModel.layer_arrived``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import make_toy_case

from imagebench.records import SampleSummary, read_record
from napari_imagebench._model import INTERACTIVE, BenchModel

TOY = "toy/rectangle"


def _flags(row) -> list[str]:  # noqa: ANN001 - a ResultRow
    return read_record(row.sample_dir / "summary.json", SampleSummary).flags


def _toy_answer(model: BenchModel) -> dict:
    image = np.asarray(model.loaded.session.namespace["image"])  # type: ignore[union-attr]
    return {"mask": image > 0.5, "area": int((image > 0.5).sum())}


def test_loading_the_same_case_again_remembers_what_the_person_saw(tmp_path: Path) -> None:
    """Load, run the reference, score it, View artifacts (the truth mask) and Show the truth; then
    Load the same case again (same public seed, same truth): the next sample carries every flag."""
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    model.load(TOY)
    job = model.prepare_run("reference")
    model.finish_run(job, job.work())
    reference = model.score("reference")
    model.artifacts_shown(reference)  # View artifacts: truth.png among them
    model.truth_shown(reference)  # Show the truth: the provenance
    assert model.loaded is not None and {"saw-artifacts", "saw-truth", "saw-results-reference"} <= model.loaded.seen
    model.load(TOY)  # Load again: nothing un-sees the truth, the fixture is the same one
    row = model.score(INTERACTIVE, console=_toy_answer(model))
    assert {"saw-artifacts", "saw-truth", "saw-results-reference"} <= set(_flags(row)), _flags(row)


def test_another_cases_data_that_is_the_loaded_cases_truth_flags_it(tmp_path: Path) -> None:
    """segmentation-qc-metrics/dsb2018-watershed presents as DATA (its ``annotation`` layer) the very
    file that is segment-nuclei/dsb2018's TRUTH (mask2d.tif). With dsb2018 loaded, the reader opens
    the other case's case.json (File > Open), its annotation goes on the viewer: a person who leaves
    it as ``labels`` is flagged ``saw-truth``."""
    from imagebench.cases import get_case
    from imagebench.fixtures.tree import MANIFEST
    from napari_imagebench._reader import napari_get_reader

    label = "segment-nuclei/dsb2018"
    model = BenchModel(cases=lambda: [get_case(label)], outcome_root=tmp_path / "out")
    model.load(label)
    import imagebench

    tree = Path(imagebench.__file__).parent / "data" / "fixtures"
    assert (tree / MANIFEST).is_file()
    other = tree / "segmentation-qc-metrics" / "dsb2018-watershed" / "case.json"
    reader = napari_get_reader(str(other))
    assert reader is not None
    datas = reader(str(other))
    assert model.workbench.flags() == set()  # read, not yet on the viewer
    for _, kwargs, _ in datas:
        model.layer_arrived(kwargs["metadata"])  # napari adds them: the panel hears each
    layers = {kwargs["name"]: data for data, kwargs, _ in datas}
    row = model.score(INTERACTIVE, console={"labels": np.asarray(layers["annotation"])})
    assert row.status == "ok" and _flags(row) == ["saw-truth"]
    assert model.messages[-2].level == "warning" and "flagged saw-truth" in model.messages[-2].text


def test_an_agents_layers_on_the_viewer_flag_saw_results(tmp_path: Path) -> None:
    """A served agent's answer layers are drawn on the viewer as it works (``mcp:<client>:<name>``)
    and its sample joins the results: as a Run's results, they flag ``saw-results-<subject>``."""
    pytest.importorskip("mcp")
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    model.load(TOY)
    drawn: list[str] = []
    serve = model.serve_agent(on_layer=lambda layer: drawn.append(layer.name))
    answer = _toy_answer(model)
    serve.agent.add_layer("mask", "labels", data=answer["mask"].astype(int).tolist())
    serve.agent.set_answer(answer["area"], name="area")
    assert drawn == ["mask"]  # the panel draws it on the viewer as mcp:<client>:mask
    agent = model.score_agent()
    assert agent.status == "ok"
    row = model.score(INTERACTIVE, console=answer)
    assert any(f.startswith("saw-results-") for f in _flags(row)), _flags(row)


def test_the_artifacts_of_a_case_sharing_a_file_flag_its_kin(tmp_path: Path) -> None:
    """dsb2018 and dsb2018-dim score against one mask: the artifacts of the one seen, the other is flagged."""
    from imagebench.cases import get_case

    first, second = "segment-nuclei/dsb2018", "segment-nuclei/dsb2018-dim"
    model = BenchModel(cases=lambda: [get_case(first), get_case(second)], outcome_root=tmp_path / "out")
    assert second in model.workbench.kin(first) and first in model.workbench.kin(second)
    model.load(first)
    job = model.prepare_run("reference")
    model.finish_run(job, job.work())
    model.artifacts_shown(model.score("reference"))
    model.load(second)
    assert model.workbench.flags() == {"saw-artifacts", "saw-results-reference"}
    # a case sharing no file with them knows nothing of it
    assert model.workbench.kin(TOY) == {TOY}
