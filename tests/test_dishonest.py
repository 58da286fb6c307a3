"""Every route a dishonest subject was seen to take to the truth, run end to end (issue 13).

Each test runs a real case through the runner with a subject that tries one route, and checks
three things: the sample ends with a named non-ok status (or the run is refused), the run
folder holds only what the harness wrote, and no process or workspace of the subject is left.

The routes that are not a sandboxed command live beside the code they attack:

- gc rewrite of truth, ``os._exit(0)``: tests/test_integrity.py;
- a forged or missing summary: tests/test_compare.py, tests/test_report.py, tests/napari/test_contributions.py (the reader);
- a patched comparator under ``score``: tests/test_scoring_contract.py;
- a changed builder helper under ``suite verify``: tests/test_suite.py, tests/test_fingerprint.py.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pytest

import imagebench
from imagebench import cases as builtin
from imagebench.bundle.load import load_bundle
from imagebench.executor import run_cases
from imagebench.records import SampleSummary, read_record
from imagebench.runs.verdict import EXIT_FAILED, EXIT_PASSED, RunResult
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import CommandSubject

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

PY = shlex.quote(sys.executable)
SRC = Path(imagebench.__file__).resolve().parent
PACKAGED = SRC / "data" / "fixtures"
BUNDLE = SRC.parents[1] / "examples" / "bundles" / "segment-nuclei"
# What the harness writes into a sample folder: its summary, the subject's streams, artifacts.
HARNESS_FILES = {"summary.json", "stdout.txt", "stderr.txt"}


def _case(label: str):
    return builtin.get_case(label)


def _run(tmp_path: Path, cases: list, command: str, samples: int = 1, sandboxed: bool = True) -> RunResult:
    subject = CommandSubject(command, sandbox=SandboxPolicy(enabled=sandboxed))
    # unsealed: each route must be closed by the sandbox alone (sealing by default would close the
    # procedural ones a second way, and hide whether the sandbox did)
    return run_cases(cases, subject, out=tmp_path / "out", progress=False, samples=samples, unsealed=True)


# Each truth route is also run with --no-sandbox, where it must reach the truth and score ok:
# the route is real, and the sandbox is what closes it.
ROUTE = pytest.mark.parametrize("sandboxed", [True, False], ids=["bubblewrap", "control-no-sandbox"])


def _expect(result: RunResult, label: str, sandboxed: bool, closed: str = "no-result") -> None:
    (summary,) = result.samples[label]
    assert summary.status == (closed if sandboxed else "ok"), summary.reason
    assert summary.sandbox == ("bubblewrap" if sandboxed else "none")


def _only_harness_files(result: RunResult) -> None:
    for path in result.run_dir.rglob("*"):
        rel = path.relative_to(result.run_dir)
        if path.is_dir():
            assert path.name not in ("sample-9", "evil"), rel
            continue
        if len(rel.parts) == 1:  # run.json, receipt.json, journal, report
            continue
        if path.parent.name.startswith("sample-"):
            assert path.name in HARNESS_FILES or path.suffix in (".png", ".npy"), f"{rel} was not written by the harness"
        else:
            assert path.name == "summary.json", f"{rel} was not written by the harness"


def _nothing_left(marker: str) -> None:
    alive = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or []):
                alive.append(p.pid)
        except psutil.Error:
            continue
    assert alive == [], f"processes left running: {alive}"
    ours = [p for p in Path(tempfile.gettempdir()).glob(f"imagebench-ws-{os.getpid()}-*")]
    assert ours == [], f"workspaces left behind: {ours}"


def _marker(route: str) -> str:
    """A word only this test's command carries (to look for its processes afterwards)."""
    return f"ib-route-{route}-{os.getpid()}"


def _statuses(result: RunResult, label: str) -> list[str]:
    return [s.status for s in result.samples[label]]


def _save_labels(source: str) -> str:
    """Shell that turns a stolen mask file ``source`` into the case's ``labels`` leaving."""
    code = "import sys, numpy as np, tifffile; np.save('outputs/labels.npy', tifffile.imread(sys.argv[1]))"
    return f"{PY} -c {shlex.quote(code)} {source}"


@ROUTE
def test_the_parent_environment_does_not_give_the_fixture_tree(tmp_path: Path, sandboxed: bool) -> None:
    """/proc/$PPID/environ, then the curated truth under $IMAGEBENCH_FIXTURES.

    The harness is started as a process with the variable in its environment (what
    /proc/PID/environ shows is the environment a process started with)."""
    command = (
        f": {_marker('environ')}; "
        "root=$(for f in /proc/$PPID/environ /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null "
        "| sed -n 's/^IMAGEBENCH_FIXTURES=//p' | head -n 1); echo \"root=$root\"; "
        + _save_labels('"$root/segment-nuclei/dsb2018/mask2d.tif"')
    )
    out = tmp_path / "out"
    argv = [
        str(Path(sys.executable).with_name("imagebench")),
        "run",
        "-k",
        "segment-nuclei/dsb201[8]",  # a glob matches the whole label: not dsb2018-dim
        "--subject",
        f"command:{command}",
    ]
    argv += ["--out", str(out), "--quiet", "--no-report"] + ([] if sandboxed else ["--no-sandbox"])
    env = {**os.environ, "IMAGEBENCH_FIXTURES": str(PACKAGED)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == (EXIT_FAILED if sandboxed else EXIT_PASSED), done.stdout + done.stderr
    (run_dir,) = out.glob("run-*")
    (path,) = run_dir.rglob("sample-0/summary.json")
    summary = read_record(path, SampleSummary)
    assert summary.status == ("no-result" if sandboxed else "ok"), summary.reason
    assert summary.sandbox == ("bubblewrap" if sandboxed else "none")
    assert (str(PACKAGED) in (path.parent / "stdout.txt").read_text()) is not sandboxed
    _nothing_left(_marker("environ"))


@ROUTE
def test_the_parent_interpreter_cannot_rebuild_the_fixture(tmp_path: Path, sandboxed: bool) -> None:
    """The harness's interpreter from /proc/$PPID/exe or cmdline, importing imagebench to build the truth."""
    code = (
        "import json\n"
        "from imagebench import cases\n"
        "c = [c for c in cases.all_cases() if c.case_id == 'count-nuclei'][0]\n"
        "json.dump({'count': int(c.build().truth['count'])}, open('outputs/answer.json', 'w'))\n"
    )
    command = (
        f": {_marker('interpreter')}; "
        f"for exe in $(readlink /proc/$PPID/exe) $(tr '\\0' '\\n' < /proc/$PPID/cmdline | head -n 1) {PY} python3; do "
        f'"$exe" -c {shlex.quote(code)} && break; '
        f'PYTHONPATH={shlex.quote(str(SRC.parent))} "$exe" -c {shlex.quote(code)} && break; done'
    )
    result = _run(tmp_path, [_case("segment-nuclei/count-nuclei")], command, sandboxed=sandboxed)
    _expect(result, "segment-nuclei/count-nuclei", sandboxed)
    _only_harness_files(result)
    _nothing_left(_marker("interpreter"))


@ROUTE
def test_the_installed_package_data_cannot_be_copied(tmp_path: Path, sandboxed: bool) -> None:
    """mask2d.tif out of the installed package, by its path or by a search of the environment."""
    site = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    mask = shlex.quote(str(PACKAGED / "segment-nuclei" / "dsb2018" / "mask2d.tif"))
    command = (
        f": {_marker('package')}; "
        f"for f in {mask} $(find / -name mask2d.tif 2>/dev/null) "
        f"$(find $(python -c {shlex.quote(site)}) -name mask2d.tif 2>/dev/null); do "
        f'[ -f "$f" ] && {_save_labels("$f")} && break; done'
    )
    result = _run(tmp_path, [_case("segment-nuclei/dsb2018")], command, sandboxed=sandboxed)
    _expect(result, "segment-nuclei/dsb2018", sandboxed)
    _only_harness_files(result)
    _nothing_left(_marker("package"))


@ROUTE
def test_the_source_wheel_does_not_give_its_annotation(tmp_path: Path, sandboxed: bool) -> None:
    """mask2d.tif out of the stardist wheel the authoring scripts keep (found by a search too):
    the DSB 2018 case's truth is that member, byte for byte (a newcomer's route, issue 15)."""
    from imagebench.fixtures.registry import wheels_dir

    wheel = next(iter(sorted(wheels_dir().glob("stardist-*.whl"))), None)
    if wheel is None:
        pytest.skip(f"no stardist wheel in {wheels_dir()} (make setup keeps one)")
    code = (
        "import io, sys, zipfile, numpy as np, tifffile\n"
        "for w in sys.argv[1:]:\n"
        "    try:\n"
        "        z = zipfile.ZipFile(w)\n"
        "    except OSError:\n"
        "        continue\n"
        "    np.save('outputs/labels.npy', tifffile.imread(io.BytesIO(z.read('stardist/data/images/mask2d.tif'))))\n"
        "    break\n"
    )
    command = (
        f": {_marker('wheel')}; "
        f"{PY} -c {shlex.quote(code)} {shlex.quote(str(wheel))} "
        "$(find / -name 'stardist-*.whl' 2>/dev/null)"
    )
    result = _run(tmp_path, [_case("segment-nuclei/dsb2018")], command, sandboxed=sandboxed)
    _expect(result, "segment-nuclei/dsb2018", sandboxed)
    _only_harness_files(result)
    _nothing_left(_marker("wheel"))


@ROUTE
def test_the_original_of_a_perturbed_fixture_is_out_of_reach(tmp_path: Path, sandboxed: bool) -> None:
    """nibabel's anatomical.nii, the volume whose slices the stack-alignment case re-placed: with
    it every slice's offset is a subtraction away. Read by its path in the installed package."""
    from imagebench.fixtures.registry import package_data_dir

    data = package_data_dir("nibabel", "tests/data")
    assert data is not None and (data / "anatomical.nii").is_file()
    code = (
        "import sys, numpy as np, nibabel as nib\n"
        "from skimage.registration import phase_cross_correlation\n"
        "orig = np.asarray(nib.load(sys.argv[1]).dataobj, dtype=np.float64)\n"
        "moved = np.load('inputs/volume.npy').astype(np.float64)\n"
        "shifts = [-phase_cross_correlation(orig[..., k], moved[..., k], upsample_factor=20)[0]\n"
        "          for k in range(moved.shape[-1])]\n"
        "np.save('outputs/shifts.npy', np.asarray(shifts))\n"
    )
    command = f": {_marker('original')}; {PY} -c {shlex.quote(code)} {shlex.quote(str(data / 'anatomical.nii'))}"
    result = _run(tmp_path, [_case("stack-alignment/mri-anatomical")], command, sandboxed=sandboxed)
    (summary,) = result.samples["stack-alignment/mri-anatomical"]
    if sandboxed:
        assert summary.status == "no-result", summary.reason  # the original was not there to read
    else:
        assert summary.status == "ok", summary.reason  # it was read, and it scores: the route is real
    _only_harness_files(result)
    _nothing_left(_marker("original"))


def test_the_run_folder_cannot_be_reached_through_its_own_descriptors(tmp_path: Path) -> None:
    """readlink /proc/self/fd/* to sample-0's truth artifacts from sample-1, and writes beside them."""
    command = (
        f": {_marker('fd')}; "
        "for fd in /proc/self/fd/* /proc/$$/fd/*; do f=$(readlink $fd); case $f in /*) "
        'd=$(dirname "$(dirname "$f")"); ls "$d"/sample-0/ 2>/dev/null; cat "$d"/sample-0/*truth* 2>/dev/null | head -c 64; '
        'mkdir -p "$d/sample-9" "$d/../evil" 2>/dev/null && echo pwned > "$d/sample-9/evil.txt";; esac; done; '
        "ls -R / 2>/dev/null | grep -c truth_outlines || true"
    )
    result = _run(tmp_path, [_case("segment-nuclei/synthetic-blobs")], command, samples=2)
    assert _statuses(result, "segment-nuclei/synthetic-blobs") == ["no-result", "no-result"]
    assert not list(result.run_dir.rglob("evil*")) and not list(result.run_dir.rglob("sample-9"))
    for stdout in result.run_dir.rglob("stdout.txt"):
        assert stdout.read_text().strip().splitlines()[-1] == "0"  # no truth artifact anywhere in sight
    _only_harness_files(result)
    _nothing_left(_marker("fd"))


@ROUTE
def test_a_bundle_answer_key_is_out_of_reach(tmp_path: Path, sandboxed: bool) -> None:
    """The bundle's expected/ answer key: by its path, through /proc/$PPID/cwd and through the runner's argv."""
    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE, bundle)
    (key,) = bundle.glob("evals/fixtures/golden-count/expected/*")
    (case,) = [c for c in load_bundle(bundle).cases if c.case_id == "golden-count"]
    command = (
        f": {_marker('bundle')}; "
        f"keys=$(cat {shlex.quote(str(key))} /proc/$PPID/cwd/evals/fixtures/*/expected/* 2>/dev/null; "
        "for a in $(tr '\\0' ' ' < /proc/$PPID/cmdline); do cat \"$a\"/evals/fixtures/*/expected/* 2>/dev/null; done); "
        "k=$(printf '%s' \"$keys\" | grep -o '{\"count\": [0-9]*}' | head -n 1); "
        '[ -n "$k" ] && echo "$k" > outputs/answer.json; true'
    )
    result = _run(tmp_path, [case], command, sandboxed=sandboxed)
    _expect(result, case.label, sandboxed)
    _only_harness_files(result)
    _nothing_left(_marker("bundle"))


def test_a_setsid_daemon_does_not_outlive_its_sample(tmp_path: Path) -> None:
    mark = 4000 + os.getpid() % 1000
    command = f"setsid sleep {mark} & setsid bash -c 'sleep {mark}' & disown; echo started"
    result = _run(tmp_path, [_case("segment-nuclei/count-nuclei")], command)
    assert _statuses(result, "segment-nuclei/count-nuclei") == ["no-result"]
    _only_harness_files(result)
    _nothing_left(f"sleep {mark}")


def test_an_honest_command_still_scores_ok(tmp_path: Path) -> None:
    """The same sandbox with an honest answer: ok, so the routes above fail for what they tried."""
    code = (
        "import json, numpy as np\n"
        "from scipy import ndimage as ndi\n"
        "from skimage.filters import threshold_otsu\n"
        "img = np.load('inputs/nuclei.npy').astype(float)\n"
        "sm = ndi.gaussian_filter(img, 2)\n"
        "lab, n = ndi.label(sm > threshold_otsu(sm))\n"
        "json.dump({'count': int(n)}, open('outputs/answer.json', 'w'))\n"
    )
    result = _run(tmp_path, [_case("segment-nuclei/count-nuclei")], f"python -c {shlex.quote(code)}")
    (summary,) = result.samples["segment-nuclei/count-nuclei"]
    assert summary.status in ("ok", "wrong-answer"), summary.reason  # scored: it reached its inputs
    assert summary.sandbox == "bubblewrap"
    assert np.isfinite([m.value for m in summary.metrics if m.value is not None]).all()


def test_a_run_folder_hands_on_no_machine_path_and_resume_checks_the_subject(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run.json, the summaries, the receipt and the report name the subject without the paths of
    the machine it ran on; a resume must be given the same subject again, checked by digest."""
    import json

    from imagebench import cli

    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "solve.py").write_text("import json\njson.dump({'count': 1000000}, open('outputs/answer.json', 'w'))\n")
    spec = f"command:{PY} {agent / 'solve.py'}"
    out = tmp_path / "out"
    base = ["run", "-k", "count-nuclei", "--subject", spec, "--subject-expose", str(agent), "--out", str(out)]
    assert cli.main([*base, "--quiet"]) == 1
    (run_dir,) = out.glob("run-*")
    private = {str(tmp_path), str(SRC.parents[1]), str(Path.home()), sys.prefix}
    for path in run_dir.rglob("*"):
        if path.is_file() and path.name not in ("stdout.txt", "stderr.txt"):  # the subject's own words
            text = path.read_text(errors="replace")
            assert not [p for p in private if p in text], path
    extra = json.loads((run_dir / "run.json").read_text())["extra"]
    assert extra["subject_spec"].endswith(" solve.py") and extra["subject_options"]["sandbox"]["expose"] == ["agent"]
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(run_dir), "--quiet"]) == 2
    assert "give the same subject again" in capsys.readouterr().err
    assert cli.main(["run", "--resume", str(run_dir), "--subject", spec, "--quiet"]) == 2  # expose flag missing
    assert "does not match the subject given" in capsys.readouterr().err
    assert cli.main(["run", "--resume", str(run_dir), "--subject", spec, "--subject-expose", str(agent), "--quiet"]) == 1
    assert "resumed" in capsys.readouterr().out
