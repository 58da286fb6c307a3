"""Agent CLI subjects (issue 31, part 1): ``claude-code``, ``codex``, ``gemini-cli`` and ``agent-cli:``.

Each kind runs a stand-in of its CLI (tests/agent_standins/standin.py, installed on PATH here)
that parses that CLI's documented flags, reads the MCP configuration from where that CLI reads it
in the subject's private HOME, connects to the case server and prints that CLI's envelope. Each
kind's stand-in works a structured, a label-image and a trigger case in the sandbox, with the
network off and on; an envelope's answer is scored as its inner answer; the agent's logs are kept
(links and FIFOs it planted there are never followed); a rate limit the CLI reports ends the
sample ``infra-error`` (a model's message claiming one does not), which ``--retries`` works again;
only the host variables the run names reach the CLI; ``--subject-home`` seeds the HOME, its links
left out. A test of the real Claude Code CLI runs its own ``claude mcp list`` when it is on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import imagebench
from imagebench import cases as builtin
from imagebench.bundle.load import load_bundle
from imagebench.case.model import select_cases
from imagebench.executor import run_cases
from imagebench.records import read_record
from imagebench.runs.verdict import case_verdict
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import (
    AgentOptions,
    SubjectError,
    describe,
    execution_of,
    options_from_record,
    options_record,
    parse_subject,
    spec_of,
    subject_options,
)
from imagebench.subjects.agents.envelope import AGENT_RECORD, AgentRecord

pytest.importorskip("mcp")

ROOT = Path(imagebench.__file__).resolve().parents[2]
AGENTS = ROOT / "examples" / "agents"
BUNDLE = ROOT / "examples" / "bundles" / "segment-nuclei"
STANDIN = Path(__file__).parent / "agent_standins" / "standin.py"
SANDBOX = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
KINDS = {"claude-code": "claude", "codex": "codex", "gemini-cli": "gemini"}


@pytest.fixture
def clis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-ins installed as ``claude``, ``codex`` and ``gemini`` in a folder first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    text = STANDIN.read_text(encoding="utf-8").replace("@AGENTS@", str(AGENTS))
    for program in KINDS.values():
        (bin_dir / program).write_text(text, encoding="utf-8")
        (bin_dir / program).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def _case(label: str) -> Any:
    (case,), _ = select_cases(builtin.all_cases(), [label])
    return case


def _cases() -> list[Any]:
    """A structured case, a label-image case and a trigger case."""
    (trigger,) = [c for c in load_bundle(BUNDLE).cases if c.case_class == "trigger"]
    return [_case("segment-nuclei/count-nuclei"), _case("segment-nuclei/synthetic-blobs"), trigger]


def _subject(spec: str, bin_dir: Path, *, network: bool = False, env_pass: tuple[str, ...] = (), **agent: Any) -> Any:
    policy = SandboxPolicy(network=network, expose=(bin_dir, AGENTS), env_pass=env_pass)
    return parse_subject(spec, sandbox=policy, agent=AgentOptions(**agent) if agent else None)


def _sample(result: Any, label: str) -> tuple[Any, Path]:
    (summary,) = result.samples[label]
    return summary, result.run_dir / summary.subject / label / "sample-0"


# --------------------------------------------------------------------------- every kind, every case kind


@SANDBOX
@pytest.mark.parametrize("network", [False, True], ids=["network-off", "network-on"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_cli_stand_in_passes_a_structured_a_label_and_a_trigger_case(
    kind: str, network: bool, clis: Path, tmp_path: Path
) -> None:
    cases = _cases()
    result = run_cases(cases, _subject(kind, clis, network=network), out=tmp_path / "out", progress=False)
    for case in cases:
        summary, sample = _sample(result, case.label)
        assert summary.status == "ok", (case.label, summary.reason)
        assert summary.sandbox == "bubblewrap"
        record = read_record(sample / AGENT_RECORD, AgentRecord)
        assert record.cli == kind and len(record.attempts) == 1
        (attempt,) = record.attempts
        assert attempt.envelope.parsed and not attempt.envelope.is_error and attempt.infra_error is None
        assert attempt.envelope.usage.input_tokens == 1200 and attempt.envelope.usage.output_tokens == 345
        assert attempt.envelope.usage.source == "reported"
        kept = [log.kept_as for log in record.logs if log.kept_as]
        assert kept and all((sample / name).is_file() for name in kept)  # the agent's own log, in the sample
        assert set(kept) <= set(summary.artifact_digests)  # and digested with the sample's files
        note = summary.detail["attempt_notes"]["agent"]
        assert note["attempts"] == 1 and note["usage"]["input_tokens"] == 1200
        # the envelope's usage is the sample's usage, labelled as the agent's own say-so
        assert summary.usage is not None and summary.usage.tokens_in is not None
        assert (summary.usage.tokens_in.value, summary.usage.tokens_in.source) == (1200, "reported")
        assert summary.usage.tokens_out is not None and summary.usage.tokens_out.value == 345
        assert summary.detail["attempt_notes"]["mcp"]["calls"] >= 3  # it worked through the case's tools
    (trigger,) = [c for c in cases if c.case_class == "trigger"]
    summary, _ = _sample(result, trigger.label)
    assert summary.detail["observed"]["channels"][0] == "mcp"


@SANDBOX
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_envelope_answer_is_scored_as_its_inner_answer(
    kind: str, clis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "final")
    case = _case("segment-nuclei/count-nuclei")
    result = run_cases([case], _subject(kind, clis, env_pass=("STANDIN_MODE",)), out=tmp_path / "out", progress=False)
    summary, sample = _sample(result, case.label)
    assert summary.status == "ok", summary.reason
    final = summary.detail["attempt_notes"]["final_message"]
    assert final.startswith("Done. I counted them.") and "IMAGEBENCH_FINAL_JSON:" in final
    assert '"type"' not in final and '"response"' not in final  # the inner message, never the envelope
    assert (sample / "stdout.txt").read_text().strip()  # the envelope itself is kept as it was printed


# --------------------------------------------------------------------------- infrastructure failures


@SANDBOX
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_rate_limit_the_cli_reports_is_infra_error_and_is_retried(
    kind: str, clis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "infra")
    case = _case("segment-nuclei/count-nuclei")
    subject = _subject(kind, clis, env_pass=("STANDIN_MODE",), retries=2)
    result = run_cases([case], subject, out=tmp_path / "out", progress=False)
    summary, sample = _sample(result, case.label)
    assert summary.status == "infra-error", summary.reason
    assert "rate limit" in summary.reason and kind in summary.reason
    record = read_record(sample / AGENT_RECORD, AgentRecord)
    assert len(record.attempts) == 3 and all(a.infra_error for a in record.attempts)  # 1 + --retries 2
    assert case_verdict([summary]) == "error"  # counted apart, never a fail (a zero) nor a pass
    assert result.exit_code == 4
    from imagebench.scoring.aggregates import EXCLUDED, aggregate
    from imagebench.suite.compare import FAIL, PASS

    assert "infra-error" in EXCLUDED and "infra-error" not in PASS | FAIL  # no figure and no pair counts it
    assert aggregate([summary], 1).coverage["infra-error"] == 1


@SANDBOX
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_model_message_claiming_a_rate_limit_is_scored_not_excused(
    kind: str, clis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dishonest: the final message of a successful envelope says "API Error: 429"; that is the
    model's text, not the CLI's report, so the sample is scored (it left nothing: no-result)."""
    monkeypatch.setenv("STANDIN_MODE", "lie")
    case = _case("segment-nuclei/count-nuclei")
    result = run_cases(
        [case], _subject(kind, clis, env_pass=("STANDIN_MODE",), retries=1), out=tmp_path / "out", progress=False
    )
    summary, sample = _sample(result, case.label)
    assert summary.status == "no-result", summary.reason
    assert len(read_record(sample / AGENT_RECORD, AgentRecord).attempts) == 1  # nothing to retry


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_retry_after_an_infra_failure_starts_fresh_and_is_scored(
    kind: str, clis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unsandboxed (so the stand-in can count its runs in a file of the host's): the first run
    reports a rate limit, the retry works the case and passes."""
    monkeypatch.setenv("STANDIN_MODE", "infra-once")
    monkeypatch.setenv("STANDIN_STATE", str(tmp_path / "count"))
    monkeypatch.setenv("PATH", f"{clis}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    case = _case("segment-nuclei/count-nuclei")
    policy = SandboxPolicy(enabled=False, env_pass=("STANDIN_MODE", "STANDIN_STATE"))
    subject = parse_subject(kind, sandbox=policy, agent=AgentOptions(retries=1))
    result = run_cases([case], subject, out=tmp_path / "out", progress=False, unsealed=True)
    summary, sample = _sample(result, case.label)
    assert summary.status == "ok", summary.reason
    record = read_record(sample / AGENT_RECORD, AgentRecord)
    assert [a.infra_error is not None for a in record.attempts] == [True, False]
    assert summary.detail["attempt_notes"]["agent"]["infra_errors"][0].startswith("rate limit: ")
    assert (tmp_path / "count").read_text() == "2"


# --------------------------------------------------------------------------- environment, HOME, logs


@SANDBOX
def test_only_the_variables_the_run_names_reach_the_cli_and_planted_links_are_not_followed(
    clis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STANDIN_MODE", "plant")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-passed")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-passed")
    case = _case("segment-nuclei/count-nuclei")
    subject = _subject("claude-code", clis, env_pass=("STANDIN_MODE", "ANTHROPIC_API_KEY"))
    result = run_cases([case], subject, out=tmp_path / "out", progress=False)
    summary, sample = _sample(result, case.label)
    assert summary.status == "ok", summary.reason
    record = read_record(sample / AGENT_RECORD, AgentRecord)
    by_path = {Path(log.home_path).name: log for log in record.logs}
    session = next(log for log in record.logs if log.kept_as and log.home_path.endswith(".jsonl"))
    seen = json.loads((sample / session.kept_as).read_text())["env"]
    assert seen == ["ANTHROPIC_API_KEY", "STANDIN_MODE"]  # never OPENAI_API_KEY, which the run did not name
    assert by_path["passwd.jsonl"].kept_as is None and "link" in by_path["passwd.jsonl"].why
    assert by_path["root"].kept_as is None and by_path["fifo.jsonl"].kept_as is None
    passwd = Path("/etc/passwd").read_bytes()
    assert not any(p.read_bytes() == passwd for p in sample.iterdir() if p.is_file())
    run_json = json.loads((result.run_dir / "run.json").read_text())
    assert "sk-test" not in json.dumps(run_json) and "sk-test" not in (result.run_dir / "receipt.json").read_text()


@SANDBOX
def test_a_home_swapped_for_a_link_is_not_followed(clis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDIN_MODE", "swap-home")
    case = _case("segment-nuclei/count-nuclei")
    result = run_cases(
        [case], _subject("codex", clis, env_pass=("STANDIN_MODE",)), out=tmp_path / "out", progress=False
    )
    summary, sample = _sample(result, case.label)
    assert summary.status == "ok", summary.reason  # what it left through the tools still counts
    assert read_record(sample / AGENT_RECORD, AgentRecord).logs == []  # nothing read through the link
    assert not [p.name for p in sample.iterdir() if p.name.startswith("agent-log-")]


@SANDBOX
def test_subject_home_seeds_the_private_home_without_following_its_links(
    clis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = tmp_path / "home-template"
    (template / ".gemini").mkdir(parents=True)
    (template / ".gemini" / "settings.json").write_text(json.dumps({"ui": {"theme": "Default"}, "mcpServers": {}}))
    (template / ".codex").mkdir()
    (template / ".codex" / "config.toml").write_text('model = "gpt-5"\n')
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the subject")
    (template / "link.txt").symlink_to(secret)
    case = _case("segment-nuclei/count-nuclei")
    for kind in ("gemini-cli", "codex"):
        subject = _subject(kind, clis, home=template)
        result = run_cases([case], subject, out=tmp_path / kind, progress=False)
        summary, _ = _sample(result, case.label)
        assert summary.status == "ok", (kind, summary.reason)  # its config merged with the template's
    # The HOME as the kind writes it, looked at directly: the template's settings kept, the link left out.
    from imagebench.sandbox.workspace import Workspace
    from imagebench.subjects.agents import home as agent_home
    from imagebench.subjects.agents.gemini import CONFIG, GeminiCliSubject

    ws_root = tmp_path / "ws"
    ws_root.mkdir()
    with Workspace(ws_root) as ws:
        left_out = agent_home.seed(ws, template)
        gemini = _subject("gemini-cli", clis, home=template)
        assert isinstance(gemini, GeminiCliSubject)
        gemini.configure(ws, {"command": "python3", "args": ["/mcp/bridge.py"]}, workdir="/workspace")
    assert left_out == ["link.txt (a symbolic link)"] and not (ws_root / "home" / "link.txt").exists()
    settings = json.loads((ws_root / "home" / CONFIG).read_text())
    assert settings["ui"] == {"theme": "Default"} and settings["mcpServers"]["imagebench"]["trust"] is True
    assert json.loads((ws_root / "home" / ".gemini" / "trustedFolders.json").read_text()) == {
        "/workspace": "TRUST_FOLDER"
    }


def test_subject_home_inside_the_harness_is_refused(clis: Path) -> None:
    with pytest.raises(SubjectError, match="must not see"):
        _subject("claude-code", clis, home=ROOT / "src")
    with pytest.raises(SubjectError, match="expected a folder"):
        _subject("claude-code", clis, home=ROOT / "no-such-folder")


# --------------------------------------------------------------------------- grammar and records


def test_specs_options_and_records_round_trip(clis: Path, tmp_path: Path) -> None:
    subject = _subject("claude-code:claude-sonnet-4-5", clis, retries=2)
    assert spec_of(subject) == "claude-code:claude-sonnet-4-5" and subject.name == "claude-code-claude-sonnet-4-5"
    assert "--output-format json" in subject.command and "--strict-mcp-config" in subject.command
    assert str(clis / "claude") in subject.command and "--model claude-sonnet-4-5" in subject.command
    again = parse_subject(spec_of(subject), **options_from_record(options_record(subject)))
    assert again == subject and subject_options(again)["agent"].retries == 2
    entry = describe(subject)
    assert entry["form"] == "claude-code" and entry["model"] == "claude-sonnet-4-5"
    conditions = execution_of(subject)
    assert conditions["mcp"] is True and conditions["sandbox"] == "bubblewrap" and conditions["network"] is False
    assert str(clis) not in json.dumps(entry)  # a receipt entry names no path
    codex = _subject("codex", clis)
    assert "exec --json --skip-git-repo-check" in codex.command and codex.name == "codex"
    generic = _subject("agent-cli:my-agent --headless", clis)
    assert generic.command == "my-agent --headless" and spec_of(generic) == "agent-cli:my-agent --headless"
    with pytest.raises(SubjectError, match="not a model name"):
        _subject("codex:gpt; rm -rf /", clis)
    with pytest.raises(SubjectError, match="--retries/--subject-home applies to"):
        parse_subject("command:true", agent=AgentOptions(retries=1))
    with pytest.raises(SubjectError, match="0 to 10"):
        AgentOptions(retries=11)


def test_a_cli_missing_or_hidden_from_the_sandbox_is_refused(clis: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(SubjectError, match="'gemini' is not on PATH"):
        parse_subject("gemini-cli")
    monkeypatch.setenv("PATH", f"{clis}{os.pathsep}/usr/bin:/bin")
    if unavailable_reason() is None:
        with pytest.raises(SubjectError, match="--subject-expose"):
            parse_subject("gemini-cli", sandbox=SandboxPolicy())


@SANDBOX
def test_the_generic_interface_reads_its_config_envelope_and_tempfail(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    script = agent / "agent.sh"
    script.write_text(
        "#!/bin/sh\n"
        'test -f "$IMAGEBENCH_MCP_CONFIG" || { echo "no config at $IMAGEBENCH_MCP_CONFIG" >&2; exit 3; }\n'
        'mkdir -p "$HOME/logs" && echo run >> "$HOME/logs/agent.log"\n'
        'if [ "$1" = fail ]; then echo "connect ECONNREFUSED api.example" >&2; exit 75; fi\n'
        'echo \'{"result": "IMAGEBENCH_FINAL_JSON: {\\"count\\": 0}", "usage": {"input_tokens": 7}}\'\n'
    )
    script.chmod(0o755)
    case = _case("segment-nuclei/count-nuclei")
    policy = SandboxPolicy(expose=(agent,))
    ok = run_cases([case], parse_subject(f"agent-cli:{script}", sandbox=policy), out=tmp_path / "a", progress=False)
    summary, sample = _sample(ok, case.label)
    assert summary.status == "wrong-answer", summary.reason  # its inner answer, count 0, was scored
    assert summary.detail["attempt_notes"]["final_message"].startswith("IMAGEBENCH_FINAL_JSON:")
    assert (sample / "agent-log-1-agent.log").read_text() == "run\n"
    failed = run_cases(
        [case], parse_subject(f"agent-cli:{script} fail", sandbox=policy), out=tmp_path / "b", progress=False
    )
    summary, _ = _sample(failed, case.label)
    assert summary.status == "infra-error" and "ECONNREFUSED" in summary.reason


# --------------------------------------------------------------------------- the real CLI, where installed


@SANDBOX
def test_the_real_claude_code_health_check_reads_the_config_the_kind_writes(tmp_path: Path) -> None:
    """Claude Code's own MCP health check (``claude mcp list``) run in the sandbox, in the private
    HOME the ``claude-code`` kind prepares, reaches the case server. Never downloads: skipped
    unless the real CLI is on PATH (``npm install --prefix DIR @anthropic-ai/claude-code``)."""
    import dataclasses

    claude = shutil.which("claude")
    if claude is None or b"A stand-in for an agent CLI" in Path(claude).read_bytes()[:4096]:
        pytest.skip("the real Claude Code CLI is not on PATH (npm install -g @anthropic-ai/claude-code)")
    install = Path(os.path.realpath(claude)).parents[
        3
    ]  # <prefix>/node_modules/@anthropic-ai/claude-code/bin/claude.exe
    expose = tuple(sorted({install, Path(claude).parent}, key=str))
    subject = parse_subject("claude-code", sandbox=SandboxPolicy(expose=expose))
    subject = dataclasses.replace(subject, command=f"{claude} mcp list")  # the health check, not a model turn
    case = _case("segment-nuclei/count-nuclei")
    result = run_cases([case], subject, out=tmp_path / "out", progress=False)
    summary, sample = _sample(result, case.label)
    listed = (sample / "stdout.txt").read_text()
    assert "imagebench" in listed and "Connected" in listed, (listed, (sample / "stderr.txt").read_text())
    assert summary.status == "no-result"  # it only listed the servers


# --------------------------------------------------------------------------- envelopes as the real CLIs print them

#: Claude Code 2.1.197's envelope, printed by ``claude -p ... --output-format json`` in the sandbox without a
#: login (recorded from the real CLI; long fields trimmed)
CLAUDE_NOT_LOGGED_IN = (
    '{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"duration_ms":90,'
    '"duration_api_ms":0,"num_turns":1,"result":"Not logged in \\u00b7 Please run /login","stop_reason":'
    '"stop_sequence","session_id":"ca85dc17-437d-40f9-817c-54e3e9786bf0","total_cost_usd":0,"usage":'
    '{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}'
)


def test_envelopes_are_parsed_and_only_the_clis_own_errors_are_infrastructure(clis: Path) -> None:
    claude = _subject("claude-code", clis)
    env = claude.envelope(CLAUDE_NOT_LOGGED_IN)
    assert env.parsed and env.is_error and env.session_id.startswith("ca85dc17")
    assert claude.infra(env, 1, "").startswith("authentication: ")
    overloaded = CLAUDE_NOT_LOGGED_IN.replace('"api_error_status":null', '"api_error_status":529').replace(
        "Not logged in \\u00b7 Please run /login", "API Error: Overloaded"
    )
    assert claude.infra(claude.envelope(overloaded), 1, "").startswith("provider outage")
    said = CLAUDE_NOT_LOGGED_IN.replace('"is_error":true', '"is_error":false')  # the model's own text now
    assert claude.infra(claude.envelope(said), 0, "Please run /login 429") is None
    assert claude.infra(claude.envelope("not json"), 1, "Error: connect ECONNREFUSED 1.2.3.4:443").startswith("network")
    assert claude.infra(claude.envelope("not json"), 0, "ECONNREFUSED") is None  # it exited 0: not a failure
    crash = "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'mcp'"
    assert claude.infra(claude.envelope(""), 1, crash) is None  # a crash of its own, not the network's
    codex = _subject("codex", clis)
    lines = "\n".join(
        json.dumps(e)
        for e in (
            {"type": "thread.started", "thread_id": "t1"},
            {"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": "first"}},
            {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 2, "output_tokens": 3}},
            {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "429 rate limit, sorry"}},
            {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}},
        )
    )
    env = codex.envelope(lines)
    assert env.final_message == "429 rate limit, sorry" and env.usage.input_tokens == 15 and env.usage.turns == 2
    assert codex.infra(env, 0, "") is None  # a message that talks of a rate limit is not one
    gemini = _subject("gemini-cli", clis)
    env = gemini.envelope(json.dumps({"error": {"type": "FatalInputError", "message": "bad input 429", "code": 42}}))
    assert gemini.infra(env, 42, "") is None  # exit 42 is the input's (Gemini CLI's exit codes)
    env = gemini.envelope(json.dumps({"response": None, "error": {"type": "ApiError", "message": "x", "code": 503}}))
    assert gemini.infra(env, 1, "").startswith("provider outage")
    # Gemini CLI 0.61.0 without a key (recorded in the sandbox): FatalAuthenticationError, exit 41
    no_key = {"session_id": "8c91a2c8", "error": {"type": "Error", "message": "Please set an Auth method in your "
              "/workspace/home/.gemini/settings.json or specify one of the following environment variables before "
              "running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA", "code": 41}}  # fmt: skip
    on_stderr = "YOLO mode is enabled.\n" + json.dumps(no_key, indent=2) + "\n"  # as it prints it, after a notice
    assert gemini.infra(gemini.envelope(on_stderr), 41, "").startswith("authentication: Error 41 Please set")


@SANDBOX
def test_a_cli_stalled_on_the_network_past_its_limit_is_infra_error_only_when_its_output_says_so(
    clis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex streams its reconnects while it waits for the network (recorded from codex-cli 0.171.0):
    past the limit, that is the outage's. A CLI that printed nothing (claude) stays a timeout."""
    monkeypatch.setenv("STANDIN_MODE", "stall")
    case = _case("segment-nuclei/count-nuclei")
    for kind, status in (("codex", "infra-error"), ("claude-code", "timeout")):
        subject = _subject(kind, clis, env_pass=("STANDIN_MODE",))
        result = run_cases([case], subject, out=tmp_path / kind, progress=False, timeout=6)
        summary, _ = _sample(result, case.label)
        assert summary.status == status, (kind, summary.reason)
        if kind == "codex":
            assert "ran past its time limit; network: " in summary.reason
