"""Subjects: parsing specs, and the command: subject's workspace, environment, outputs and limits."""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import make_toy_case, toy_fixture

from imagebench.case.model import Case
from imagebench.case.session import open_session
from imagebench.fixtures.fixture import Attempt, Fixture
from imagebench.sandbox.policy import SandboxPolicy
from imagebench.subjects import (
    CommandSubject,
    NopSubject,
    PythonSubject,
    ReferenceSubject,
    Subject,
    SubjectError,
    UnitContext,
    bind_subject,
    parse_subject,
    run_subject,
)

PY = shlex.quote(sys.executable)


def test_parse_the_four_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "toysolver_a.py").write_text("def solve(session):\n    session.namespace['area'] = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ref, nop = parse_subject("reference"), parse_subject("nop")
    py = parse_subject("python:toysolver_a:solve")
    cmd = parse_subject("command: echo hi")
    assert isinstance(ref, ReferenceSubject) and ref.name == "reference"
    assert isinstance(nop, NopSubject) and nop.name == "nop"
    assert isinstance(py, PythonSubject) and py.name == "python-toysolver_a.solve"
    assert isinstance(cmd, CommandSubject) and cmd.command == "echo hi"
    assert cmd.name == "command-" + hashlib.sha256(b"echo hi").hexdigest()[:8]
    for s in (ref, nop, py, cmd):
        assert isinstance(s, Subject)
        assert "/" not in s.name and s.name.strip() == s.name


@pytest.mark.parametrize("spec", ["", "agent", "python", "shell:ls", "Reference"])
def test_unknown_subject_lists_the_valid_forms(spec: str) -> None:
    with pytest.raises(SubjectError) as err:
        parse_subject(spec)
    text = str(err.value)
    for form in ("reference", "nop", "python:package.module:function", "command:<shell command>"):
        assert form in text


def test_python_subject_errors_are_clear_at_parse_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "toysolver_b.py").write_text("VALUE = 3\ndef solve(session):\n    pass\n")
    (tmp_path / "toysolver_broken.py").write_text("raise RuntimeError('cannot load')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SubjectError, match=r"cannot import module 'no_such_module_xyz'"):
        parse_subject("python:no_such_module_xyz:solve")
    with pytest.raises(SubjectError, match=r"cannot import module 'toysolver_broken'.*cannot load"):
        parse_subject("python:toysolver_broken:solve")
    with pytest.raises(SubjectError, match=r"has no attribute 'nope'"):
        parse_subject("python:toysolver_b:nope")
    with pytest.raises(SubjectError, match=r"not callable"):
        parse_subject("python:toysolver_b:VALUE")
    with pytest.raises(SubjectError, match=r"expected python:package.module:function"):
        parse_subject("python:toysolver_b")
    with pytest.raises(SubjectError, match="command is empty"):
        parse_subject("command:   ")


def test_reference_without_a_case_reference_is_a_subject_error(tmp_path: Path) -> None:
    case = make_toy_case(reference=None)
    with pytest.raises(SubjectError, match="has no reference solution"):
        bind_subject(ReferenceSubject(), case, UnitContext(tmp_path, 5.0))


def _run_command(
    command: str, tmp_path: Path, *, timeout: float = 20.0, sandbox: SandboxPolicy | None = None, **kw: object
):
    case = make_toy_case()
    fx = case.build()
    session = open_session(case, fx)
    ctx = UnitContext(sample_dir=tmp_path / "sample-0", timeout_s=timeout, **kw)  # type: ignore[arg-type]
    work = bind_subject(CommandSubject(command, sandbox=sandbox or SandboxPolicy()), case, ctx)
    run = run_subject(work, session, timeout)
    return session, run, ctx, fx


def test_bash_round_trip(tmp_path: Path) -> None:
    command = (
        "test -f prompt.md && test -f inputs/image.npy && test -d outputs || exit 9\n"
        "cp inputs/image.npy outputs/mask.npy\n"
        "echo 99 > outputs/area.json\n"
        'echo "hello from $(basename "$PWD")"; echo oops >&2'
    )
    session, run, ctx, fx = _run_command(command, tmp_path)
    assert run.error is None and not run.timed_out
    assert session.notes["exit_code"] == 0
    assert np.array_equal(session.namespace["mask"], fx.data["image"])
    assert session.namespace["area"] == 99
    assert (ctx.sample_dir / "stdout.txt").read_text().startswith("hello from workspace")  # /workspace in the sandbox
    assert (ctx.sample_dir / "stderr.txt").read_text() == "oops\n"
    assert session.workspace is not None and not session.workspace.exists()  # temporary, removed


def test_python_script_round_trip(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    script = tmp_path / "agent" / "solve.py"  # the subject's own code, shown to it read-only
    script.write_text(
        "import json, os, numpy as np\n"
        "ws = os.environ['IMAGEBENCH_WORKSPACE']\n"
        "assert os.getcwd() == os.path.realpath(ws), (os.getcwd(), ws)\n"
        "assert 'Leave:' in open('prompt.md').read()\n"
        "mask = np.load('inputs/image.npy') > 0.5\n"
        "np.save('outputs/mask.npy', mask)\n"
        "json.dump(int(mask.sum()), open('outputs/area.json', 'w'))\n"
    )
    policy = SandboxPolicy(expose=(script.parent,))
    session, run, ctx, fx = _run_command(f"{PY} {shlex.quote(str(script))}", tmp_path, sandbox=policy)
    assert run.error is None, (ctx.sample_dir / "stderr.txt").read_text()
    assert np.array_equal(session.namespace["mask"], np.asarray(fx.truth["mask"]))
    assert session.namespace["area"] == int(np.asarray(fx.truth["mask"]).sum())


def test_environment_withholds_truth_paths_and_only_sets_a_given_tensor_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(tmp_path / "tree"))
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))
    monkeypatch.setenv("IMAGEBENCH_TENSOR_URL", "grpc://stale:1")
    cmd = f"{PY} -c " + shlex.quote("import json, os; json.dump(dict(os.environ), open('outputs/area.json', 'w'))")
    for policy in (SandboxPolicy(), SandboxPolicy(enabled=False)):
        session, *_ = _run_command(cmd, tmp_path / policy.kind / "a", sandbox=policy)
        env = session.namespace["area"]
        assert "IMAGEBENCH_WORKSPACE" in env
        for withheld in ("IMAGEBENCH_FIXTURES", "IMAGEBENCH_OUTCOME_DIR", "IMAGEBENCH_TENSOR_URL"):
            assert withheld not in env
        session, *_ = _run_command(cmd, tmp_path / policy.kind / "b", tensor_url="grpc://127.0.0.1:5005", sandbox=policy)
        assert session.namespace["area"]["IMAGEBENCH_TENSOR_URL"] == "grpc://127.0.0.1:5005"


def test_garbage_outputs_are_unreadable_not_missing(tmp_path: Path) -> None:
    cmd = "echo garbage > outputs/mask.npy; printf '{not json' > outputs/area.json"
    session, run, _, _ = _run_command(cmd, tmp_path)
    assert "mask" not in session.namespace and "area" not in session.namespace
    why = session.notes["why_not"]
    assert why["mask"].startswith("outputs/mask.npy could not be read")
    assert why["area"].startswith("outputs/area.json could not be read")
    assert sorted(session.notes["unreadable"]) == ["area", "mask"]


def test_pickled_object_arrays_are_refused(tmp_path: Path) -> None:
    script = "import numpy as np; np.save('outputs/mask.npy', np.array([{'a': 1}], dtype=object), allow_pickle=True)"
    session, _, _, _ = _run_command(f"{PY} -c {shlex.quote(script)}", tmp_path)
    assert "mask" not in session.namespace
    assert "could not be read" in session.notes["why_not"]["mask"]


def test_crash_reports_the_exit_code(tmp_path: Path) -> None:
    session, run, ctx, _ = _run_command("echo dying >&2; exit 3", tmp_path)
    assert run.error is None and not run.timed_out
    assert session.notes["exit_code"] == 3
    assert session.notes["why_not"]["mask"] == "the command exited with code 3 and wrote no outputs/mask.npy"
    assert (ctx.sample_dir / "stderr.txt").read_text() == "dying\n"


def _sleepers(seconds: int) -> list[int]:
    """Host pids of live ``sleep <seconds>`` processes (a sandboxed command's own pids are its namespace's)."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["cmdline"] == ["sleep", str(seconds)] and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p.pid)
    return found


def _wait_until(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


@pytest.mark.parametrize("policy", [SandboxPolicy(), SandboxPolicy(enabled=False)], ids=["bubblewrap", "none"])
def test_hang_is_killed_with_its_whole_process_group(tmp_path: Path, policy: SandboxPolicy) -> None:
    mark = 600_000 + os.getpid() % 10_000
    start = time.monotonic()
    _, run, _, _ = _run_command(f"sleep {mark} & sleep 60", tmp_path / "s", timeout=1.0, sandbox=policy)
    assert run.timed_out
    assert "1 s limit" in run.timeout_reason
    assert time.monotonic() - start < 30  # not the 60 s the command wanted
    assert _wait_until(lambda: not _sleepers(mark)), "the background child outlived the timeout"


def test_keep_workspace_leaves_it_in_the_sample_folder(tmp_path: Path) -> None:
    case = make_toy_case()
    session = open_session(case, toy_fixture())
    ctx = UnitContext(sample_dir=tmp_path / "sample-0", timeout_s=10)
    work = bind_subject(CommandSubject("echo 5 > outputs/area.json", keep_workspace=True), case, ctx)
    run_subject(work, session, 10)
    ws = tmp_path / "sample-0" / "workspace"
    assert session.workspace == ws
    assert sorted(p.name for p in ws.iterdir()) == ["inputs", "outputs", "prompt.md"]
    assert session.namespace["area"] == 5


def test_in_process_subject_errors_and_timeouts(tmp_path: Path) -> None:
    case = make_toy_case()
    session = open_session(case, toy_fixture())

    def boom(s: object) -> None:
        raise ValueError("bad idea")

    run = run_subject(boom, session, 5)
    assert run.error is not None and run.error.startswith("ValueError: bad idea")

    def slow(s: object) -> None:
        time.sleep(3)

    run = run_subject(slow, session, 0.2)
    assert run.timed_out and "0.2 s limit" in run.timeout_reason


@pytest.mark.parametrize("policy", [SandboxPolicy(), SandboxPolicy(enabled=False)], ids=["bubblewrap", "none"])
def test_cancel_kills_a_running_command(tmp_path: Path, policy: SandboxPolicy) -> None:
    import threading

    case = make_toy_case()
    session = open_session(case, toy_fixture())
    mark = 610_000 + os.getpid() % 10_000
    ctx = UnitContext(sample_dir=tmp_path / "sample-0", timeout_s=60)
    work = bind_subject(CommandSubject(f"sleep {mark} & wait", sandbox=policy), case, ctx)
    thread = threading.Thread(target=work, args=(session,), daemon=True)
    thread.start()
    assert _wait_until(lambda: bool(_sleepers(mark)), 10)
    work.cancel()  # type: ignore[attr-defined]
    thread.join(10)
    assert not thread.is_alive()
    assert session.notes["exit_code"] < 0  # killed by a signal
    assert _wait_until(lambda: not _sleepers(mark))


# --------------------------------------------------------------------------- answers that are not text


def _answer_case() -> Case:
    from imagebench.case.model import Case, Collect
    from imagebench.fixtures.fixture import Metric, Outcome, read_scalar
    from imagebench.fixtures.specs import Procedural

    def build(*, seed: int) -> Fixture:
        return Fixture(provenance="nothing", data={"image": np.zeros((4, 4), np.float32)}, truth={"count": 3})

    def verify(fixture: Fixture, attempt: Attempt) -> Outcome:
        value, why = read_scalar(attempt, "answer")
        metric = Metric.missing("count_error", 0.0, why or "none") if value is None else Metric("count_error", 1.0, 0.0)
        return Outcome(fixture=fixture, attempt=attempt, metrics=[metric])

    return Case(
        case_id="answer", namespace="toy", task="Leave `answer`.", persona="a tester",
        fixture=Procedural(build, seed=0, tolerance={"count_error": 0.0}), layers=(),
        collect=(Collect("answer", "json"),), verify=verify,
    )  # fmt: skip


def _answer(command: str, tmp_path: Path):
    case = _answer_case()
    session = open_session(case, case.build())
    ctx = UnitContext(sample_dir=tmp_path / "sample-0", timeout_s=20)
    run = run_subject(bind_subject(CommandSubject(command), case, ctx), session, 20)
    assert run.error is None and not run.timed_out
    return session


def test_a_final_message_that_is_not_utf8_is_unreadable_and_named(tmp_path: Path) -> None:
    session = _answer("printf 'IMAGEBENCH_FINAL_JSON: {\"count\": 3}\\377\\n'", tmp_path)
    assert "final_message" not in session.notes  # never replaced by U+FFFD and scored
    assert session.notes["unreadable"] == ["answer"]
    why = session.notes["why_not"]["answer"]
    assert "final message" in why and "not UTF-8" in why and "byte 0xff at offset 35 of stdout" in why


def test_an_answer_file_that_is_not_utf8_is_unreadable_and_named(tmp_path: Path) -> None:
    session = _answer("printf '{\"count\": \"\\377\"}' > outputs/answer.json", tmp_path)
    assert session.notes["unreadable"] == ["answer"]
    assert "outputs/answer.json is not UTF-8 text: byte 0xff at offset 11" in session.notes["why_not"]["answer"]


def test_talk_without_an_answer_is_no_result(tmp_path: Path) -> None:
    from imagebench.runs.runner import run_unit

    session = _answer("echo 'I think there are three.'", tmp_path / "a")
    assert "final_message" not in session.notes and not session.notes.get("unreadable")
    assert "holds no answer" in session.notes["why_not"]["answer"]
    summary = run_unit(_answer_case(), CommandSubject("echo 'I think there are three.'"), 0, tmp_path / "run")
    assert summary.status == "no-result", summary.reason
    session = _answer("echo 'thinking'; echo 'IMAGEBENCH_FINAL_JSON: {\"count\": 3}'", tmp_path / "b")
    assert session.notes["final_message"].endswith('IMAGEBENCH_FINAL_JSON: {"count": 3}\n')


def test_final_message_cut_inside_a_character_is_still_text() -> None:
    from imagebench.subjects import final_message

    assert final_message("é".encode()[1:] + b"done", 4096) == ("done", None)
    text, why = final_message("é".encode() + b"\xff", 100)
    assert text is None and why is not None and "byte 0xff at offset 102" in why


def test_baseline_subject_runs_the_cases_naive_answer_and_refuses_a_case_without_one() -> None:
    from dataclasses import replace as _replace

    from imagebench.cases import get_case
    from imagebench.subjects import BaselineSubject, SubjectError, UnitContext, parse_subject

    subject = parse_subject("baseline")
    assert isinstance(subject, BaselineSubject)
    case = get_case("segment-nuclei/synthetic-blobs")
    called = []
    with_one = _replace(case, baseline=lambda session: called.append(session))
    bound = subject.bind(with_one, UnitContext(Path("."), 1.0))
    bound("session")
    assert called == ["session"]
    with pytest.raises(SubjectError, match="no naive baseline"):
        subject.bind(_replace(case, baseline=None), UnitContext(Path("."), 1.0))
