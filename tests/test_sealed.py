"""Sealed seeds: each sample of a procedural case built from a seed derived from a secret.

The derivation (deterministic, secret-dependent), a sealed run with the reference subject (seeds
recorded once scored, never shown to the subject), reproduction with the same secret, a secret
that never reaches the run folder, the resume rules, compare's C1, the CLI flags, and real
built-in builders taking the derived seed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    TOY_TOLERANCE,
    make_toy_case,
    toy_fixture,
    toy_reference,
    toy_verify,
)

from imagebench import cli
from imagebench import executor as ex
from imagebench.case.model import Case, select_cases
from imagebench.executor import run_cases
from imagebench.fixtures.fixture import Attempt, Fixture, Outcome
from imagebench.fixtures.fixture_digest import built_fixture_digest
from imagebench.fixtures.specs import Procedural
from imagebench.records import RunRecord, SampleSummary, read_record
from imagebench.runs.fingerprint import case_fingerprint, definition_fingerprint
from imagebench.runs.receipt import read_receipt
from imagebench.runs.runner import PreparedFixture, open_unit, prepare_fixture
from imagebench.runs.sealed import (
    RECORD_KEY,
    Seal,
    SealedError,
    commitment,
    derive_seed,
    read_secret_file,
    recorded_commitment,
)
from imagebench.runs.verdict import RunResult
from imagebench.subjects import ReferenceSubject, UnitContext
from imagebench.suite.compare import compare_runs
from imagebench.suite.record import RUN_INFO_KEY, SuiteRunInfo, conditions_now
from imagebench.suite.resolve import pin_suite
from imagebench.suite.sampling import assign

SECRET = "correct-horse-battery-staple-7f3a9c"  # distinctive, so a leak into any file is found
OTHER = "a-different-secret-0b1e2d"
REAL = ("segment-nuclei/count-nuclei", "drift-correction/drift-vector")  # fast real builders


def toy_cases() -> list[Case]:
    return [make_toy_case("alpha"), make_toy_case("beta", seed=1)]


def sealed_run(out: Path, cases: list[Case], secret: str | None, *, samples: int = 3, **kw: Any) -> RunResult:
    seal = Seal(secret.encode()) if secret is not None else None
    return run_cases(cases, ReferenceSubject(), samples=samples, out=out, progress=False, sealed=seal, **kw)


def seeds_of(result: RunResult) -> dict[str, list[int | None]]:
    return {label: [s.seed for s in ss] for label, ss in result.samples.items()}


def comparable(result: RunResult) -> dict[str, list[dict[str, Any]]]:
    return {label: [s.model_dump(exclude={"times": True, "usage": {"wall_s"}}) for s in ss] for label, ss in result.samples.items()}


def every_file(run_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- the derivation


def test_derivation_is_deterministic_secret_dependent_and_as_documented() -> None:
    fp = "sha256:" + "ab" * 32
    seed = derive_seed(SECRET, fp, 0)
    assert seed == derive_seed(SECRET.encode(), fp, 0)  # text is its UTF-8 bytes
    expected = hmac.new(SECRET.encode(), fp.encode() + b"\0" + b"0", hashlib.sha256).digest()
    assert seed == int.from_bytes(expected[:8], "big") & (2**63 - 1)
    assert 0 <= seed < 2**63
    others = {derive_seed(OTHER, fp, 0), derive_seed(SECRET, fp, 1), derive_seed(SECRET, "sha256:" + "cd" * 32, 0)}
    assert seed not in others and len(others) == 3
    with pytest.raises(SealedError, match="empty"):
        derive_seed("", fp, 0)
    with pytest.raises(ValueError, match="sample"):
        derive_seed(SECRET, fp, -1)


def test_the_seal_commits_to_its_secret_and_never_shows_or_ships_it() -> None:
    seal = Seal(SECRET.encode())
    assert seal.commitment == commitment(SECRET) == commitment(SECRET.encode())
    assert seal.commitment == "sha256:" + hashlib.sha256(b"imagebench-sealed\0" + SECRET.encode()).hexdigest()
    assert seal.commitment != Seal(OTHER.encode()).commitment
    assert SECRET not in repr(seal) and SECRET not in json.dumps(seal.record())
    with pytest.raises(TypeError, match="never leaves"):
        pickle.dumps(seal)
    with pytest.raises(SealedError, match="empty"):
        Seal(b"")


def test_the_definition_fingerprint_leaves_the_seed_out_and_builds_nothing() -> None:
    a, b = make_toy_case("same", seed=0), make_toy_case("same", seed=5)
    assert definition_fingerprint(a) == definition_fingerprint(b)  # the seed is not part of it
    assert case_fingerprint(a) != case_fingerprint(b)  # ... while the full fingerprint has it
    assert definition_fingerprint(a) != definition_fingerprint(make_toy_case("other"))
    built: list[int] = []
    counted = make_toy_case("counted", spec=Procedural(_counting_builder(built), tolerance=dict(TOY_TOLERANCE)))
    definition_fingerprint(counted)
    assert built == []


@dataclass(frozen=True)
class _counting_builder:  # noqa: N801 - a builder; a dataclass so that it can be fingerprinted
    log: list[int]

    def __call__(self, *, seed: int) -> Fixture:
        self.log.append(seed)
        return toy_fixture(seed)


def test_seeds_per_case_and_sample_skip_curated_cases_and_share_across_a_rerun_case() -> None:
    from helpers import UnavailableSpec

    seal = Seal(SECRET.encode())
    rerun = make_toy_case("rerun", verify=AcrossSamples())
    seeds = seal.seeds([*toy_cases(), make_toy_case("offsite", spec=UnavailableSpec()), rerun], 3)
    assert sorted(seeds) == ["toy/alpha", "toy/beta", "toy/rerun"]  # a curated case has no seed
    assert len(set(seeds["toy/alpha"])) == 3 and not set(seeds["toy/alpha"]) & set(seeds["toy/beta"])
    assert seeds["toy/alpha"][0] == seal.seed(definition_fingerprint(toy_cases()[0]), 0)
    assert len(set(seeds["toy/rerun"])) == 1  # judged across its samples: one fixture for all


def test_a_rerun_case_works_all_its_samples_on_one_sealed_fixture(tmp_path: Path) -> None:
    result = sealed_run(tmp_path, [make_toy_case("rerun", verify=AcrossSamples())], SECRET)
    samples = result.samples["toy/rerun"]
    assert [s.status for s in samples] == ["ok"] * 3 and len({s.seed for s in samples}) == 1
    assert samples[0].seed != 0 and result.summaries["toy/rerun"].extra["consistency"]["consistent"]


@dataclass(frozen=True)
class AcrossSamples:
    """The toy verifier, judged across samples too (as a bundle's rerun class is)."""

    def __call__(self, fixture: Fixture, attempt: Attempt) -> Outcome:
        return toy_verify(fixture, attempt)

    def across_samples(self, samples: Any) -> dict[str, Any]:
        return {"consistent": len({s.seed for s in samples}) == 1, "reason": "one fixture"}


# --------------------------------------------------------------------------- the runner's route


def test_prepare_fixture_and_open_unit_take_the_seed(tmp_path: Path) -> None:
    from helpers import UnavailableSpec

    case = make_toy_case()
    seeded = prepare_fixture(case, seed=123)
    assert seeded.seed == 123 and seeded.fixture is not None
    assert built_fixture_digest(seeded.fixture) == built_fixture_digest(toy_fixture(123))
    assert built_fixture_digest(prepare_fixture(case).fixture) == built_fixture_digest(toy_fixture(0))
    # a curated fixture has no seed to take
    assert prepare_fixture(make_toy_case(spec=UnavailableSpec()), seed=1).status == "skipped"
    # a fixture built from another seed is never worked under this sample's seed
    unit = open_unit(case, "reference", 0, tmp_path, fixture=seeded, seed=124)
    assert unit.failure is not None and "seed 123" in unit.failure[1]
    assert open_unit(case, "reference", 0, tmp_path, fixture=seeded, seed=123).failure is None
    unit = open_unit(case, "reference", 0, tmp_path, seed=77)  # built here from the seed
    assert unit.prepared.seed == 77 and built_fixture_digest(unit.fixture) == built_fixture_digest(toy_fixture(77))
    assert open_unit(case, "reference", 0, tmp_path, fixture=PreparedFixture(None, "skipped", "x")).failure


# --------------------------------------------------------------------------- a sealed run


class Peeker:
    """The reference solution, keeping everything it is shown: the session, its context, the
    environment, and whether its sample's summary exists yet."""

    name = "reference"

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.summary_before: list[bool] = []

    def bind(self, case: Case, context: UnitContext) -> Callable[[Any], None]:
        import os

        def work(session: Any) -> None:
            shown = {k: v for k, v in session.namespace.items() if not isinstance(v, np.ndarray)}
            self.seen.append(repr((shown, session.prompt, session.notes, context, dict(os.environ))))
            self.summary_before.append((context.sample_dir / "summary.json").exists())
            toy_reference(session)

        return work


def test_a_sealed_run_passes_and_records_each_seed_only_once_scored(tmp_path: Path) -> None:
    cases = toy_cases()
    peeker = Peeker()
    result = run_cases(cases, peeker, samples=3, out=tmp_path, progress=False, sealed=Seal(SECRET.encode()))
    expected = Seal(SECRET.encode()).seeds(cases, 3)
    assert seeds_of(result) == expected
    for label, samples in result.samples.items():
        assert [s.status for s in samples] == ["ok"] * 3, label
        for s in samples:  # the builder took the derived seed (the toy says so in its provenance)
            assert s.provenance == f"toy rectangle, seed {s.seed}"
    seeds = [str(s) for ss in expected.values() for s in ss]
    assert len(peeker.seen) == 6 and not any(seed in shown for seed in seeds for shown in peeker.seen)
    assert peeker.summary_before == [False] * 6  # nothing of the sample was written during its turn
    record = read_record(result.run_dir / "run.json", RunRecord)
    assert recorded_commitment(record.extra) == Seal(SECRET.encode()).commitment
    receipt = read_receipt(result.run_dir / "receipt.json")
    assert receipt.sealed is True and receipt.sealed_commitment == Seal(SECRET.encode()).commitment
    assert receipt.seeds == {"toy/alpha": "sealed", "toy/beta": "sealed"}
    assert {c["seed"] for c in receipt.cases} == {"sealed"}


def test_a_case_that_cannot_be_fingerprinted_cannot_be_sealed(tmp_path: Path) -> None:
    from dataclasses import replace

    floating = replace(make_toy_case("floating"), revision="latest")
    with pytest.raises(SealedError, match="toy/floating cannot be sealed: .*moving name"):
        sealed_run(tmp_path, [floating], SECRET)
    assert not list(tmp_path.iterdir())  # refused before the run folder was made


def test_an_unsealed_run_is_as_before(tmp_path: Path) -> None:
    result = sealed_run(tmp_path, toy_cases(), None, samples=2)
    assert seeds_of(result) == {"toy/alpha": [0, 0], "toy/beta": [1, 1]}
    assert RECORD_KEY not in result.record.extra
    receipt = read_receipt(result.run_dir / "receipt.json")
    assert receipt.sealed is False and receipt.sealed_commitment is None
    assert receipt.seeds == {"toy/alpha": 0, "toy/beta": 1}


def test_the_same_secret_reproduces_the_run_and_another_changes_every_seed(tmp_path: Path) -> None:
    cases = toy_cases()
    first = sealed_run(tmp_path / "a", cases, SECRET)
    again = sealed_run(tmp_path / "b", cases, SECRET, parallel=ex.Parallel(prefetch=False))
    assert comparable(first) == comparable(again)  # every field but the times, prefetched or not
    pngs = {k: v for k, v in every_file(first.run_dir).items() if k.endswith(".png")}
    assert pngs and pngs == {k: v for k, v in every_file(again.run_dir).items() if k.endswith(".png")}
    other = sealed_run(tmp_path / "c", cases, OTHER)
    mine = {s for ss in seeds_of(first).values() for s in ss}
    theirs = {s for ss in seeds_of(other).values() for s in ss}
    assert len(mine) == len(theirs) == 6 and not mine & theirs
    assert all(
        s.status == "ok" and s.provenance == f"toy rectangle, seed {s.seed}"
        for ss in other.samples.values()
        for s in ss
    )


def test_the_secret_is_in_no_file_of_the_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET + "\n")
    outs = []
    for flags in (["--sealed-file", str(secret_file)], ["--sealed", SECRET]):
        out = tmp_path / flags[0].strip("-")
        assert cli.main(["run", "-k", "segment-nuclei/count-nuclei", "--samples", "2", "--out", str(out), *flags]) == 0
        outs.append(Path(capsys.readouterr().out.split("run folder: ")[1].split()[0]))
    for run_dir in outs:
        files = every_file(run_dir)
        assert {"run.json", "receipt.json", "journal.jsonl", "report.html"} <= set(files)
        for rel, data in files.items():
            assert SECRET.encode() not in data, rel
        assert Seal(SECRET.encode()).commitment.encode() in files["run.json"]
    a, b = (read_record(d / "run.json", RunRecord) for d in outs)
    assert a.extra[RECORD_KEY] == b.extra[RECORD_KEY]  # the file's secret is the flag's (its newline stripped)


# --------------------------------------------------------------------------- real builders


def test_real_builders_take_the_derived_seed(tmp_path: Path) -> None:
    from imagebench import cases as builtin

    chosen, unmatched = select_cases(builtin.all_cases(), list(REAL))
    assert not unmatched and len(chosen) == 2
    seal = Seal(SECRET.encode())
    result = sealed_run(tmp_path, chosen, SECRET, samples=2)
    for case in chosen:
        samples = result.samples[case.label]
        assert [s.status for s in samples] == ["ok", "ok"], [s.reason for s in samples]
        seeds = [s.seed for s in samples]
        assert seeds == seal.seeds([case], 2)[case.label] and case.fixture.seed not in seeds
        assert all(f"seed {seed}" in s.provenance for seed, s in zip(seeds, samples))
        own = built_fixture_digest(case.build())
        sealed = {built_fixture_digest(prepare_fixture(case, seed=seed).fixture) for seed in seeds}
        assert own not in sealed and len(sealed) == 2


# --------------------------------------------------------------------------- resume


def _lose_a_sample(run_dir: Path) -> None:
    (run_dir / "reference" / "toy" / "beta" / "sample-1" / "summary.json").unlink()


def test_resume_needs_the_same_secret(tmp_path: Path) -> None:
    cases = toy_cases()
    clean = sealed_run(tmp_path / "clean", cases, SECRET)
    first = sealed_run(tmp_path / "first", cases, SECRET)
    _lose_a_sample(first.run_dir)
    with pytest.raises(ex.ResumeError, match="was sealed .*resume it with the same secret"):
        ex.resume_run(first.run_dir, cases=cases, progress=False)
    with pytest.raises(ex.ResumeError, match="not the one the run was sealed with"):
        ex.resume_run(first.run_dir, cases=cases, progress=False, sealed=Seal(OTHER.encode()))
    seen: list[SampleSummary] = []
    resumed = ex.resume_run(
        first.run_dir, cases=cases, progress=False, sealed=Seal(SECRET.encode()), on_sample=seen.append
    )
    assert [(s.label, s.sample) for s in seen] == [("toy/beta", 1)]
    assert comparable(resumed) == comparable(clean)  # the re-run sample has its own seed again
    assert recorded_commitment(resumed.record.extra) == Seal(SECRET.encode()).commitment
    plain = sealed_run(tmp_path / "plain", cases, None)
    _lose_a_sample(plain.run_dir)
    with pytest.raises(ex.ResumeError, match="was not sealed"):
        ex.resume_run(plain.run_dir, cases=cases, progress=False, sealed=Seal(SECRET.encode()))


def test_resume_from_the_cli_checks_the_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET)
    args = ["run", "-k", "count-nuclei", "--samples", "2", "--out", str(tmp_path), "--quiet"]
    assert cli.main([*args, "--sealed-file", str(secret_file)]) == 0
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    (run_dir / "reference" / "segment-nuclei" / "count-nuclei" / "sample-1" / "summary.json").unlink()
    assert cli.main(["run", "--resume", str(run_dir), "--quiet"]) == 2
    assert "was sealed" in capsys.readouterr().err
    assert cli.main(["run", "--resume", str(run_dir), "--quiet", "--sealed", OTHER]) == 2
    assert "not the one the run was sealed with" in capsys.readouterr().err
    assert cli.main(["run", "--resume", str(run_dir), "--quiet", "--sealed-file", str(secret_file)]) == 0
    assert "kept 1 finished unit(s), ran 1" in capsys.readouterr().out


# --------------------------------------------------------------------------- the CLI's flags


def test_sealed_file_and_flag_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "-k", "toy-never-matches-anything", "--out", str(tmp_path)]
    missing = tmp_path / "no-such-secret"
    assert cli.main([*base, "--sealed-file", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "no such file" in err
    empty = tmp_path / "empty-secret"
    empty.write_text("  \n")
    assert cli.main([*base, "--sealed-file", str(empty)]) == 2
    err = capsys.readouterr().err
    assert str(empty) in err and "empty" in err
    assert cli.main([*base, "--sealed", ""]) == 2
    assert "empty" in capsys.readouterr().err
    assert cli.main([*base, "--sealed", SECRET, "--sealed-file", str(empty)]) == 2
    assert "not both" in capsys.readouterr().err
    assert not list(tmp_path.glob("run-*"))  # nothing ran
    with pytest.raises(SealedError, match="no such file"):
        read_secret_file(missing)
    padded = tmp_path / "padded"
    padded.write_bytes(b"\n  " + SECRET.encode() + b"\r\n")
    assert read_secret_file(padded) == SECRET.encode()


def test_a_secret_file_a_sandboxed_subject_would_see_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = tmp_path / "agent"
    shown.mkdir()
    (shown / "secret").write_text(SECRET)
    base = ["run", "-k", "count-nuclei", "--subject", "command:true", "--out", str(tmp_path / "out")]
    assert cli.main([*base, "--subject-expose", str(shown), "--sealed-file", str(shown / "secret")]) == 2
    assert "which a sandboxed subject is shown read-only" in capsys.readouterr().err
    in_env = Path(sys.prefix) / "imagebench-test-secret"
    assert cli.main([*base, "--sealed-file", str(in_env)]) == 2  # refused before it is even read
    assert "Python environment" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- compare, C1


def _suite_run(out: Path, cases: list[Case], secret: str | None) -> Path:
    manifest, problems = pin_suite("core", "2026.11.0", cases)
    assert manifest is not None, problems
    assignment = assign(manifest, "all", 0)
    info = SuiteRunInfo(
        requested="core", assignment=assignment, conditions=conditions_now(samples=2, timeout=None, cases=cases)
    )
    result = run_cases(
        cases,
        ReferenceSubject(),
        samples=2,
        out=out,
        progress=False,
        record_extra={RUN_INFO_KEY: info.model_dump(mode="json")},
        sealed=Seal(secret.encode()) if secret is not None else None,
    )
    return result.run_dir


def test_compare_c1_needs_runs_sealed_alike(tmp_path: Path) -> None:
    cases = toy_cases()
    a = _suite_run(tmp_path / "a", cases, SECRET)
    same = _suite_run(tmp_path / "same", cases, SECRET)
    other = _suite_run(tmp_path / "other", cases, OTHER)
    plain = _suite_run(tmp_path / "plain", cases, None)

    def c1(x: Path, y: Path) -> Any:
        result = compare_runs(x, y)
        return result, next(c for c in result.conditions if c.id == "C1")

    result, cond = c1(a, same)
    assert cond.holds and result.comparable and any("same secret" in n for n in cond.notes)
    result, cond = c1(a, other)
    assert not cond.holds and not result.comparable
    assert any("different secrets" in p for p in cond.problems)
    result, cond = c1(plain, a)
    assert not cond.holds and any("run B was sealed, run A was not" in p for p in cond.problems)
    assert c1(plain, plain)[1].holds


def test_run_suite_takes_the_seal_and_compare_says_why_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from imagebench import cases as builtin

    monkeypatch.setattr(builtin, "all_cases", toy_cases)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["suite", "pin", "core", "--revision", "2026.11.0", "--quiet"]) == 0
    capsys.readouterr()
    runs = []
    for secret in (SECRET, SECRET, OTHER):
        assert cli.main(["run", "--suite", "core", "--out", str(tmp_path), "--quiet", "--sealed", secret]) == 0
        runs.append(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    record = read_record(Path(runs[0]) / "run.json", RunRecord)
    assert RUN_INFO_KEY in record.extra and recorded_commitment(record.extra) == Seal(SECRET.encode()).commitment
    assert cli.main(["compare", runs[0], runs[1]]) == 0
    capsys.readouterr()
    assert cli.main(["compare", runs[0], runs[2], "--json"]) == 1
    c1 = next(c for c in json.loads(capsys.readouterr().out)["conditions"] if c["id"] == "C1")
    assert not c1["holds"] and "sealed with different secrets" in c1["problems"][0]


# --------------------------------------------------------------------------- dask workers


@pytest.fixture(scope="module")
def address() -> Any:
    from distributed import Client

    lc = ex.local_cluster(2)
    client = Client(lc, set_as_default=False)
    try:
        yield lc.scheduler_address
    finally:
        client.close()
        lc.close()


@pytest.mark.parametrize("mode", ["worker", "driver"])
def test_a_sealed_run_on_workers_matches_the_serial_one(tmp_path: Path, address: str, mode: str) -> None:
    cases = toy_cases()
    serial = sealed_run(tmp_path / "serial", cases, SECRET, samples=2)
    spread = sealed_run(
        tmp_path / mode,
        cases,
        SECRET,
        samples=2,
        parallel=ex.Parallel(scheduler=address, fixture_mode=mode),  # type: ignore[arg-type]
    )
    assert comparable(serial) == comparable(spread)
    assert len({s for ss in seeds_of(spread).values() for s in ss}) == 4


def _tensor_reference(session: Any) -> None:
    image = np.asarray(session.client.get(session.namespace["fixture_tensors"]["image"]).compute())
    session.namespace["mask"] = image > 0.5
    session.namespace["area"] = int((image > 0.5).sum())


def test_a_sealed_tensor_case_uploads_each_seed_s_fixture(tmp_path: Path, address: str) -> None:
    from imagebench.case.model import Layer
    from imagebench.plane import RunPlane

    plane, why = RunPlane.try_start()
    if plane is None:
        pytest.skip(f"no data plane here: {why}")
    lazy = make_toy_case(
        "lazy", reference=_tensor_reference, layers=(Layer("image", "image", "image", presentation="tensor"),)
    )
    cases = [make_toy_case("alpha"), lazy, make_toy_case("beta", seed=1)]  # uploads ahead between cases
    uploads: list[str] = []
    upload = plane._upload
    plane._upload = lambda case, fixture: (uploads.append(case.label), upload(case, fixture))[1]  # type: ignore[method-assign]
    try:
        serial = sealed_run(tmp_path / "serial", cases, SECRET, samples=2, plane=plane)
        serial_uploads = list(uploads)
        spread = sealed_run(tmp_path / "spread", cases, SECRET, samples=2, plane=plane, scheduler=address)
    finally:
        plane.close()
    assert [s.status for s in serial.samples["toy/lazy"]] == ["ok", "ok"]
    assert serial_uploads == ["toy/lazy", "toy/lazy"]  # one fixture per seed, each uploaded once
    assert comparable(serial) == comparable(spread)
