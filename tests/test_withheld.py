"""What of a case no sandboxed subject is shown, however the case arrived (docs/integrity.md).

Each attack is a dishonest subject that names what it must not read: the fixture tree given with
``--tree`` (not ``$IMAGEBENCH_FIXTURES``), the user's code that builds, solves or scores the case
(a ``--cases`` module, a ``bench-case.json``'s ``pkg.mod:func`` targets), and the run folders
and calibration folders beside the run's own outcome folder, each lying inside a folder the
subject is shown (``--subject-expose`` of the user's project folder, or an ``--isolate``
function's package). A control run without the sandbox proves each route reaches its target.
"""

from __future__ import annotations

import shlex
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from user_code import forget_package, write_tree, write_user_package

from imagebench.case.model import Case
from imagebench.catalog import build_catalog
from imagebench.executor import run_cases
from imagebench.records import SampleSummary
from imagebench.runs.verdict import RunResult
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import BaselineSubject, CommandSubject, parse_subject

SANDBOX = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
LABEL = "my-skill/squares"
SEEN = "VISIBLE-MARKER-7f3a"  # a file of the project the subject may read: the route works


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's project folder: their package ``mybench`` (builder, verifier, reference,
    baseline) under ``code/``, their fixture tree under ``tree/`` and a harmless ``visible.txt``.
    ``$IMAGEBENCH_FIXTURES`` and ``$IMAGEBENCH_OUTCOME_DIR`` are unset: the tree arrives by ``--tree``."""
    proj = tmp_path / "proj"
    write_user_package(proj / "code")
    write_tree(proj / "tree")
    (proj / "visible.txt").write_text(SEEN + "\n")
    monkeypatch.syspath_prepend(str(proj / "code"))
    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    monkeypatch.delenv("IMAGEBENCH_OUTCOME_DIR", raising=False)
    forget_package("mybench")
    yield proj
    forget_package("mybench")


def _tree_case(proj: Path) -> Case:
    case = build_catalog(builtin=False, entry_points=False, tree=proj / "tree").get(LABEL)
    assert case is not None
    return case


def _one(result: RunResult) -> SampleSummary:
    (summary,) = result.samples[LABEL]
    return summary


def _said(result: RunResult, summary: SampleSummary) -> str:
    """What the subject printed (stdout and stderr of its sample folder)."""
    folder = next(result.run_dir.glob(f"*/{LABEL}/sample-{summary.sample}"))
    return "".join(
        (folder / n).read_text(errors="replace") for n in ("stdout.txt", "stderr.txt") if (folder / n).exists()
    )


def _command(proj: Path, tmp_path: Path, command: str, *, sandboxed: bool = True, out: Path | None = None) -> RunResult:
    subject = CommandSubject(command, sandbox=SandboxPolicy(enabled=sandboxed, expose=(proj,)))
    return run_cases([_tree_case(proj)], subject, out=out or tmp_path / "out", progress=False)


# --------------------------------------------------------------------------- the tree given with --tree


def _steal_truth(proj: Path) -> str:
    truth = proj / "tree" / "my-skill" / "squares" / "nuclei.npy"
    return f"cat {shlex.quote(str(proj / 'visible.txt'))}; cp {shlex.quote(str(truth))} outputs/labels.npy"


@SANDBOX
def test_a_tree_given_with_dash_tree_is_hidden_inside_an_exposed_folder(project: Path, tmp_path: Path) -> None:
    """The tree is named by ``--tree`` alone, and the user exposes their project folder (their
    solver lives there): its truth file is masked, while the rest of the folder is shown."""
    result = _command(project, tmp_path, _steal_truth(project))
    summary = _one(result)
    assert summary.status != "ok", summary.reason
    assert SEEN in _said(result, summary)  # the exposed folder is shown: only the tree is masked


@SANDBOX
def test_the_stolen_truth_is_real_truth(project: Path, tmp_path: Path) -> None:
    """Control: the same command without the sandbox reads the truth and passes."""
    result = _command(project, tmp_path, _steal_truth(project), sandboxed=False)
    assert _one(result).status == "ok", _one(result).reason


# --------------------------------------------------------------------------- the user's code


def _read_code(proj: Path, *names: str) -> str:
    files = " ".join(shlex.quote(str(proj / "code" / "mybench" / n)) for n in names)
    return f"cat {shlex.quote(str(proj / 'visible.txt'))}; for f in {files}; do cat $f; echo; done; true"


@SANDBOX
def test_the_code_of_a_declared_reference_and_baseline_is_hidden(project: Path, tmp_path: Path) -> None:
    """The reference solves the case: its module (``mybench/solve.py``, named by the tree's
    ``bench-case.json``) is masked inside the exposed project folder."""
    import py_compile

    py_compile.compile(str(project / "code" / "mybench" / "solve.py"), doraise=True)  # as an import would cache it
    cached = sorted((project / "code" / "mybench" / "__pycache__").glob("solve.*.pyc"))
    assert cached
    case = _tree_case(project)
    names = ["solve.py", *(f"__pycache__/{p.name}" for p in cached)]
    subject = CommandSubject(_read_code(project, *names), sandbox=SandboxPolicy(expose=(project,)))
    result = run_cases([case], subject, out=tmp_path / "out", progress=False)
    said = _said(result, _one(result))
    assert SEEN in said
    assert "def reference" not in said and "baseline" not in said, said  # nor its bytecode's names


@SANDBOX
def test_the_code_of_a_declared_reference_is_readable_without_the_sandbox(project: Path, tmp_path: Path) -> None:
    result = _command(project, tmp_path, _read_code(project, "solve.py"), sandboxed=False)
    assert "def reference" in _said(result, _one(result))


CASES_MODULE = """
from imagebench.case.model import Case, Collect, Layer
from imagebench.cases.verifiers import verifier_of
from imagebench.fixtures.specs import Procedural

from mybench.build import build

CASE_NOTE = "THE-CASE-MODULE-ITSELF"

CASES = [
    Case(
        case_id="squares",
        namespace="my-skill",
        task="Segment every square in `image`; leave `labels`, an integer label image.",
        persona="an analyst",
        fixture=Procedural(build, seed=11, tolerance={"f1_shortfall": 0.05, "missed_fraction": 0.05,
                                                       "false_fraction": 0.05, "iou_shortfall": 0.1}),
        layers=(Layer("image", "raw"),),
        collect=(Collect("labels", layer="labels", like="image"),),
        verify=verifier_of("label-image", {"data": "raw", "truth": "nuclei", "leaving": "labels"}),
    )
]
"""


@pytest.fixture
def cases_module(project: Path) -> Iterator[Path]:
    path = project / "my_cases.py"
    path.write_text(textwrap.dedent(CASES_MODULE).lstrip())
    forget_package("my_cases")
    yield path
    forget_package("my_cases")


@SANDBOX
def test_a_cases_module_and_its_builder_are_hidden(project: Path, cases_module: Path, tmp_path: Path) -> None:
    """``--cases my_cases.py`` (a file in the exposed project folder) and the builder it imports
    (``mybench/build.py``: with its seed it regenerates the truth) are masked; the module's
    folder is still shown."""
    catalog = build_catalog(builtin=False, entry_points=False, modules=[str(cases_module)])
    case = catalog.get(LABEL)
    assert case is not None
    command = _read_code(project, "build.py") + f"; cat {shlex.quote(str(cases_module))}"
    subject = CommandSubject(command, sandbox=SandboxPolicy(expose=(project,)))
    result = run_cases([case], subject, out=tmp_path / "out", progress=False)
    said = _said(result, _one(result))
    assert SEEN in said
    assert "def build" not in said and "THE-CASE-MODULE-ITSELF" not in said, said
    control = run_cases(
        [case], CommandSubject(command, sandbox=SandboxPolicy(enabled=False)), out=tmp_path / "c", progress=False
    )
    said = _said(control, _one(control))
    assert "def build" in said and "THE-CASE-MODULE-ITSELF" in said


AGENT = """
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi


def solve(session):
    here = Path(__file__).parent
    for name in ("solve.py", "build.py"):
        try:
            text = (here / name).read_text()
        except OSError as exc:
            text = f"unreadable: {exc}"
        print(f"--- {name}:", text)
    image = np.asarray(session.namespace["image"])
    session.namespace["labels"] = ndi.label(image > 0.5)[0].astype(np.int32)
"""


@SANDBOX
def test_an_isolated_function_is_not_shown_the_reference_beside_it(project: Path, tmp_path: Path) -> None:
    """``python:mybench.agent:solve --isolate``: the sandbox shows the function's whole package,
    which also holds the case's reference (``mybench/solve.py``): it is masked there, and the
    function still runs (a package whose ``__init__`` imported the reference would not: the
    masked module is gone inside)."""
    (project / "code" / "mybench" / "agent.py").write_text(textwrap.dedent(AGENT).lstrip())
    (project / "code" / "mybench" / "__init__.py").write_text("")
    subject = parse_subject("python:mybench.agent:solve", isolate=True)
    result = run_cases([_tree_case(project)], subject, out=tmp_path / "out", progress=False)
    summary = _one(result)
    said = _said(result, summary)
    assert "--- solve.py:" in said, said  # the function ran
    assert "def reference" not in said, said
    assert summary.status == "ok", summary.reason  # its own package still imports


# --------------------------------------------------------------------------- run folders beside the run


@SANDBOX
def test_runs_and_calibrations_beside_the_out_folder_are_hidden(project: Path, tmp_path: Path) -> None:
    """The own-case walkthrough's layout: ``--out outcomes/careful`` after ``--out outcomes/naive``
    and a calibration, all inside the exposed project folder, with ``$IMAGEBENCH_OUTCOME_DIR``
    unset. The sibling run's and the calibration's truth artifacts are masked."""
    from imagebench.executor.calibration import calibrate

    outcomes = project / "outcomes"
    case = _tree_case(project)
    run_cases([case], BaselineSubject(), out=outcomes / "naive", progress=False)
    calibrate([case], out=outcomes, progress=False, remember=False)
    found = sorted(p.relative_to(outcomes).as_posix() for p in outcomes.rglob("truth*.npy"))
    assert any(f.startswith("naive/") for f in found) and any(f.startswith("calibration-") for f in found), found
    command = f"cat {shlex.quote(str(project / 'visible.txt'))}; find {shlex.quote(str(outcomes))} -name 'truth*'; true"
    result = _command(project, tmp_path, command, out=outcomes / "careful")
    said = _said(result, _one(result))
    assert SEEN in said
    assert "truth" not in said.replace(command, ""), said


# --------------------------------------------------------------------------- --isolate never imports


def test_an_isolated_file_target_is_never_imported_in_the_harness(tmp_path: Path) -> None:
    """``python:path/file.py:func --isolate``: the file's top level (which would stash the truth
    from the harness's memory) runs only in the sandbox, never in the harness."""
    marker = tmp_path / "ran-in-the-harness"
    solver = tmp_path / "agent" / "stash.py"
    solver.parent.mkdir()
    solver.write_text(f"open({str(marker)!r}, 'w').write('top level ran')\ndef solve(session):\n    pass\n")
    if unavailable_reason() is not None:
        pytest.skip(str(unavailable_reason()))
    before = set(sys.modules)
    subject = parse_subject(f"python:{solver}:solve", isolate=True)
    assert not marker.exists(), "parsing imported the subject's file in the harness"
    from imagebench.subjects.identity import identity_of

    identity_of(subject)
    assert not marker.exists(), "its identity imported the subject's file"
    from imagebench import cases as builtin

    result = run_cases([builtin.get_case("calibrated-measurements/stardist-3d-volumes")], subject,
                       out=tmp_path / "out", progress=False)  # fmt: skip
    assert not marker.exists(), "the subject's top level ran outside the sandbox"
    assert not [m for m in set(sys.modules) - before if "stash" in m]
    assert all(s.status != "ok" for s in next(iter(result.samples.values())))


# --------------------------------------------------------------------------- the bench's folders, found


def test_the_marker_names_are_those_the_bench_writes() -> None:
    from imagebench.executor.calibration import CALIBRATION_RECORD
    from imagebench.fixtures.tree import MANIFEST
    from imagebench.runs.layout import RUN_RECORD
    from imagebench.runs.sitting import SITTING_RECORD
    from imagebench.sandbox.benchfolders import MARKED, TREE_MANIFEST

    assert dict(MARKED) == {"run-": RUN_RECORD, "sitting-": SITTING_RECORD, "calibration-": CALIBRATION_RECORD}
    assert TREE_MANIFEST == MANIFEST


def test_bench_folders_are_found_by_what_they_hold_and_links_are_not_followed(tmp_path: Path) -> None:
    from imagebench.sandbox.benchfolders import bench_folders

    root = tmp_path / "proj"
    (root / "a" / "run-1").mkdir(parents=True)
    (root / "a" / "run-1" / "run.json").write_text("{}")
    (root / "a" / "run-1" / "inner" / "run-2").mkdir(parents=True)  # inside a found folder: not walked
    (root / "run-fake").mkdir()  # named so, but holds no record
    (root / "web").mkdir()
    (root / "web" / "manifest.json").write_text('{"name": "an app", "icons": []}')  # another project's manifest
    (root / "tree").mkdir()
    (root / "tree" / "manifest.json").write_text('{"version": 1, "fixtures": []}')
    outside = tmp_path / "elsewhere" / "calibration-1"
    outside.mkdir(parents=True)
    (outside / "calibration.json").write_text("{}")
    (root / "link").symlink_to(outside)
    assert bench_folders(str(root)) == sorted([str(root / "a" / "run-1"), str(root / "tree")])


# --------------------------------------------------------------------------- the reference run isolated


@SANDBOX
@pytest.mark.parametrize("form", ["module", "file"])
def test_an_isolated_reference_is_refused_clearly_never_scored(project: Path, tmp_path: Path, form: str) -> None:
    """``python:mybench.solve:reference --isolate`` (or its file): its module is the case's
    reference, which its sandbox withholds. The sample is a harness error naming why, excluded
    from every figure: never a zero for the subject, never a run that shows it the answer."""
    target = "mybench.solve" if form == "module" else str(project / "code" / "mybench" / "solve.py")
    subject = parse_subject(f"python:{target}:reference", isolate=True)
    result = run_cases([_tree_case(project)], subject, out=tmp_path / "out", progress=False)
    summary = _one(result)
    assert summary.status == "harness-error", (summary.status, summary.reason)
    assert "withheld from its sandbox" in summary.reason and "without --isolate" in summary.reason, summary.reason


# --------------------------------------------------------------------------- Save as case cannot leave its tree


ESCAPES = {
    "skill up": {"skill": ".."},
    "skill path": {"skill": "../elsewhere"},
    "skill absolute": {"skill": str(Path("/tmp") / "imagebench-escape")},
    "case path": {"case_id": "a/../../elsewhere"},
    "case absolute": {"case_id": "/tmp/imagebench-escape"},
    "data key": {"data": "../elsewhere"},
    "truth key": {"truth": "../../labels"},
}


@pytest.mark.parametrize("attack", sorted(ESCAPES))
def test_save_as_case_never_writes_outside_its_tree(tmp_path: Path, attack: str) -> None:
    """A case name, skill or layer key that would climb out of the tree (``..``, a path, an
    absolute path) is refused naming it, and nothing is written anywhere."""
    import numpy as np

    from imagebench.cases.authoring import SaveError, save_case
    from imagebench.fixtures.fixture import FixtureError

    given = {"skill": "my-skill", "case_id": "blobs", "data": "image", "truth": "labels", **ESCAPES[attack]}
    labels = np.zeros((16, 16), np.int32)
    labels[2:6, 2:6] = 1
    root = tmp_path / "box" / "tree"
    root.parent.mkdir()
    with pytest.raises((SaveError, FixtureError), match="name|key"):
        save_case(
            root,
            given["skill"],
            given["case_id"],
            data={given["data"]: labels.astype(np.float32)},
            truth={given["truth"]: labels},
            kinds={given["truth"]: "labels"},
            provenance="drawn",
            citation="none",
        )
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert not Path("/tmp/imagebench-escape").exists()
