"""A case session served to an agent over MCP (issue 16): every tool, malformed calls, no truth in
any output, the transcript, and the example agent scoring ok through ``--subject-mcp`` in the
sandbox (a trigger case graded from the transcript, not from a file the subject writes)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case, truth_leaks

import imagebench
from imagebench import cases as builtin
from imagebench.case.model import select_cases
from imagebench.case.session import open_session
from imagebench.executor import run_cases
from imagebench.records import read_record
from imagebench.runs.runner import prepare_fixture
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import (
    CommandSubject,
    options_from_record,
    options_record,
    parse_subject,
)
from imagebench.subjects.mcp.tools import MAX_LIST_VALUES, AgentSession, CaseView, ToolError
from imagebench.subjects.mcp.toolset import tool_names
from imagebench.subjects.mcp.transcript import TRANSCRIPT, Transcript

pytest.importorskip("mcp")

ROOT = Path(imagebench.__file__).resolve().parents[2]
AGENTS = ROOT / "examples" / "agents"
AGENT = AGENTS / "classical_agent.py"
BUNDLE = ROOT / "examples" / "bundles" / "segment-nuclei"
SANDBOX = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def _case(label: str):
    (case,), _ = select_cases(builtin.all_cases(), [label])
    return case


def _agent(case, workspace: Path | None = None) -> tuple[AgentSession, Any]:
    from imagebench.subjects.mcp.folder import McpFolder

    fixture = prepare_fixture(case).fixture
    session = open_session(case, fixture)
    reads = McpFolder(workspace) if workspace is not None else None
    return AgentSession(CaseView.of(case), session, workspace=workspace, reads=reads), fixture


def _call(agent: AgentSession, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each call through the SDK's client, connected in memory to the server: (isError, content)."""
    from mcp.shared.memory import create_connected_server_and_client_session
    from mcp.types import Implementation

    from imagebench.subjects.mcp.server import build_server

    async def go() -> list[Any]:
        out = []
        async with create_connected_server_and_client_session(
            build_server(agent), client_info=Implementation(name="test-client", version="0")
        ) as client:
            for tool, args in calls:
                out.append(await client.call_tool(tool, args))
        return out

    return asyncio.run(go())


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


# --------------------------------------------------------------------------- the tools


def test_every_tool_answers_and_no_output_holds_truth(tmp_path: Path) -> None:
    case = make_toy_case()
    agent, fixture = _agent(case, tmp_path)
    mask = np.zeros((24, 24), np.uint8)
    mask[3:8, 3:9] = 1
    calls = [
        ("get_prompt", {}),
        ("list_layers", {}),
        ("read_layer", {"name": "image"}),
        ("read_layer", {"name": "image", "region": [[0, 4], [2, 6]]}),
        ("read_layer", {"name": "image", "encoding": "base64"}),
        ("read_layer", {"name": "image", "encoding": "npy"}),
        ("snapshot", {}),
        ("snapshot", {"layer": "image"}),
        ("list_skills", {}),
        ("use_skill", {"name": "toy"}),
        ("add_layer", {"name": "mask", "kind": "labels", "data": mask.tolist(), "like": "image"}),
        ("update_layer", {"name": "mask", "data": mask.tolist()}),
        ("set_answer", {"name": "area", "value": 30}),
        ("submit", {}),
    ]
    results = _call(agent, calls)
    tools = {t.name for t in asyncio.run(_list_tools(agent))}
    assert tools == set(tool_names()) and set(tool_names("case")) == {tool for tool, _ in calls}, "every case tool"
    for (tool, _args), result in zip(calls, results, strict=True):
        assert not result.isError, (tool, _text(result))
        for content in result.content:
            blob = base64.b64decode(content.data) if content.type == "image" else content.text.encode()
            assert truth_leaks(dict(fixture.truth), blob=blob) == [], tool
            if content.type == "text":
                assert "secret" not in content.text, tool  # a truth key with no public counterpart
                got = json.loads(content.text)
                if tool == "read_layer" and "data" in got and isinstance(got["data"], list):
                    assert truth_leaks(dict(fixture.truth), array=np.asarray(got["data"])) == []
    npy = json.loads(_text(results[5]))["path"]
    assert np.array_equal(np.load(tmp_path / npy), fixture.data["image"])
    b64 = json.loads(_text(results[4]))
    raw = np.frombuffer(base64.b64decode(b64["data"]), dtype=np.dtype(b64["dtype"])).reshape(b64["shape"])
    assert np.array_equal(raw, fixture.data["image"])
    assert results[6].content[0].type == "image" and base64.b64decode(results[6].content[0].data)[:4] == b"\x89PNG"
    left = agent.leavings()
    assert left["area"] == 30 and left["mask"].dtype == np.int32 and left["mask"].sum() == 30
    assert agent.transcript.client == "test-client" and agent.transcript.submitted


async def _list_tools(agent: AgentSession) -> Any:
    from mcp.shared.memory import create_connected_server_and_client_session

    from imagebench.subjects.mcp.server import build_server

    async with create_connected_server_and_client_session(build_server(agent)) as client:
        return (await client.list_tools()).tools


def test_the_server_is_built_from_what_the_subject_sees_only() -> None:
    case = _case("segment-nuclei/count-nuclei")
    view = CaseView.of(case)
    assert view.answer_fields == {"count": "integer_equal"}  # field names and comparators; no gold
    agent, fixture = _agent(case)
    assert not any(v is fixture or v is fixture.truth for v in vars(agent).values())
    assert "fixture" not in vars(view) and "truth" not in json.dumps(agent.get_prompt())


def test_malformed_calls_get_named_errors_and_the_session_goes_on(tmp_path: Path) -> None:
    agent, _ = _agent(_case("segment-nuclei/synthetic-blobs"), tmp_path)
    (tmp_path / "small.npy").write_bytes(b"")
    np.save(tmp_path / "small.npy", np.zeros((10, 10), np.int32))
    big = 1024
    agent.layers["nuclei"].data = np.zeros((big, big), np.float32)  # a layer past the list limit
    calls = [
        ("read_layer", {"name": "nucleus"}),
        ("read_layer", {"name": "nuclei"}),
        ("read_layer", {"name": "nuclei", "region": [[0, 5000]]}),
        ("add_layer", {"name": "labels", "kind": "labels", "npy": "small.npy"}),
        ("add_layer", {"name": "labels", "kind": "labels", "npy": "../escape.npy"}),
        ("add_layer", {"name": "labels", "kind": "labels", "npy": "/etc/passwd.npy"}),
        ("add_layer", {"name": "nuclei", "kind": "labels", "data": [[1]]}),
        ("add_layer", {"name": "labels", "kind": "volume", "data": [[1]]}),
        ("update_layer", {"name": "labels", "data": [[1]]}),
        ("set_answer", {"name": "answer", "value": {"count": 3}}),
        ("read_layer", {"name": "nuclei", "region": [[0, 2], [0, 2]]}),
    ]
    results = _call(agent, calls)
    errors = [_text(r) for r in results[:-1]]
    assert all(r.isError for r in results[:-1]), errors
    assert "no layer named 'nucleus'" in errors[0] and "'nuclei'" in errors[0]
    assert f"limit of {MAX_LIST_VALUES}" in errors[1] and "region" in errors[1]
    assert "region axis 0" in errors[2] and "<= 1024" in errors[2]
    assert "shape [10, 10] differs from its input 'nuclei', shape [1024, 1024]" in errors[3]
    assert "outside your workspace" in errors[4] and str(tmp_path) not in errors[4]
    assert "outside your workspace" in errors[5]
    assert "is an input layer" in errors[6]
    assert "add_layer: argument 'kind': Input should be 'labels', 'image'" in errors[7] and "got 'volume'" in errors[7]
    assert "no layer named 'labels'" in errors[8]
    assert "asks for no answer named 'answer'" in errors[9]
    assert not results[-1].isError and json.loads(_text(results[-1]))["shape"] == [2, 2]
    recorded = agent.transcript.calls
    assert [c.ok for c in recorded] == [False] * 10 + [True]
    assert recorded[0].error == errors[0].removeprefix("Error executing tool read_layer: ")


def test_an_answer_failing_the_schema_names_the_field() -> None:
    agent, _ = _agent(_case("segment-nuclei/count-nuclei"))
    with pytest.raises(ToolError, match=r"answer field 'count' must be an integer \(integer_equal\), got '12'"):
        agent.set_answer({"count": "12"})
    with pytest.raises(ToolError, match=r"answer field 'count' is missing"):
        agent.set_answer({"n": 12})
    with pytest.raises(ToolError, match="must be a JSON object"):
        agent.set_answer(12)
    assert agent.set_answer({"count": 12}) == {"set": "answer"}
    agent.submit()
    with pytest.raises(ToolError, match="submitted"):
        agent.set_answer({"count": 13})
    assert agent.leavings() == {"answer": {"count": 12}}


def test_the_transcript_summarises_arguments_and_keeps_timings(tmp_path: Path) -> None:
    agent, _ = _agent(_case("segment-nuclei/synthetic-blobs"))
    labels = np.zeros((256, 256), np.int32)
    labels[10:20, 10:20] = 1
    _call(agent, [("add_layer", {"name": "labels", "kind": "labels", "data": labels.tolist()}), ("submit", {})])
    from imagebench.subjects.mcp.host import write_transcript

    path = write_transcript(agent, tmp_path)
    record = read_record(path, Transcript)
    add = record.calls[0]
    assert add.tool == "add_layer" and add.ok and add.seconds >= 0 and add.started_s >= 0
    assert add.arguments["data"] == "<nested list of 65536 values, shape [256, 256]>"
    assert path.stat().st_size < 8000  # no array kept
    assert record.submitted and record.client == "test-client"


def test_subject_mcp_options_round_trip_and_refuse_other_subjects() -> None:
    subject = parse_subject("command:true", mcp=True, sandbox=SandboxPolicy(enabled=False))
    assert isinstance(subject, CommandSubject) and subject.mcp and subject.name.endswith("-mcp")
    assert options_from_record(options_record(subject))["mcp"] is True
    with pytest.raises(ValueError, match="--subject-mcp applies to command: subjects only"):
        parse_subject("reference", mcp=True)


# --------------------------------------------------------------------------- headless, in the sandbox


def _agent_subject(command: str | None = None) -> CommandSubject:
    cmd = command or f"python3 {shlex.quote(str(AGENT))}"
    return CommandSubject(cmd, sandbox=SandboxPolicy(expose=(AGENTS,)), mcp=True)


@SANDBOX
def test_the_example_agent_scores_ok_through_subject_mcp_in_the_sandbox(tmp_path: Path) -> None:
    labels = ["segment-nuclei/synthetic-blobs", "segment-nuclei/count-nuclei"]
    result = run_cases([_case(x) for x in labels], _agent_subject(), out=tmp_path, progress=False)
    for label in labels:
        (summary,) = result.samples[label]
        assert summary.status == "ok", summary.reason
        assert summary.sandbox == "bubblewrap"
        sample = result.run_dir / summary.subject / label / "sample-0"
        record = read_record(sample / TRANSCRIPT, Transcript)
        assert record.client == "classical-agent" and record.submitted and record.route == "socket"
        assert [c.tool for c in record.calls][-1] == "submit"
        assert summary.detail["attempt_notes"]["mcp"]["calls"] == len(record.calls)
        assert not (sample / "workspace").exists()
    from imagebench.report import write_html_report

    html = write_html_report(result.run_dir).read_text(encoding="utf-8")
    assert "tool calls over MCP" in html and "classical-agent" in html and "read_layer" in html


@SANDBOX
def test_the_agent_reaches_the_server_and_nothing_else(tmp_path: Path) -> None:
    """The workspace holds mcp.json, naming the bridge in the harness's folder shown at /mcp; the
    bridge names no harness path; the network is off."""
    probe = (
        "cat mcp.json > /dev/stderr; cat /mcp/bridge.py | grep -c /work >&2; "
        "python3 -c 'import socket; s=socket.socket(); s.settimeout(1); s.connect((\"1.1.1.1\", 80))' "
        "&& echo NET-OPEN >&2; "
        f"python3 {shlex.quote(str(AGENT))}"
    )
    result = run_cases([_case("segment-nuclei/count-nuclei")], _agent_subject(probe), out=tmp_path, progress=False)
    (summary,) = result.samples["segment-nuclei/count-nuclei"]
    assert summary.status == "ok", summary.reason
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert '"args": [\n        "/mcp/bridge.py"' in err
    assert "NET-OPEN" not in err and str(ROOT) not in err


@SANDBOX
def test_a_trigger_case_is_graded_from_the_transcript_not_from_a_file(tmp_path: Path) -> None:
    from imagebench.bundle.grading import SKILL_EVENT, TRACE_NAME
    from imagebench.bundle.load import load_bundle
    from imagebench.subjects.mcp import tools

    assert (tools.TRACE_NAME, tools.SKILL_EVENT) == (TRACE_NAME, SKILL_EVENT)
    (case,) = [c for c in load_bundle(BUNDLE).cases if c.case_class == "trigger"]
    honest = run_cases([case], _agent_subject(), out=tmp_path / "a", progress=False)
    (summary,) = honest.samples[case.label]
    assert summary.status == "ok", summary.reason
    assert summary.detail["activation"] == "the harness observed skill 'segment-nuclei' activate (through mcp)"
    assert summary.detail["observed"]["channels"] == ["mcp", "skill-tool"]  # a command of a trigger case gets both
    # A subject that only claims the skill activated (a trace file), calling no tool, fails.
    claim = 'echo \'[{"type": "skill", "name": "segment-nuclei"}]\' > outputs/trace.json'
    liar = run_cases([case], _agent_subject(claim), out=tmp_path / "b", progress=False)
    (summary,) = liar.samples[case.label]
    assert summary.status == "wrong-answer", summary.reason
    assert (
        summary.detail["activation"] == "the harness observed no skill activate (open to the subject: mcp, skill-tool)"
    )
    assert "outputs/trace.json" in summary.detail["ignored_trace"]


def test_use_skill_is_what_the_trigger_verifier_reads_right_skill_or_wrong(tmp_path: Path) -> None:
    """In memory: the agent's use_skill calls become the harness's note (channel mcp), and the
    trigger verifier passes the right skill and fails another; set_answer(trace) is refused."""
    from imagebench.bundle.load import load_bundle
    from imagebench.case.session import collect_attempt
    from imagebench.runs.runner import observed_notes

    (case,) = [c for c in load_bundle(BUNDLE).cases if c.case_class == "trigger"]
    fixture = prepare_fixture(case).fixture
    for skill, status in (("segment-nuclei", "ok"), ("drift-correction", "wrong-answer")):
        session = open_session(case, fixture)
        agent = AgentSession(CaseView.of(case), session)
        assert skill in agent.view.skills and len(agent.view.skills) > 2  # a choice, not a formality
        refused, used = _call(
            agent, [("set_answer", {"name": "trace", "value": {"x": 1}}), ("use_skill", {"name": skill})]
        )
        assert refused.isError and "recorded by the harness" in _text(refused) and not used.isError
        agent.apply_to(session)
        assert "trace" not in session.namespace
        attempt = collect_attempt(case, "agent", session.lookup)
        observed_notes(attempt, session, "none", "agent")
        outcome = case.verify(fixture, attempt)
        assert outcome.status == status, outcome.detail
        assert outcome.detail["observed"] == {"channels": ["mcp"], "activations": [{"name": skill, "via": "mcp"}]}


def test_mcp_serve_on_stdio_scores_what_the_client_left(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import Implementation

    env = {**os.environ, "PYTHONPATH": str(Path(imagebench.__file__).resolve().parents[1])}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "imagebench", "mcp", "serve", "segment-nuclei/count-nuclei", "--out", str(tmp_path)],
        env=env,
    )

    async def go() -> Any:
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w, client_info=Implementation(name="stdio-test", version="0")) as c:
                await c.initialize()
                prompt = json.loads(_text(await c.call_tool("get_prompt", {})))
                bad = await c.call_tool("set_answer", {"value": {"count": 1.5}})
                await c.call_tool("set_answer", {"value": {"count": 1}})
                await c.call_tool("submit", {})
                return prompt, bad

    prompt, bad = asyncio.run(go())
    assert prompt["leave"][0]["fields"] == {"count": "integer_equal"} and bad.isError
    (run_dir,) = tmp_path.glob("run-*")
    (sample,) = run_dir.glob("mcp-stdio/segment-nuclei/count-nuclei/sample-0")
    summary = json.loads((sample / "summary.json").read_text())
    assert summary["status"] == "wrong-answer" and summary["sandbox"] == "none"  # 1 is not the count
    assert (run_dir / "report.html").is_file()  # as `run` writes it
    record = read_record(sample / TRANSCRIPT, Transcript)
    assert record.client == "stdio-test" and [c.ok for c in record.calls] == [True, False, True, True]


# --------------------------------------------------------------------------- time-lapses and tracks

TRACKING = "tracking/moving-nuclei"


def test_a_time_lapse_is_read_by_frames_and_tracks_are_left_as_a_lineage_table(tmp_path: Path) -> None:
    from imagebench.case.session import collect_attempt
    from imagebench.cases.tracking import track_nuclei

    case = _case(TRACKING)
    agent, fixture = _agent(case, tmp_path)
    info = {x["name"]: x for x in agent.list_layers()["layers"]}
    assert info["movie"]["shape"] == [30, 128, 128] and info["movie"]["axes"] == ["t", "y", "x"]
    one = agent.read_layer("movie", region=[[7, 8], [0, 128], [0, 128]], encoding="base64")
    assert one["shape"] == [1, 128, 128]
    with pytest.raises(ToolError, match="more than the limit"):  # the whole movie is too big as a JSON list
        agent.read_layer("movie")
    result = track_nuclei(fixture.data["movie"])
    agent.add_layer("masks", "labels", data=result.labels.astype(np.int32).tolist())
    table = result.lineage.as_array()
    with pytest.raises(ToolError, match=r"\(n, 4\) rows label, begin, end, parent"):
        agent.add_layer("tracks", "tracks", data=table[:, :3].tolist())
    bad = table.copy()
    bad[0, 2] = 99
    with pytest.raises(ToolError, match="ends at frame 99, the time-lapse has 30"):
        agent.add_layer("tracks", "tracks", data=bad.tolist())
    with pytest.raises(ToolError, match="must be a tracks layer, not points"):
        agent.add_layer("tracks", "points", data=[[1.0, 2.0]])
    agent.add_layer("tracks", "tracks", data=table.tolist())
    png = agent.snapshot(frame=15)
    assert png.startswith(b"\x89PNG")
    with pytest.raises(ToolError, match="frame must be a whole number from 0 to 29"):
        agent.snapshot(frame=30)
    session = open_session(case, fixture)
    agent.apply_to(session)
    attempt = collect_attempt(case, "agent", session.lookup)
    outcome = case.verify(fixture, attempt)
    assert outcome.passed, [(m.name, m.value) for m in outcome.metrics]
    assert not truth_leaks(dict(fixture.truth), blob=json.dumps(agent.list_layers()).encode())


@SANDBOX
def test_the_example_agent_tracks_a_time_lapse_through_subject_mcp(tmp_path: Path) -> None:
    result = run_cases([_case(TRACKING)], _agent_subject(), out=tmp_path, progress=False)
    (summary,) = result.samples[TRACKING]
    assert summary.status == "ok", (summary.reason, [(m.name, m.value) for m in summary.metrics])
    record = read_record(result.run_dir / summary.subject / TRACKING / "sample-0" / TRANSCRIPT, Transcript)
    tools = [c.tool for c in record.calls]
    assert tools.count("add_layer") == 2 and "snapshot" in tools and tools[-1] == "submit"
