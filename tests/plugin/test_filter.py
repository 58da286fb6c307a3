"""The case filter above the case tree, without Qt: which rows a typed text keeps."""

from __future__ import annotations

from imagebench import cases as builtin
from napari_imagebench._browser_model import row_matches
from napari_imagebench._cases import CaseRow
from napari_imagebench._model import BenchModel


def _row(label: str, kind: str = "synthetic", case_class: str = "golden") -> CaseRow:
    namespace, case_id = label.split("/", 1)
    return CaseRow(namespace, case_id, kind, case_class, True, "", "built-in")


def test_a_row_matches_every_word_in_its_label_kind_or_class_ignoring_case() -> None:
    row = _row("segment-nuclei/synthetic-blobs", kind="synthetic", case_class="golden")
    assert row_matches(row, "")
    assert row_matches(row, "   ")
    assert row_matches(row, "NUCLEI")
    assert row_matches(row, "blobs golden")  # each word somewhere
    assert row_matches(row, "synthetic")
    assert not row_matches(row, "drift")
    assert not row_matches(row, "blobs adversarial")  # every word must match
    assert row_matches(_row("drift-correction/beads", kind="curated", case_class="adversarial"), "advers")


def test_the_model_filters_its_rows_in_the_tree_order() -> None:
    model = BenchModel(cases=builtin.all_cases)
    rows = model.rows()
    assert model.filtered("") == rows
    assert {r.namespace for r in model.filtered("segment-nuclei")} == {"segment-nuclei", "segment-nuclei-3d"}
    nuclei = model.filtered("segment-nuclei/")
    assert nuclei and all(r.namespace == "segment-nuclei" for r in nuclei)
    assert [r.label for r in nuclei] == [r.label for r in rows if r.namespace == "segment-nuclei"]
    curated = model.filtered("curated")
    assert curated and all(r.kind == "curated" for r in curated)
    assert {r.label for r in model.filtered("hard-case")} == {r.label for r in rows if r.case_class == "hard-case"}
    assert model.filtered("no such case anywhere") == []
