"""Test helpers: a tiny toy case (find a bright rectangle), fixture specs that fail on purpose,
and the checks many tests share. Import them as ``from helpers import make_toy_case`` (the
``tests`` folder is on ``sys.path``: pyproject.toml's ``[tool.pytest.ini_options] pythonpath``);
``conftest.py`` holds only the pytest fixtures and the test run's environment.

The toy case presents one image layer ``image`` and asks for two leavings: ``mask`` (an array,
the rectangle) and ``area`` (a scalar, its pixel count). Its truth holds the mask and a random
``secret`` array that has no counterpart in the data, so a leak of truth is easy to detect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from imagebench.case.model import Case, Collect, Layer
from imagebench.fixtures.fixture import (
    Attempt,
    Fixture,
    Metric,
    Outcome,
    read_array,
    read_scalar,
)
from imagebench.fixtures.specs import Procedural

TOY_TOLERANCE = {"mask_error": 0.05, "area_error": 0.05}
TOY_TASK = (
    "Find the bright rectangle in `image`. Leave its boolean mask as `mask` and its area in pixels as `area`."
)


def toy_fixture(seed: int = 0, size: int = 24) -> Fixture:
    rng = np.random.default_rng(seed)
    mask = np.zeros((size, size), dtype=bool)
    r, c = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    mask[r : r + 9, c : c + 11] = True
    image = (mask.astype(np.float32) + rng.normal(0.0, 0.05, mask.shape)).astype(np.float32)
    return Fixture(
        provenance=f"toy rectangle, seed {seed}",
        data={"image": image},
        truth={"mask": mask, "secret": rng.random((13, 7))},
        about="a bright rectangle on a dark background",
    )


def toy_verify(fixture: Fixture, attempt: Attempt) -> Outcome:
    tol = fixture.tolerance
    truth = np.asarray(fixture.truth["mask"]).astype(bool)
    metrics: list[Metric] = []
    arr, why = read_array(attempt, "mask", shape=truth.shape)
    artifacts: dict[str, Any] = {}
    if arr is None:
        metrics.append(Metric.missing("mask_error", tol["mask_error"], why or "no mask"))
    else:
        got = arr != 0
        union = np.logical_or(got, truth).sum()
        iou = np.logical_and(got, truth).sum() / union if union else 1.0
        metrics.append(Metric("mask_error", 1.0 - float(iou), tol["mask_error"]))
        artifacts = {"mask": got.astype(np.float32), "truth": truth.astype(np.float32)}
    area, why = read_scalar(attempt, "area")
    if area is None:
        metrics.append(Metric.missing("area_error", tol["area_error"], why or "no area", unit="rel"))
    else:
        true_area = float(truth.sum())
        metrics.append(Metric("area_error", abs(float(area) - true_area) / true_area, tol["area_error"], unit="rel"))
    return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, artifacts=artifacts)


class ToyAcrossThree:
    """The toy's verifier judged across samples, as a bundle's RerunVerifier is: consistent only
    over 3 samples."""

    def __call__(self, fixture: Any, attempt: Any) -> Any:
        return toy_verify(fixture, attempt)

    def across_samples(self, samples: Any) -> dict[str, Any]:
        return {"consistent": len(samples) >= 3, "required": 3, "reason": f"needs 3 samples; {len(samples)} ran"}


def toy_reference(session: Any) -> None:
    mask = np.asarray(session.namespace["image"]) > 0.5
    session.namespace["mask"] = mask
    session.namespace["area"] = int(mask.sum())


@dataclass(frozen=True)
class UnavailableSpec:
    """A curated-style spec that is never available here."""

    reason: str = "the toy tree is not on this machine"
    tolerance: dict[str, float] = field(default_factory=lambda: dict(TOY_TOLERANCE))
    kind: str = "curated"

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]:
        return False, self.reason

    def build(self, skill_id: str, case_id: str) -> Fixture:
        raise AssertionError("an unavailable fixture must never be built")


@dataclass
class CountingSpec:
    """A synthetic spec that counts its builds (and can be told to fail)."""

    fail: bool = False
    builds: int = 0
    tolerance: dict[str, float] = field(default_factory=lambda: dict(TOY_TOLERANCE))
    kind: str = "synthetic"
    seed: int = 0

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]:
        return True, ""

    def build(self, skill_id: str, case_id: str) -> Fixture:
        self.builds += 1
        if self.fail:
            raise RuntimeError("toy builder exploded")
        from dataclasses import replace

        fx = toy_fixture(self.seed)
        return replace(fx, skill_id=skill_id, case_id=case_id, tolerance=dict(self.tolerance))


def make_toy_case(
    case_id: str = "rectangle",
    *,
    namespace: str = "toy",
    spec: Any = None,
    reference: Callable[[Any], None] | None = toy_reference,
    verify: Callable[[Fixture, Attempt], Outcome] = toy_verify,
    layers: tuple[Layer, ...] | None = None,
    case_class: str = "golden",
    timeout_s: float = 30.0,
    seed: int = 0,
) -> Case:
    return Case(
        case_id=case_id,
        namespace=namespace,
        task=TOY_TASK,
        persona="You are a careful image analyst.",
        fixture=spec if spec is not None else Procedural(toy_fixture, seed=seed, tolerance=dict(TOY_TOLERANCE)),
        layers=layers if layers is not None else (Layer("image", "image", "image"),),
        collect=(Collect("mask", "array", "the rectangle"), Collect("area", "scalar", "its area in pixels")),
        verify=verify,
        reference=reference,
        case_class=case_class,  # type: ignore[arg-type]
        timeout_s=timeout_s,
    )


def truth_leaks(truth: dict[str, Any], blob: bytes | None = None, array: Any = None) -> list[str]:
    """Which truth entries appear in ``blob`` (raw bytes) or equal ``array``; empty when none."""
    leaks = []
    for key, value in truth.items():
        t = np.asarray(value)
        forms = [t] + ([t.astype(np.uint8)] if t.dtype == bool else [])
        if blob is not None:
            leaks += [f"{key} (bytes as {f.dtype})" for f in forms if f.nbytes >= 16 and f.tobytes() in blob]
        if array is not None:
            a = np.asarray(array)
            if a.shape == t.shape and np.array_equal(a, t):
                leaks.append(f"{key} (array)")
    return sorted(set(leaks))


def build_case(case: Case, seed: int | None = None, **params: Any) -> Fixture:
    """Build ``case``'s procedural fixture, at another ``seed`` or with other builder ``params``."""
    spec = case.fixture
    assert isinstance(spec, Procedural)
    if seed is not None or params:
        spec = replace(spec, seed=spec.seed if seed is None else seed, params={**spec.params, **params})
    return spec.build(case.namespace, case.case_id)


def solve_case(case: Case, fixture: Fixture, solver: Callable[[Any], None]) -> Outcome:
    """Open a session on ``fixture``, let ``solver`` work it, and verify what it left."""
    from imagebench.case.session import collect_attempt, open_session

    session = open_session(case, fixture)
    solver(session)
    return case.verify(fixture, collect_attempt(case, "test", session.lookup))


def build_tree(root: Path) -> Path:
    """A curated toy case the toy reference solves: every pixel is bright, the mask is all ones."""
    from imagebench.fixtures import tree

    folder = root / "seg" / "tiny"
    folder.mkdir(parents=True)
    np.save(folder / "image.npy", 1.0 + 0.01 * np.arange(24, dtype=np.float32).reshape(4, 6))
    np.save(folder / "held_out.npy", np.ones((4, 6), dtype=np.uint8))
    tree.write_case_layout(root, "seg", "tiny", about="tiny", data={"image": "image.npy"}, truth={"mask": "held_out.npy"})
    tree.write_manifest_entry(root, "seg", "tiny", provenance="made in a test", citation="the test suite")
    return folder


def resign_run(
    run_dir: Path,
    *,
    drop: set[tuple[str, int]] = frozenset(),  # type: ignore[assignment]
    unjournal: set[tuple[str, int]] = frozenset(),  # type: ignore[assignment]
    briefs: bool = True,
) -> None:
    """Sign a run folder's journal again over its ``run.json`` as it is now: what the harness would
    have written had the run been started with this ``run.json`` and left these summaries (a test
    that makes two runs differ in a recorded field, and means an honest run, not a forged one): each
    unit line takes its summary's digest and status again; the units in ``drop`` lose their line and
    their summary (a sample the run never wrote); the units in ``unjournal`` lose only their line,
    and the run its last ``end`` line (a run killed between a summary and its line). A unit line's
    brief is taken from its summary again too, unless ``briefs`` is False (a key holder signing a
    brief that its summary contradicts). Only a holder of the journal key can do this: the
    test's state folder is its own."""
    import hashlib
    import json

    from imagebench.records import RunRecord, read_record
    from imagebench.runs.journal import ANCHORS_DIR, JOURNAL_NAME, Journal, JournalEntry, record_fields
    from imagebench.runs.receipt import anchor_receipt
    from imagebench.state import state_root

    record = read_record(run_dir / "run.json", RunRecord)
    path = run_dir / JOURNAL_NAME
    entries = [JournalEntry.model_validate_json(line) for line in path.read_bytes().splitlines() if line.strip()]
    for old in (state_root() / ANCHORS_DIR).glob(f"{record.run_id}-*.json"):
        old.unlink()
    path.unlink()
    last_end = max((i for i, e in enumerate(entries) if e.event == "end"), default=None)
    with Journal.open(run_dir) as journal:
        for i, entry in enumerate(entries):
            fields = entry.model_dump(exclude={"schema_version", "event", "time", "pid", "key", "mac"}, exclude_none=True)
            if entry.event == "unit" and entry.summary:
                summary = run_dir / entry.summary
                if (entry.label, entry.sample) in drop:
                    summary.unlink(missing_ok=True)
                    continue
                if (entry.label, entry.sample) in unjournal:
                    continue
                if summary.is_file():
                    data = summary.read_bytes()
                    fields["sha256"] = hashlib.sha256(data).hexdigest()
                    fields["status"] = json.loads(data).get("status", fields.get("status"))
                    if briefs and "brief" in fields:
                        from imagebench.records import RecordError, SampleSummary, parse_record
                        from imagebench.runs.journal import brief_of

                        try:
                            fields["brief"] = brief_of(parse_record(summary, data, SampleSummary), data).model_dump()
                        except RecordError:
                            pass  # not a summary: its line keeps the brief it had
            if entry.event == "case" and entry.summary:  # a case's summary: its digest as it is now
                summary = run_dir / entry.summary
                if not summary.is_file():
                    continue
                fields["sha256"] = hashlib.sha256(summary.read_bytes()).hexdigest()
            detail = dict(fields.pop("detail", None) or {})
            if entry.event == "start" and "record" in detail:
                keys = tuple(k for k in detail["record"] if "." not in k)
                extra = tuple(k[6:] for k in detail["record"] if k.startswith("extra."))
                detail["record"] = record_fields(record, keys, extra if "mode" in detail and "panel" in str(detail["mode"]) else True)
            if i == last_end:
                if unjournal:
                    continue
                detail["complete"] = record.complete
            journal.append(entry.event, **fields, **({"detail": detail} if detail or entry.detail is not None else {}))
        anchor = journal.anchor()
    if (run_dir / "receipt.json").is_file():
        try:
            json.loads((run_dir / "receipt.json").read_text())
            anchor_receipt(run_dir, anchor)
        except ValueError:
            pass
