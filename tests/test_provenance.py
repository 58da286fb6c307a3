"""A curated case's citation travels: ``imagebench show``, the sample's artifact folder
(``summary.json``), and the HTML report; its provenance reaches the report and the folder, never
``show`` (a provenance may state the perturbation a fixture was made with)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from imagebench import cli
from imagebench.cases import all_cases

CURATED = [c for c in all_cases() if c.kind == "curated"]


def test_every_curated_case_names_its_source() -> None:
    assert CURATED
    for case in CURATED:
        source = case.source()
        assert source is not None and source.kind == "curated", case.label
        assert source.citation and source.provenance, f"{case.label}: no citation or provenance in the manifest"


@pytest.mark.parametrize("label", [c.label for c in CURATED])
def test_show_cites_a_curated_case_without_its_provenance(label: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = next(c for c in CURATED if c.label == label).source()
    assert source is not None and source.citation
    assert cli.main(["show", label]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "cite:" in out and " ".join(source.citation.split()) in out
    assert source.provenance not in out


def test_a_run_carries_citation_and_provenance_into_the_sample_folder_and_report(tmp_path: Path) -> None:
    case = CURATED[0]
    source = case.source()
    assert source is not None
    assert cli.main(["run", "-k", case.label, "--subject", "reference", "--out", str(tmp_path), "--quiet"]) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    (summary,) = (run_dir / "reference").glob(f"{case.label}/sample-*/summary.json")
    record = json.loads(summary.read_text())
    assert (record["citation"], record["provenance"]) == (source.citation, source.provenance)
    page = html.unescape((run_dir / "report.html").read_text())
    assert source.citation in page and source.provenance in page
