"""Access settings (issue 31 part 6): named, declared by a run, enforced by the sandbox and by the
tools served, recorded with their evidence, part of C4, and a case's declared settings honoured.

The sandbox tests run a dishonest subject (``tests/access_probe.py``) that tries to read around its
setting: a shell by several routes, other programs, a program copied to /tmp, the inputs on disk,
the workspace's listing, the data plane, and read_layer/snapshot over MCP."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import make_toy_case

import imagebench
from imagebench import cases as builtin
from imagebench.case.model import select_cases
from imagebench.executor import run_cases
from imagebench.sandbox.access import (
    VIEW_TOOLS,
    AccessError,
    command_words,
    offered_tools,
    parse_access,
    refusal,
    subject_problem,
    tool_refusal,
)
from imagebench.sandbox.noexec import landlock_abi
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import CommandSubject, SubjectError, parse_subject

ROOT = Path(imagebench.__file__).resolve().parents[2]
AGENTS = ROOT / "examples" / "agents"
PROBE = Path(__file__).with_name("access_probe.py")
SANDBOX = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
COUNT = "segment-nuclei/count-nuclei"
ALL_TOOLS = ["get_prompt", "list_layers", "read_layer", "snapshot", "add_layer", "set_answer", "use_skill", "submit"]


def _case(label: str) -> Any:
    (case,), _ = select_cases(builtin.all_cases(), [label])
    return case


# --------------------------------------------------------------------------- the settings


def test_the_settings_parse_and_a_bad_one_names_what_is_expected() -> None:
    assert [parse_access(s).name for s in ("files+code", "files+code+tools", "tools", "views-3")] == [
        "files+code", "files+code+tools", "tools", "views-3",
    ]  # fmt: skip
    tools, views = parse_access("tools"), parse_access("views-3")
    assert (tools.files, tools.code, tools.tools, tools.views) == (False, False, True, None)
    assert (views.files, views.code, views.tools, views.views) == (False, True, True, 3)
    for bad in ("files", "views-0", "views-99", "views-", "Tools", ""):
        with pytest.raises(AccessError, match="is not one of files\\+code, files\\+code\\+tools, tools, views-N"):
            parse_access(bad)


def test_the_tools_served_are_filtered_by_name_in_one_place() -> None:
    assert offered_tools(parse_access("files+code+tools"), ALL_TOOLS) == tuple(ALL_TOOLS)
    assert offered_tools(parse_access("tools"), ALL_TOOLS) == tuple(ALL_TOOLS)
    assert offered_tools(parse_access("files+code"), ALL_TOOLS) == ()
    views = offered_tools(parse_access("views-2"), [*ALL_TOOLS, "set_dims", "multi_snapshot"])
    assert (
        "read_layer" not in views and "snapshot" not in views and "set_dims" not in views
    )  # a new tool: not until named
    assert set(views) <= VIEW_TOOLS and "submit" in views
    assert tool_refusal(parse_access("views-2"), "read_layer") is not None
    assert tool_refusal(None, "read_layer") is None


def test_a_subject_that_cannot_be_held_to_a_setting_is_refused_before_it_runs() -> None:
    tools = parse_access("tools")
    assert "add --subject-mcp" in str(subject_problem(tools, sandboxed=True, mcp=False, command="python3 a.py"))
    assert "drop --no-sandbox" in str(subject_problem(tools, sandboxed=False, mcp=True, command="python3 a.py"))
    assert "serves no MCP tools" in str(
        subject_problem(parse_access("files+code"), sandboxed=True, mcp=True, command="x")
    )
    assert "not one" in str(subject_problem(tools, sandboxed=True, mcp=True, command=None))  # python:, reference
    assert subject_problem(parse_access("files+code"), sandboxed=True, mcp=False, command=None) is None
    # without a shell, shell syntax would be passed on as words: refused, naming it
    for line in ("python3 a.py | tee x", "python3 a.py; sh", "python3 a.py > out", "a && b"):
        with pytest.raises(AccessError, match="shell syntax"):
            command_words(line)
    assert command_words("FOO=1 python3 'a b.py' --x") == ["FOO=1", "python3", "a b.py", "--x"]
    with pytest.raises(SubjectError, match="shell syntax"):
        parse_subject("command:python3 a.py | cat", sandbox=SandboxPolicy(access="tools"), isolate=False, mcp=True)


def test_the_policy_records_its_setting_and_refuses_a_bad_one() -> None:
    policy = SandboxPolicy(access="views-3")
    assert SandboxPolicy.from_record(policy.to_record()) == policy
    assert "access" not in SandboxPolicy().to_record()  # a run declaring none records what it always did
    with pytest.raises(ValueError, match="field 'access'"):
        SandboxPolicy.from_record({**policy.to_record(), "access": "shell"})


def test_the_cli_refuses_a_bad_setting_and_an_in_process_subject(capsys: pytest.CaptureFixture[str]) -> None:
    from imagebench import cli

    assert cli.main(["run", "-k", COUNT, "--access", "shell", "--subject", "nop"]) == 2
    assert "--access: access setting 'shell' is not one of" in capsys.readouterr().err
    assert cli.main(["run", "-k", COUNT, "--access", "tools", "--subject", "nop"]) == 2
    assert "enforced by the sandbox around a command" in capsys.readouterr().err


def test_a_case_not_meaningful_under_a_setting_is_skipped_never_a_zero(tmp_path: Path) -> None:
    views = parse_access("views-3")
    case = make_toy_case("declared")
    declared = type(case)(**{**case.__dict__, "meta": {"access": ["files+code", "tools"]}})
    assert refusal(declared, parse_access("tools")) is None
    why = refusal(declared, views)
    assert why is not None and "declares it is meaningful under files+code, tools, not views-3" in why
    assert refusal(type(case)(**{**case.__dict__, "meta": {"access": ["views-N"]}}), views) is None
    filed = type(case)(**{**case.__dict__, "meta": {"workspace_files": str(tmp_path)}})
    assert "hands the subject files/" in str(refusal(filed, parse_access("tools")))
    tensor = _case("drift-correction/large-field-tensor")
    assert "presents a tensor" in str(refusal(tensor, views))
    # in a run: the sample is skipped with the reason, not failed
    subject = CommandSubject("python3 -c pass", sandbox=SandboxPolicy(enabled=False, access="files+code"))
    result = run_cases(
        [type(case)(**{**case.__dict__, "meta": {"access": ["tools"]}})], subject, out=tmp_path, progress=False
    )
    (summary,) = result.samples["toy/declared"]
    assert summary.status == "skipped" and "not meaningful under --access files+code" in str(summary.reason)


def test_a_bundle_case_declares_its_settings_and_a_bad_one_names_the_field(tmp_path: Path) -> None:
    from imagebench.bundle.casefile import CaseFileError, parse_case_file

    good = tmp_path / "good.json"
    good.write_text(json.dumps({"schemaVersion": 1, "case": "c", "access": ["tools", "views-N", "views-2"]}))
    assert parse_case_file(good).access == ["tools", "views-N", "views-2"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schemaVersion": 1, "case": "c", "access": ["tools", "shell"]}))
    with pytest.raises(CaseFileError, match=r"bad.json: field 'access'.*'shell' is not one of"):
        parse_case_file(bad)


def test_a_call_that_reaches_a_tool_the_setting_does_not_serve_is_refused_and_recorded() -> None:
    """The server lists only the tools served; the session refuses any other by name as well."""
    from imagebench.case.session import open_session
    from imagebench.runs.runner import prepare_fixture
    from imagebench.subjects.mcp.tools import AgentSession, CaseView, ToolError

    case = _case(COUNT)
    session = open_session(case, prepare_fixture(case).fixture)
    agent = AgentSession(CaseView.of(case), session, access=parse_access("views-3"))
    with pytest.raises(ToolError, match="'read_layer' is not served under access setting views-3"):
        agent.call("read_layer", {"name": "image"}, lambda: agent.read_layer("image"))
    assert agent.call("get_prompt", {}, agent.get_prompt)["label"] == COUNT
    assert [(c.tool, c.ok) for c in agent.transcript.calls] == [("read_layer", False), ("get_prompt", True)]


def test_the_views_are_fixed_by_the_case_and_n(tmp_path: Path) -> None:
    from imagebench.case.session import open_session
    from imagebench.runs.runner import prepare_fixture
    from imagebench.sandbox.workspace import Workspace
    from imagebench.subjects.views import ViewsIndex, plan, render_views, write_views

    assert [v.box for v in plan(0, (128, 128), 3)] == [((0, 128), (0, 128)), ((0, 128), (0, 64)), ((0, 128), (64, 128))]
    assert [v.plane for v in plan(30, (128, 128), 3)] == [0, 14, 29] and plan(30, (128, 128), 1)[0].plane is None
    assert len(plan(0, (100, 100), 6)) == 6
    case = _case(COUNT)
    session = open_session(case, prepare_fixture(case).fixture)
    first, again = render_views(session, 3), render_views(session, 3)
    assert [png for _, png in first] == [png for _, png in again]  # fixed: the same views every time
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") for _, png in first)
    (tmp_path / "ws").mkdir()
    with Workspace(tmp_path / "ws") as ws:
        write_views(session, ws, 3)
    index = ViewsIndex.model_validate_json((tmp_path / "ws" / "views" / "views.json").read_text())
    assert index.setting == "views-3" and [v.file for v in index.views] == [f"views/view-{i}.png" for i in (1, 2, 3)]


# --------------------------------------------------------------------------- in the sandbox: read around each


def _probe_run(tmp_path: Path, access: str, label: str = COUNT) -> tuple[Any, dict[str, Any], Path]:
    agent = tmp_path / "agent"
    agent.mkdir()
    shutil.copy(PROBE, agent / PROBE.name)
    subject = CommandSubject(
        f"python3 {shlex.quote(str(agent / PROBE.name))}",
        sandbox=SandboxPolicy(expose=(agent,), access=access),
        mcp=True,
    )
    result = run_cases([_case(label)], subject, out=tmp_path / "out", progress=False)
    (summary,) = result.samples[label]
    sample = result.run_dir / summary.subject / label / "sample-0"
    lines = [x for x in (sample / "stderr.txt").read_text().splitlines() if x.startswith("PROBE:")]
    assert lines, (summary.status, summary.reason, (sample / "stderr.txt").read_text()[-2000:])
    return summary, json.loads(lines[-1][len("PROBE:") :]), result.run_dir


@SANDBOX
def test_under_tools_the_subject_has_no_shell_and_no_inputs(tmp_path: Path) -> None:
    summary, probe, run_dir = _probe_run(tmp_path, "tools")
    disk, execs, mcp = probe["disk"], probe["exec"], probe["mcp"]
    assert disk["inputs_read"].startswith("refused") and disk["npy_anywhere"] == [] and disk["tensor_url"] is None
    assert sorted(disk["workspace"]) == ["mcp.json", "outputs", "prompt.md"]  # listing the workspace: nothing else
    for shell in ("/bin/sh", "/bin/bash", "/usr/bin/dash", "sh", "bash"):
        assert execs[shell] != "RAN", (shell, execs[shell])
    assert execs["os.system ran"] is False
    for route in ("loader bash", "loader dash"):  # the loader run directly finds no shell to load
        assert execs.get(route, "absent") != "RAN", (route, execs.get(route))
    if landlock_abi() > 0:  # only the program itself (python3) may be executed
        assert execs["env"].startswith("refused") and execs["echo"].startswith("refused")
        assert execs["copied program"].startswith("refused")
    assert "read_layer" in mcp["tools"] and mcp["read_layer"] == "answered"  # the tools are the way in
    assert summary.status == "wrong-answer"  # it left {"count": 0}: scored, not blocked
    notes = summary.detail["attempt_notes"]["access"]
    assert notes["setting"] == "tools" and notes["inputs_on_disk"] is False
    assert "read_layer" in notes["tools"] and not any(f.startswith("inputs/") for f in notes["workspace"])
    record = json.loads((run_dir / "run.json").read_text())["extra"]["execution"]["access"]
    assert record["setting"] == "tools" and record["shell"] is False and record["inputs_on_disk"] is False
    assert "bash" in record["shells_masked"] and record["exec"] in ("landlock", "shells-masked")
    receipt = json.loads((run_dir / "receipt.json").read_text())
    assert receipt["subject"]["access"]["setting"] == "tools"
    assert "every shell masked (the null device bound over it)" in receipt["subject"]["access"]["mounts"]
    assert "the MCP folder (bridge and socket), read-only" in receipt["subject"]["access"]["mounts"]


@SANDBOX
def test_under_views_3_the_subject_has_three_pngs_and_no_array(tmp_path: Path) -> None:
    summary, probe, run_dir = _probe_run(tmp_path, "views-3")
    disk, mcp = probe["disk"], probe["mcp"]
    assert disk["views"] == ["views/view-1.png", "views/view-2.png", "views/view-3.png"] and disk["views_png"]
    assert disk["inputs_read"].startswith("refused") and disk["npy_anywhere"] == [] and disk["tensor_url"] is None
    assert not any(f.startswith("inputs") or f.endswith(".npy") for f in disk["workspace"])
    assert mcp["read_layer"] == "refused" and mcp["snapshot"] == "refused"
    assert "read_layer" not in mcp["tools"] and "snapshot" not in mcp["tools"] and "submit" in mcp["tools"]
    notes = summary.detail["attempt_notes"]["access"]
    assert notes["views"] == disk["views"] and set(notes["tools"]) <= VIEW_TOOLS
    transcript = json.loads((run_dir / summary.subject / COUNT / "sample-0" / "transcript.json").read_text())
    assert not [c for c in transcript["calls"] if c["tool"] in ("read_layer", "snapshot") and c["ok"]]
    from imagebench.report import write_html_report

    html = write_html_report(run_dir).read_text(encoding="utf-8")
    assert "views-3: 3 fixed rendered view(s)" in html


@SANDBOX
def test_an_honest_agent_passes_under_tools(tmp_path: Path) -> None:
    agent = AGENTS / "classical_agent.py"
    subject = CommandSubject(
        f"python3 {shlex.quote(str(agent))}", sandbox=SandboxPolicy(expose=(AGENTS,), access="tools"), mcp=True
    )
    result = run_cases([_case(COUNT)], subject, out=tmp_path, progress=False)
    (summary,) = result.samples[COUNT]
    assert summary.status == "ok", summary.reason


@SANDBOX
def test_runs_under_different_settings_are_not_comparable(tmp_path: Path) -> None:
    from imagebench.runs.sealed import Seal
    from imagebench.suite.compare import compare_runs
    from imagebench.suite.record import RUN_INFO_KEY, SuiteRunInfo, conditions_now
    from imagebench.suite.resolve import pin_suite
    from imagebench.suite.sampling import assign

    cases = [make_toy_case("alpha")]
    manifest, problems = pin_suite("core", "2026.11.0", cases)
    assert manifest is not None, problems
    info = SuiteRunInfo(
        requested="core",
        assignment=assign(manifest, "all", 0),
        conditions=conditions_now(samples=1, timeout=None, cases=cases),
    )
    runs = []
    for access in ("files+code", "views-2"):
        subject = CommandSubject("python3 -c pass", sandbox=SandboxPolicy(access=access))
        result = run_cases(
            cases, subject, out=tmp_path / access, progress=False, sealed=Seal(b"s" * 32),
            record_extra={RUN_INFO_KEY: info.model_dump(mode="json")},
        )  # fmt: skip
        runs.append(result.run_dir)
    result = compare_runs(*runs)
    problems = {c.id: c.problems for c in result.conditions if not c.holds}
    assert any(p.startswith("access: A ") and "views-2" in p for p in problems.get("C4", [])), problems
    assert compare_runs(*runs, allow_conditions=["access"]).comparable


def test_an_agent_cli_kind_is_held_to_the_setting_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent CLI kinds are commands: under tools their command line (it reads the prompt through
    the shell) is refused by name; under files+code they would be served MCP, which it forbids."""
    standin = Path(__file__).parent / "agent_standins" / "standin.py"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(standin.read_text(encoding="utf-8").replace("@AGENTS@", str(AGENTS)))
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def parse(access: str) -> Any:
        return parse_subject("claude-code", sandbox=SandboxPolicy(expose=(bin_dir, AGENTS), access=access))

    assert parse("views-3").access == parse_access("views-3")
    assert parse("files+code+tools").access is not None
    with pytest.raises(SubjectError, match="runs without a shell, and it holds shell syntax"):
        parse("tools")
    with pytest.raises(SubjectError, match="serves no MCP tools"):
        parse("files+code")
