"""bench-case.json: the format of a case declared in a file, and its errors naming file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagebench.case.declared import CaseDeclaration, DeclarationError, declaration_json, read_declaration

GOOD = {
    "version": 1,
    "skill": "my-skill",
    "case_id": "blobs",
    "prompt": "Segment the nuclei in `nuclei`; leave `labels`, an integer label image.",
    "layers": [{"name": "nuclei", "key": "image"}],
    "leave": [{"name": "labels", "layer": "labels", "like": "nuclei"}],
    "verifier": {"name": "label-image"},
    "tolerance": {"f1_shortfall": 0.2},
    "reference": "my_pkg.solve:reference",
}


def _write(tmp_path: Path, body: dict, skill: str = "my-skill", case_id: str = "blobs") -> Path:
    path = tmp_path / skill / case_id / "bench-case.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(body))
    return path


def test_a_good_declaration_reads_and_writes_back_the_same(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    declared = read_declaration(path)
    assert declared.case_class == "golden" and declared.leave[0].like == "nuclei"
    again = _write(tmp_path / "again", json.loads(declaration_json(declared)))
    assert read_declaration(again) == declared


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": 2}, "version"),
        ({"reference": "not a target"}, "reference"),
        ({"leave": [{"name": "mask", "layer": "labels"}]}, "leave"),  # the prompt never names `mask`
        ({"leave": [{"name": "labels", "like": "nope"}]}, "leave"),
        ({"class": "best"}, "class"),
        ({"tolerance": {"f1_shortfall": "low"}}, "tolerance.f1_shortfall"),
        ({"layers": []}, "layers"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_field_is_named_with_the_file(tmp_path: Path, change: dict, field: str) -> None:
    path = _write(tmp_path, {**GOOD, **change})
    with pytest.raises(DeclarationError) as caught:
        read_declaration(path)
    assert str(path) in str(caught.value) and field in str(caught.value)


def test_the_folders_must_agree_with_the_names(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD, case_id="other")
    with pytest.raises(DeclarationError, match="expected 'my-skill'/'other'"):
        read_declaration(path)


def test_not_json_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    path.write_text("{")
    with pytest.raises(DeclarationError, match="not valid JSON"):
        read_declaration(path)
    assert CaseDeclaration.model_json_schema()["title"] == "CaseDeclaration"
