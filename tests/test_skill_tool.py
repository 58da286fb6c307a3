"""The harness's ``skill`` tool (issue 25, part 8): a trigger case is graded only from what the harness
observed. The tool's server on its own (list, activate, refuse, limits); then, in the sandbox, an
honest command that activates the right skill passes, one that activates another fails, one that
writes its own ``outputs/trace.json`` is never passed (and cannot touch the tool's folder); a
``python:`` subject, in process or isolated, is blocked, even one that forges the harness's note."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import imagebench
from imagebench.bundle.load import load_bundle
from imagebench.case.model import Case
from imagebench.executor import run_cases
from imagebench.records import SampleSummary, read_record
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import CommandSubject, PythonSubject, parse_subject
from imagebench.subjects.mcp.transcript import Transcript
from imagebench.subjects.skilltool import (
    MAX_CONNECTIONS,
    MAX_REQUEST,
    README_NAME,
    TRANSCRIPT_NAME,
    SkillFolder,
    SkillServer,
)

SANDBOX = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
ROOT = Path(imagebench.__file__).resolve().parents[2]
BUNDLE = ROOT / "examples" / "bundles" / "segment-nuclei"
SOLVERS = ROOT / "examples" / "solvers"
SOLVER = f"python3 {shlex.quote(str(SOLVERS / 'count_nuclei.py'))}"
CLAIM = "echo '[{\"type\": \"skill\", \"name\": \"segment-nuclei\"}]' > outputs/trace.json"


def _case(case_class: str = "trigger") -> Case:
    (case,) = [c for c in load_bundle(BUNDLE).cases if c.case_class == case_class]
    return case


def _sample(tmp_path: Path, subject: Any, case: Case | None = None) -> tuple[SampleSummary, Path]:
    case = case or _case()
    result = run_cases([case], subject, out=tmp_path, progress=False)
    (summary,) = result.samples[case.label]
    return summary, result.run_dir / summary.subject / case.label / "sample-0"


def _command(command: str, **policy: Any) -> CommandSubject:
    return CommandSubject(command, sandbox=SandboxPolicy(expose=(SOLVERS,), **policy))


# --------------------------------------------------------------------------- the tool's server


@pytest.fixture
def served() -> Any:
    folder = SkillFolder()  # under the temp folder: a short socket path
    server = SkillServer(
        {"nuclei": "counts nuclei.", "drift": "registers frames"},
        folder.socket_path,
        label="s/c",
        instructions={"nuclei": "# Count nuclei\n\n1. Smooth, threshold, split touching nuclei; count the labels."},
    )
    yield folder, server
    server.close()
    folder.remove()


def _tool(folder: SkillFolder, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(folder.program), *args], capture_output=True, text=True, timeout=30)


def _raw(folder: SkillFolder, data: bytes) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(folder.socket_path))
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(10)
        got = b""
        while chunk := s.recv(1 << 16):
            got += chunk
    return json.loads(got)


def test_a_skill_without_instructions_is_given_its_description() -> None:
    folder = SkillFolder()
    server = SkillServer({"drift": "registers frames"}, folder.socket_path, label="s/c")
    try:
        assert json.loads(_tool(folder, "drift").stdout)["instructions"] == "registers frames"
    finally:
        server.close()
        folder.remove()


def test_the_tool_lists_activates_and_refuses(served: Any) -> None:
    folder, server = served
    listed = _tool(folder, "--list")
    assert listed.returncode == 0, listed.stderr
    assert [s["name"] for s in json.loads(listed.stdout)["skills"]] == ["drift", "nuclei"]
    used = _tool(folder, "nuclei")
    assert used.returncode == 0 and json.loads(used.stdout) == {
        "skill": "nuclei",
        "activated": True,
        "instructions": "# Count nuclei\n\n1. Smooth, threshold, split touching nuclei; count the labels.",
    }  # the skill's SKILL.md instructions
    unknown = _tool(folder, "segment-everything")
    assert unknown.returncode == 1 and "no skill named 'segment-everything'" in unknown.stderr
    assert _tool(folder).returncode == 2 and _tool(folder, "a", "b").returncode == 2
    assert "error" in _raw(folder, b"not json\n")
    assert "error" in _raw(folder, b'{"use": 5}\n')
    assert "error" in _raw(folder, b'{"use": "nuclei", "as": "someone else"}\n')
    assert "at most" in _raw(folder, b"x" * (MAX_REQUEST + 10))["error"]
    assert server.observed() == ["nuclei"], "only the one accepted activation is recorded"
    calls = server.transcript.calls
    assert [c.ok for c in calls] == [True, True, False, False, False, False, False] and calls[1].arguments == {"use": "nuclei"}
    assert server.transcript.route == "skill-tool" and server.transcript.skills == ["nuclei"]


def test_connections_past_the_limit_are_closed_and_close_cuts_the_rest(served: Any) -> None:
    folder, server = served
    held = []
    for _ in range(MAX_CONNECTIONS):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(folder.socket_path))
        held.append(s)
    time.sleep(0.3)
    extra = socket.socket(socket.AF_UNIX)
    extra.connect(str(folder.socket_path))
    extra.settimeout(5)
    assert extra.recv(1) == b"", "a connection past the limit is closed at once"
    start = time.perf_counter()
    server.close()  # the held ones never sent a line: they are cut, not waited for
    assert time.perf_counter() - start < 5
    assert not folder.socket_path.exists() and server.observed() == []
    for s in [*held, extra]:
        s.close()


# --------------------------------------------------------------------------- a command subject, in the sandbox


@SANDBOX
def test_an_honest_command_that_activates_the_skill_through_the_tool_passes(tmp_path: Path) -> None:
    summary, sample = _sample(tmp_path, _command(SOLVER))
    assert summary.status == "ok", summary.reason
    assert summary.detail["observed"] == {
        "channels": ["skill-tool"],
        "activations": [{"name": "segment-nuclei", "via": "skill-tool"}],
    }
    assert "ignored_trace" not in summary.detail
    record = read_record(sample / TRANSCRIPT_NAME, Transcript)
    assert [(c.tool, c.arguments, c.ok) for c in record.calls] == [("skill", {"use": "segment-nuclei"}, True)]
    assert summary.detail["attempt_notes"]["skill_tool"]["calls"] == 1


@SANDBOX
def test_a_command_that_activates_another_skill_fails(tmp_path: Path) -> None:
    probe = (
        f'test "$IMAGEBENCH_SKILL_TOOL" = /skill/skill && grep -q drift-correction {README_NAME} && '
        '"$IMAGEBENCH_SKILL_TOOL" drift-correction && python3 /skill/skill --list > /dev/null && echo TOOL-OK >&2'
    )
    summary, sample = _sample(tmp_path, _command(probe))
    assert "TOOL-OK" in (sample / "stderr.txt").read_text(), (sample / "stderr.txt").read_text()
    assert summary.status == "wrong-answer", summary.reason
    assert summary.detail["activation"] == (
        "the harness observed skill(s) ['drift-correction'] activate, not 'segment-nuclei' (through skill-tool)"
    )


@SANDBOX
def test_a_command_that_writes_its_own_trace_is_never_passed_and_cannot_touch_the_tool(tmp_path: Path) -> None:
    attempts = (
        "echo x > /skill/skill",
        "rm -f /skill/skill.sock",
        "ln -s /workspace/outputs /skill/outputs",
        "cp /skill/skill /tmp/s && mv /tmp/s /skill/skill",
    )
    tries = "; ".join(f"({a}) 2>/dev/null && echo 'WROTE: {a}' >&2" for a in attempts)
    command = f"{CLAIM}; cp outputs/trace.json outputs/trace.npy; {tries}; true"
    summary, sample = _sample(tmp_path, _command(command))
    assert "WROTE" not in (sample / "stderr.txt").read_text()
    assert summary.status == "wrong-answer" and not summary.passed, summary.reason
    assert "outputs/trace.json and outputs/trace.npy" in summary.detail["ignored_trace"]
    assert summary.detail["observed"] == {"channels": ["skill-tool"], "activations": []}


@SANDBOX
def test_a_case_that_is_not_a_trigger_case_gets_no_skill_tool(tmp_path: Path) -> None:
    probe = f'test -z "$IMAGEBENCH_SKILL_TOOL" && test ! -e {README_NAME} && test ! -e /skill && echo NO-TOOL >&2'
    summary, sample = _sample(tmp_path, _command(probe), _case("golden"))
    assert "NO-TOOL" in (sample / "stderr.txt").read_text()
    assert not (sample / TRANSCRIPT_NAME).exists() and summary.status != "ok"


def test_an_unsandboxed_command_reaches_the_tool_at_its_own_path(tmp_path: Path) -> None:
    summary, _ = _sample(tmp_path, CommandSubject(SOLVER.replace("python3", shlex.quote(sys.executable), 1), sandbox=SandboxPolicy(enabled=False)))
    assert summary.status == "ok" and summary.sandbox == "none", summary.reason


# --------------------------------------------------------------------------- python subjects: not observed


def forger(session: Any) -> None:
    """An in-process subject that binds a trace and writes the harness's note itself."""
    session.namespace["trace"] = [{"type": "skill", "name": "segment-nuclei"}]
    session.notes["observed_skills"] = {"channels": ["skill-tool"], "activations": [{"name": "segment-nuclei", "via": "skill-tool"}]}


def test_a_python_subject_is_blocked_even_when_it_forges_the_harness_note(tmp_path: Path) -> None:
    summary, _ = _sample(tmp_path, PythonSubject(target="test_skill_tool:forger", function=forger))
    assert summary.status == "blocked" and not summary.passed
    assert summary.reason.startswith("not graded: python-test_skill_tool.forger runs in the harness's own process")
    assert "observed" not in summary.detail and "ignored for grading" in summary.detail["ignored_trace"]


@SANDBOX
def test_an_isolated_python_subject_is_blocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(SOLVERS))
    summary, _ = _sample(tmp_path, parse_subject("python:count_nuclei:solve", isolate=True))
    assert summary.status == "blocked" and summary.sandbox == "bubblewrap"
    assert "was given no channel the harness owns" in summary.reason, summary.reason
