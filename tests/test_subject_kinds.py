"""Adding a subject kind is one class and its registration (issue 24).

The toy kind below lives only in this test module. It runs through the serial loop, the dask
workers (which import this module to register it before they parse its spec), the receipt, the
run record and the panel's model, and no other module names it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import make_toy_case, toy_reference

from imagebench.executor import run_cases
from imagebench.records import RunRecord, read_record
from imagebench.subjects import (
    SubjectError,
    SubjectKind,
    UnitContext,
    describe,
    kinds,
    parse_subject,
    spec_of,
    subject_kind,
    valid_forms,
)


@subject_kind
@dataclass(frozen=True)
class NotedReference(SubjectKind):
    """The toy kind: the case's reference, under a name carrying a note."""

    prefix = "noted:"
    forms = (("noted:<word>", "a test's toy kind: the reference solution, filed under noted-<word>"),)
    note: str

    @classmethod
    def parse(cls, spec: str, *, sandbox: Any, isolate: bool, mcp: bool) -> NotedReference:
        note = spec[len(cls.prefix) :]
        if not note.isalnum():
            raise SubjectError(f"subject {spec!r}: the note must be one word of letters and digits")
        return cls(note=note)

    def spec(self) -> str:
        return f"{self.prefix}{self.note}"

    @property
    def name(self) -> str:
        return f"noted-{self.note}"

    def describe(self) -> dict[str, Any]:
        return {"form": "noted", "note": self.note}

    def bind(self, case: Any, context: UnitContext) -> Callable[[Any], None]:
        return case.reference

    def __call__(self, session: Any) -> None:
        raise SubjectError("the noted subject works through bind(case, context)")


def test_the_kind_parses_and_lists_its_form() -> None:
    assert NotedReference in kinds()
    subject = parse_subject("noted:abc")
    assert subject == NotedReference("abc") and spec_of(subject) == "noted:abc"
    assert "noted:<word>" in valid_forms()
    with pytest.raises(SubjectError, match="one word"):
        parse_subject("noted:a b")
    with pytest.raises(SubjectError, match="--isolate applies to python: subjects only"):
        parse_subject("noted:abc", isolate=True)


def test_the_kind_runs_serially_with_its_own_record_and_receipt(tmp_path: Path) -> None:
    result = run_cases([make_toy_case()], parse_subject("noted:serial"), out=tmp_path, progress=False, samples=2)
    assert [s.status for s in result.samples["toy/rectangle"]] == ["ok", "ok"]
    assert (result.run_dir / "noted-serial" / "toy" / "rectangle" / "sample-1" / "summary.json").is_file()
    record = read_record(result.run_dir / "run.json", RunRecord)
    assert record.subject == "noted-serial" and record.extra["subject_spec"] == "noted:serial"
    receipt = json.loads((result.run_dir / "receipt.json").read_text())
    identity = receipt["subject"].pop("identity")
    assert receipt["subject"] == {"form": "noted", "note": "serial", "sandbox": "in-process"}
    # the kind knows nothing of its code beyond its spec: the default identity is its kind and spec
    assert identity == record.extra["subject_identity"] and identity["name"] == "noted-serial"
    assert identity["parts"] == {"kind": "noted", "spec_sha256": hashlib.sha256(b"noted:serial").hexdigest()}
    assert describe("noted:x") == {"form": "noted"}


def test_the_kind_runs_on_dask_workers(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    result = run_cases([make_toy_case()], parse_subject("noted:dask"), out=tmp_path, progress=False, samples=2, workers=2)
    assert [s.status for s in result.samples["toy/rectangle"]] == ["ok", "ok"]
    assert {s.subject for s in result.samples["toy/rectangle"]} == {"noted-dask"}


def test_the_kind_runs_in_the_panels_model(tmp_path: Path) -> None:
    from napari_imagebench._model import BenchModel

    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    model.load("toy/rectangle")
    spec = model.add_subject("noted:panel")
    job = model.prepare_run(spec)
    model.finish_run(job, job.work())
    row = model.score(spec)
    assert row.status == "ok", row.reason
    assert "noted-panel" in str(row.sample_dir)


def test_the_toy_reference_is_the_one_the_toy_case_declares() -> None:
    assert make_toy_case().reference is toy_reference
