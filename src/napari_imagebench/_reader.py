"""The reader: open a run folder or a panel's sitting (a review of its artifacts) or a fixture case
folder (its data).

napari offers this reader for three file names only, ``run.json``, ``sitting.json`` and ``case.json`` (see
``napari.yaml``), never for a folder: npe2 offers a reader that accepts folders for *every*
folder whatever its ``filename_patterns`` (npe2 applies them to files only), which made napari
ask which reader to use for each plain folder of TIFFs or ``.zarr`` folder dropped on it. So a
bench folder is opened through the record that makes it one:

- ``run-*/run.json``: the PNG artifacts of every sample its journal vouches for, as image layers
  sharing one contrast range, each titled ``<case label> s<n> [<status>]: <artifact>`` with its
  verdict in its metadata; when a viewer window is active they are laid out in its grid mode,
  contrast linked, and each sample's verdict is said in a notification (a tampered or
  unjournaled sample is named in a warning, not shown).
- ``sitting-*/sitting.json``: every subject's run of the bench panel's sitting, as a run folder's
  review, each pane's title starting with its subject; the sitting's own checks (a run dropped,
  added or moved in from another sitting) are named in a warning.
- ``<tree>/<namespace>/<case_id>/case.json``: the case's *data* read from the tree (checked
  against the tree's manifest) and shown as the case presents it; when no case in this suite
  has that label, each data key is shown as an image. Truth is never read.

:func:`napari_get_reader` also takes the folder itself (what a direct call or a script passes)
and declines (returns None) what is not a bench folder: a ``case.json`` whose tree has no
``manifest.json`` listing that case, a ``run.json`` that is not a run record outside a
``run-<UTC stamp>`` folder.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from napari_imagebench._artifacts import CASE_DATA_KEY
from napari_imagebench._layers import LayerData, fixture_layer_data, present_fixture

ReaderFunction = Callable[[Any], list[LayerData]]

RUN_RECORD = "run.json"
CASE_LAYOUT = "case.json"
SITTING_RECORD = "sitting.json"  # imagebench.runs.sitting.SITTING_RECORD


def _one_path(path: Any) -> Path | None:
    if isinstance(path, (list, tuple)):
        if len(path) != 1:
            return None
        path = path[0]
    try:
        return Path(path)
    except TypeError:
        return None


def _bench_folder(path: Any, record: str) -> Path | None:
    """The folder ``path`` names through ``record`` (the folder holding it, or the record file
    itself), or None when ``path`` is neither."""
    given = _one_path(path)
    if given is None:
        return None
    if given.is_dir():
        return given if (given / record).is_file() else None
    if given.name == record and given.is_file():
        return given.parent
    return None


def run_folder_of(path: Any) -> Path | None:
    """The run folder ``path`` names (the folder or its ``run.json``), or None when it is not one:
    its ``run.json`` must be a run record, unless the folder bears a run folder's name
    (``run-<UTC stamp>``), where a broken record is then reported when read, not passed over."""
    from imagebench.runs.layout import RunFolderError, is_run_folder_name
    from imagebench.runs.reader import read_record_of_run

    folder = _bench_folder(path, RUN_RECORD)
    if folder is None:
        return None
    if is_run_folder_name(folder.name):
        return folder
    try:
        read_record_of_run(folder)
    except RunFolderError:
        return None  # somebody else's run.json
    return folder


def case_folder_of(path: Any) -> Path | None:
    """The fixture case folder ``path`` names (the folder or its ``case.json``), or None when it is
    not one: ``<tree>/<namespace>/<case_id>`` whose tree's ``manifest.json`` lists
    ``<namespace>/<case_id>``. A manifest that is missing, not a fixture manifest, or silent about
    the case means the ``case.json`` is somebody else's."""
    from imagebench.fixtures.fixture import FixtureError
    from imagebench.fixtures.tree import MANIFEST, load_manifest

    folder = _bench_folder(path, CASE_LAYOUT)
    if folder is None:
        return None
    folder = folder.resolve()
    tree = folder.parent.parent
    if not (tree / MANIFEST).is_file():
        return None
    try:
        manifest = load_manifest(tree)
    except FixtureError:
        return None
    if manifest.entry(folder.parent.name, folder.name) is None:
        return None
    return folder


def sitting_folder_of(path: Any) -> Path | None:
    """The bench panel's sitting ``path`` names (the folder or its ``sitting.json``), or None when
    its ``sitting.json`` is not a sitting record (somebody else's)."""
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.sitting import read_sitting_record

    folder = _bench_folder(path, SITTING_RECORD)
    if folder is None:
        return None
    try:
        read_sitting_record(folder)
    except RunFolderError:
        return None
    return folder


def napari_get_reader(path: Any) -> ReaderFunction | None:
    """A reader for a run folder, a panel's sitting or a fixture case folder (or its ``run.json``,
    ``sitting.json`` / ``case.json``); None for anything else."""
    if run_folder_of(path) is not None:
        return run_folder_layers
    if sitting_folder_of(path) is not None:
        return sitting_layers
    if case_folder_of(path) is not None:
        return read_case_folder
    return None


def run_folder_layers(path: Any) -> list[LayerData]:
    """The artifacts of every sample whose summary its run's journal vouches for, titled with the
    case, the sample and its verdict; each sample left out (a summary changed or added after the
    run) is named in a warning. With a viewer window active, the panes are arranged in its grid
    mode once it has added them, and the verdicts are said in a notification
    (:func:`napari_imagebench._artifacts.review_on_arrival`)."""
    from napari_imagebench._artifacts import (
        FOLDER_NOTE,
        review_layer_data,
        review_on_arrival,
        run_samples,
        verdict_lines,
    )

    folder = run_folder_of(path)
    if folder is None:
        raise ValueError(f"{path}: not a run folder (run-<UTC timestamp>/ holding run.json) nor its run.json")
    samples, excluded = run_samples(folder)
    said = [e for e in excluded if e.startswith(FOLDER_NOTE)]
    left = [e for e in excluded if not e.startswith(FOLDER_NOTE)]
    if said:
        warnings.warn(f"{folder}: does not check out: {'; '.join(e[len(FOLDER_NOTE):] for e in said[:5])}", stacklevel=2)
    if left:
        listed = "; ".join(left[:5]) + (f"; and {len(left) - 5} more" if len(left) > 5 else "")
        warnings.warn(f"{folder}: {len(left)} sample(s) not shown: {listed}", stacklevel=2)
    datas = review_layer_data(samples)
    subjects = sorted({s.subject for s in samples})
    lines = verdict_lines(samples)
    notice = f"{folder.name} ({', '.join(subjects) or 'no samples'}): " + ("; ".join(lines) or "no sample to show")
    review_on_arrival(datas, notice)
    return datas


def sitting_layers(path: Any) -> list[LayerData]:
    """Every subject's run of a panel's sitting, as :func:`run_folder_layers` shows one run, each
    pane titled ``<subject> · <case label> s<n> [<status>]: <artifact>``; what the sitting's own
    journal says against it (a run dropped, added or moved in) and each run's samples left out
    are named in a warning."""
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.sitting import read_sitting
    from napari_imagebench._artifacts import (
        FOLDER_NOTE,
        review_layer_data,
        review_on_arrival,
        run_samples,
        verdict_lines,
    )

    folder = sitting_folder_of(path)
    if folder is None:
        raise ValueError(f"{path}: not a bench panel's sitting (sitting-<UTC timestamp>/ holding sitting.json) nor its sitting.json")
    try:
        contents = read_sitting(folder)
    except RunFolderError as exc:
        raise ValueError(str(exc)) from None
    said = list(contents.integrity)
    samples, left = [], []
    for subject, run in contents.runs.items():
        shown, excluded = run_samples(run.run_dir)
        samples += shown
        left += [f"{subject}: {e[len(FOLDER_NOTE):] if e.startswith(FOLDER_NOTE) else e}" for e in excluded]
    if said:
        warnings.warn(f"{folder}: does not check out: {'; '.join(said[:5])}", stacklevel=2)
    if left:
        listed = "; ".join(left[:5]) + (f"; and {len(left) - 5} more" if len(left) > 5 else "")
        warnings.warn(f"{folder}: {len(left)} sample(s) or run(s) not shown in full: {listed}", stacklevel=2)
    datas = review_layer_data(samples, with_subject=True)
    lines = verdict_lines(samples, with_subject=True)
    review_on_arrival(datas, f"{folder.name}: " + ("; ".join(lines) or "no sample to show"))
    return datas


def read_case_folder(path: Any) -> list[LayerData]:
    """The data layers of the fixture case folder ``path`` (``<tree>/<namespace>/<case_id>``, or
    its ``case.json``)."""
    from imagebench.case.model import Layer
    from imagebench.fixtures.tree import load_fixture

    folder = case_folder_of(path)
    if folder is None:
        raise ValueError(
            f"{path}: not a fixture case folder (<tree>/<namespace>/<case_id>/ holding case.json, "
            "listed in <tree>/manifest.json) nor its case.json"
        )
    namespace, case_id, root = folder.parent.name, folder.name, folder.parent.parent
    fixture = load_fixture(root, namespace, case_id)  # FixtureError names the file and field
    label = f"{namespace}/{case_id}"
    case = _known_case(label)
    if case is not None:
        datas = present_fixture(case, fixture)  # a tensor layer through the data plane, as a subject sees it
    else:
        datas = fixture_layer_data([Layer(name=key, key=key, kind="image") for key in fixture.data], fixture.data)
    for _, kwargs, _ in datas:  # whose data it is: the panel flags a case whose truth it may be
        kwargs.setdefault("metadata", {})[CASE_DATA_KEY] = label
    return datas


def _known_case(label: str) -> Any:
    from imagebench.cases import all_cases

    for case in all_cases():
        if case.label == label:
            return case
    return None
