"""The reader: open a fixture case folder (its data layers only) or a run folder (its artifacts).

- ``<tree>/<namespace>/<case_id>/`` holding ``case.json``: the case's *data* is read from the
  tree (checked against the tree's manifest) and shown as the case presents it; when no case
  in this suite has that label, each data key is shown as an image. Truth is never read.
- ``run-*/`` holding ``run.json``: the PNG artifacts of every sample its journal vouches for, as
  image layers sharing one contrast range (a tampered or unjournaled sample is named, not shown).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from napari_imagebench._layers import LayerData, fixture_layer_data, present_fixture

ReaderFunction = Callable[[Any], list[LayerData]]


def _as_dir(path: Any) -> Path | None:
    if isinstance(path, (list, tuple)):
        if len(path) != 1:
            return None
        path = path[0]
    try:
        folder = Path(path)
    except TypeError:
        return None
    return folder if folder.is_dir() else None


def napari_get_reader(path: Any) -> ReaderFunction | None:
    """A reader for a fixture case folder or a run folder; None for anything else."""
    folder = _as_dir(path)
    if folder is None:
        return None
    if (folder / "run.json").is_file():
        return run_folder_layers
    if (folder / "case.json").is_file():
        return read_case_folder
    return None


def run_folder_layers(path: Any) -> list[LayerData]:
    """The artifacts of every sample whose summary its run's journal vouches for; each sample left
    out (a summary changed or added after the run) is named in a warning."""
    from napari_imagebench._artifacts import artifact_layer_data, run_pngs

    folder = _as_dir(path)
    if folder is None:
        raise ValueError(f"{path}: not a run folder")
    pngs, excluded = run_pngs(folder)
    if excluded:
        listed = "; ".join(excluded[:5]) + (f"; and {len(excluded) - 5} more" if len(excluded) > 5 else "")
        warnings.warn(f"{folder}: {len(excluded)} sample(s) not shown: {listed}", stacklevel=2)
    return artifact_layer_data(pngs, relative_to=folder)


def read_case_folder(path: Any) -> list[LayerData]:
    """The data layers of the fixture case folder ``path`` (``<tree>/<namespace>/<case_id>``)."""
    from imagebench.case.model import Layer
    from imagebench.fixtures.tree import load_fixture

    folder = _as_dir(path)
    if folder is None:
        raise ValueError(f"{path}: not a fixture case folder")
    folder = folder.resolve()
    namespace, case_id, root = folder.parent.name, folder.name, folder.parent.parent
    fixture = load_fixture(root, namespace, case_id)  # FixtureError names the file and field
    case = _known_case(f"{namespace}/{case_id}")
    if case is not None:
        return present_fixture(case, fixture)  # a tensor layer through the data plane, as a subject sees it
    return fixture_layer_data([Layer(name=key, key=key, kind="image") for key in fixture.data], fixture.data)


def _known_case(label: str) -> Any:
    from imagebench.cases import all_cases

    for case in all_cases():
        if case.label == label:
            return case
    return None
