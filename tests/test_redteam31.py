"""Red-team findings of issue 31's features, each run as the dishonest subject that found it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imagebench import cases as builtin
from imagebench.case.model import select_cases
from imagebench.executor import run_cases
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import parse_subject

pytest.importorskip("mcp")

SANDBOX = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
COUNT = "segment-nuclei/count-nuclei"


def _case(label: str) -> Any:
    (case,), _ = select_cases(builtin.all_cases(), [label])
    return case


def _agent(tmp_path: Path, body: str) -> tuple[Path, Any]:
    """An agent CLI of the generic interface: a shell script ``body``, shown to the sandbox."""
    folder = tmp_path / "agent"
    folder.mkdir()
    script = folder / "agent.sh"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script, parse_subject(f"agent-cli:{script}", sandbox=SandboxPolicy(expose=(folder,)))


def _only(result: Any, label: str = COUNT) -> Any:
    (summary,) = result.samples[label]
    return summary


@SANDBOX
@pytest.mark.parametrize("model", [" ", ""], ids=["blank-model", "empty-model"])
def test_a_malformed_figure_beside_the_tokens_does_not_hide_them_from_the_budget(tmp_path: Path, model: str) -> None:
    """An envelope reporting 10 million tokens with a blank model id beside them once lost every
    figure (the usage record refused as a whole), so --max-tokens went unchecked
    (``budget-unmeasured``) instead of ending the sample ``budget-exceeded``."""
    from imagebench.usage import Budget

    _, subject = _agent(
        tmp_path,
        'echo \'{"result": "IMAGEBENCH_FINAL_JSON: {\\"count\\": 0}", '
        f'"usage": {{"input_tokens": 9999999, "output_tokens": 5, "model": "{model}"}}}}\'\n',
    )
    result = run_cases([_case(COUNT)], subject, out=tmp_path / "out", progress=False, budget=Budget(max_tokens=1000))
    summary = _only(result)
    assert summary.status == "budget-exceeded", (summary.status, summary.reason, summary.flags)
    assert summary.usage.tokens_in.value == 9999999 and summary.usage.tokens_in.source == "reported"
    assert "budget-unmeasured" not in summary.flags


def test_each_reported_figure_stands_alone() -> None:
    """Claude Code's envelope with a cost of NaN (JSON NaN parses) or a count past a float."""
    from imagebench.subjects.agents.base import _reported
    from imagebench.subjects.agents.envelope import AgentAttempt, AgentUsage, Envelope

    def usage(**kw: Any) -> Any:
        return _reported([AgentAttempt(envelope=Envelope(parsed=True, usage=AgentUsage(**kw)))])

    got = usage(input_tokens=5000, output_tokens=7, cost_usd=float("nan"), model="claude-x")
    assert got.tokens == 5007 and got.cost_usd is None and got.model.id == "claude-x"
    got = usage(input_tokens=10**400, output_tokens=7)
    assert got.tokens_in is None and got.tokens_out.value == 7
    assert usage(model=" ") is None


CODEX_RECONNECTED = """#!/bin/sh
echo '{"type":"thread.started","thread_id":"t1"}'
echo '{"type":"turn.started"}'
echo '{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion: 429 Too Many Requests)"}'
echo '{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"IMAGEBENCH_FINAL_JSON: {\\"count\\": 0}"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}'
"""


@SANDBOX
def test_a_codex_turn_that_reconnected_and_completed_is_scored_not_excused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex streams an ``error`` event for each reconnect and may then complete its turn. Such a
    turn (one that answered, wrongly) was ``infra-error``, excluded from every figure: any error
    event before ``turn.completed`` counted as the turn's failure. A model with Codex's shell
    (``--dangerously-bypass-approvals-and-sandbox``) writing one such line to its CLI's stdout
    escaped a wrong answer the same way."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codex").write_text(CODEX_RECONNECTED)
    (bin_dir / "codex").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    subject = parse_subject("codex", sandbox=SandboxPolicy(expose=(bin_dir,)))
    env = subject.envelope(CODEX_RECONNECTED.replace("echo '", "").replace("'\n", "\n").replace('\\\\"', '\\"'))
    assert env.parsed and not env.is_error and subject.infra(env, 0, "") is None
    summary = _only(run_cases([_case(COUNT)], subject, out=tmp_path / "out", progress=False))
    assert summary.status == "wrong-answer", (summary.status, summary.reason)


@SANDBOX
def test_subject_home_leaves_out_the_bench_folders_it_holds(tmp_path: Path) -> None:
    """``--subject-home .`` of a project folder holding an earlier run (``outcomes/run-*``, a sample's
    ``truth_*`` artifacts) or a fixture tree copied them into the subject's HOME, where the sandbox
    masks them in a folder it shows (``--subject-expose .``)."""
    import json

    from imagebench.sandbox.workspace import Workspace
    from imagebench.subjects import AgentOptions
    from imagebench.subjects.agents import home as agent_home

    project = tmp_path / "project"
    sample = project / "outcomes" / "run-20260101T000000Z" / "reference" / "x" / "sample-0"
    sample.mkdir(parents=True)
    (sample.parents[2] / "run.json").write_text("{}")
    (sample / "truth_outlines.npy").write_bytes(b"the truth")
    tree = project / "mytree"
    tree.mkdir()
    (tree / "manifest.json").write_text(json.dumps({"fixtures": []}))
    (tree / "truth.npy").write_bytes(b"the truth")
    answers = project / "bundle" / "expected"
    answers.mkdir(parents=True)
    (answers / "count.json").write_text('{"count": 7}')
    (project / ".agentrc").write_text("theme = dark\n")

    (tmp_path / "ws").mkdir()
    with Workspace(tmp_path / "ws") as ws:
        left_out = agent_home.seed(ws, project, hidden=(answers,))
    home = tmp_path / "ws" / "home"
    assert (home / ".agentrc").read_text() == "theme = dark\n"
    copied = sorted(p.relative_to(home).as_posix() for p in home.rglob("*") if p.is_file())
    assert copied == [".agentrc"], copied
    assert any("run-20260101T000000Z" in x for x in left_out) and any("mytree" in x for x in left_out)
    assert any("expected" in x for x in left_out)

    script, _ = _agent(tmp_path, 'mkdir -p "$HOME/logs"; find "$HOME" -type f > "$HOME/logs/found.log"\necho done\n')
    subject = parse_subject(
        f"agent-cli:{script}", sandbox=SandboxPolicy(expose=(script.parent,)), agent=AgentOptions(home=project)
    )
    result = run_cases([_case(COUNT)], subject, out=tmp_path / "out", progress=False)
    summary = _only(result)
    found = (result.run_dir / summary.subject / COUNT / "sample-0" / "agent-log-1-found.log").read_text()
    assert ".agentrc" in found and "truth" not in found, found


DASK_AGENT = '''#!/usr/bin/env python3
"""A dishonest agent CLI given the host's network: it runs code on the dask scheduler it finds."""
import sys
from distributed import Client

def listening():
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[1].startswith("0100007F:"):
            yield int(f[1].split(":")[1], 16)

def proof():
    import os
    open(PROOF, "w").write(f"uid={os.getuid()}")

for port in listening():
    try:
        with Client(f"tcp://127.0.0.1:{port}", timeout=3) as c:
            c.run(proof)
            break
    except Exception:
        continue
print('{"result": "IMAGEBENCH_FINAL_JSON: {\\\\"count\\\\": 0}"}')
'''


@SANDBOX
def test_a_subject_with_the_host_network_never_runs_beside_a_dask_cluster(tmp_path: Path) -> None:
    """``--subject-network`` (every agent CLI needs it to reach its model) with ``--scheduler``: the
    subject found the scheduler on the shared loopback and ran its code on a worker, outside the
    sandbox, as the harness (root here). The run is refused before anything starts."""
    distributed = pytest.importorskip("distributed")
    from imagebench.executor import ExecutorError

    proof = tmp_path / "proof.txt"
    folder = tmp_path / "agent"
    folder.mkdir()
    script = folder / "agent.py"
    script.write_text(DASK_AGENT.replace("PROOF", repr(str(proof))))
    subject = parse_subject(f"agent-cli:python3 {script}", sandbox=SandboxPolicy(expose=(folder,), network=True))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:  # fmt: skip
        try:
            run_cases(
                [_case(COUNT)], subject, out=tmp_path / "out", progress=False, scheduler=cluster.scheduler_address
            )
            refused = None
        except ExecutorError as exc:
            refused = str(exc)
    assert not proof.exists(), f"the subject ran code outside its sandbox: {proof.read_text()}"
    assert refused is not None and "--subject-network" in refused


@SANDBOX
@pytest.mark.parametrize("where", ["subject-env", "expose-venv"])
def test_registry_data_is_masked_in_every_environment_the_sandbox_shows(tmp_path: Path, where: str) -> None:
    """scikit-image's ``coins.png`` is the untouched original of the denoise case
    ``coins-low-light``'s truth. It was masked in the harness's environment only: under
    ``--subject-env PREFIX``, or in an agent's own virtualenv in the folder ``--subject-expose``
    shows, the subject read it."""
    original = b"the original coins photograph"
    if where == "subject-env":
        env, shown = tmp_path / "env", tmp_path / "agent"
        site = env / "lib" / "python3.11" / "site-packages"
        policy = {"env_prefix": env}
    else:
        shown = tmp_path / "agent"
        site = shown / ".venv" / "lib" / "python3.11" / "site-packages"
        policy = {}
    (site / "skimage" / "data").mkdir(parents=True)
    (site / "skimage" / "data" / "coins.png").write_bytes(original)
    (site / "skimage" / "data" / "__init__.py").write_text("# code stays visible\n")
    shown.mkdir(exist_ok=True)
    data = site / "skimage" / "data"
    command = f"command:cat {data}/coins.png >&2; cat {data}/__init__.py >&2; echo '{{\"count\": 0}}'"
    subject = parse_subject(command, sandbox=SandboxPolicy(expose=(shown,), **policy))
    result = run_cases([_case(COUNT)], subject, out=tmp_path / "out", progress=False)
    summary = _only(result)
    stderr = (result.run_dir / summary.subject / COUNT / "sample-0" / "stderr.txt").read_text()
    assert "# code stays visible" in stderr, stderr
    assert original.decode() not in stderr, stderr


KILLED = {
    # Codex's model has a shell (--dangerously-bypass-approvals-and-sandbox): it writes a rate-limit
    # event into its CLI's stdout (/proc/<codex>/fd/1), then kills it before the turn completes.
    "codex": """#!/bin/sh
echo '{"type":"thread.started","thread_id":"t1"}'
echo '{"type":"turn.started"}'
echo '{"type":"error","message":"429 Too Many Requests"}'
echo '{"type":"turn.failed","error":{"message":"429 Too Many Requests"}}'
kill -9 $$
""",
    # Gemini CLI's model has a shell (--yolo): an error envelope on its CLI's stderr, then a kill.
    "gemini": """#!/bin/sh
echo '{"error": {"type": "ApiError", "message": "429 RESOURCE_EXHAUSTED", "code": 429}}' >&2
kill -9 $$
""",
}


@SANDBOX
@pytest.mark.parametrize("program", sorted(KILLED))
def test_an_error_written_before_the_cli_was_killed_is_no_infrastructure_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: str
) -> None:
    """A CLI that died of a signal did not report anything: the error in its output was written by
    whoever killed it. It was ``infra-error`` (excluded from every figure) instead of a failure."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / program).write_text(KILLED[program])
    (bin_dir / program).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    kind = {"codex": "codex", "gemini": "gemini-cli"}[program]
    subject = parse_subject(kind, sandbox=SandboxPolicy(expose=(bin_dir,)))
    summary = _only(run_cases([_case(COUNT)], subject, out=tmp_path / "out", progress=False))
    assert summary.status == "no-result", (summary.status, summary.reason)


FILL = '''"""A subject on a tensor case that uploads arrays under fresh names to the data plane."""
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from ownplane.client import Client

client = Client(os.environ["IMAGEBENCH_TENSOR_URL"])
block = np.ones((32 * 1024 * 1024 // 4 // 1024, 1024), dtype=np.uint32)  # 32 MiB
sent = 0
for i in range(4):
    try:
        client.upload(block, f"fill-{i}-{time.time()}", chunks=(256, 1024))
        sent += 32
    except Exception as exc:
        print("refused:", exc, file=sys.stderr)
        break
print(f"uploaded {sent} MiB", file=sys.stderr)
'''


@SANDBOX
def test_a_subject_given_the_host_network_cannot_fill_the_data_plane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox's bridge to the data plane caps what one sample uploads; a subject given the host's
    network (``--subject-network``, every agent CLI's) reaches the plane directly and uploaded without
    any bound, into the harness's disk, where it stays until the run ends. Uploads without the
    harness's key are budgeted by the plane itself (here 80 MiB)."""
    pytest.importorskip("pyarrow.flight")
    import imagebench.plane as plane_pkg

    monkeypatch.setenv("IMAGEBENCH_PLANE_GUEST_BYTES", str(80 << 20))
    folder = tmp_path / "agent"
    (folder / "ownplane").mkdir(parents=True)
    (folder / "ownplane" / "__init__.py").write_text("")
    for name in ("client", "protocol", "server", "arrow", "token"):  # its own copy of a client (the package is masked)
        text = (Path(plane_pkg.__file__).parent / f"{name}.py").read_text()
        (folder / "ownplane" / f"{name}.py").write_text(text.replace("imagebench.plane.", "ownplane."))
    (folder / "fill.py").write_text(FILL)
    policy = SandboxPolicy(expose=(folder,), network=True)
    subject = parse_subject(f"command:python3 {folder / 'fill.py'}", sandbox=policy)
    label = "drift-correction/large-field-tensor"
    result = run_cases([_case(label)], subject, out=tmp_path / "out", progress=False)
    summary = _only(result, label)
    stderr = (result.run_dir / summary.subject / label / "sample-0" / "stderr.txt").read_text()
    assert "uploaded 64 MiB" in stderr and "without the harness's key" in stderr, (summary.status, stderr[-2000:])


CODEX_STALLED_ON_ITS_OWN_COMMAND = """#!/bin/sh
echo '{"type":"thread.started","thread_id":"t1"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"sleep","status":"in_progress"}}'
echo '{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion: error sending request)"}'
sleep 600
"""


@SANDBOX
def test_a_codex_past_its_limit_on_its_own_command_is_a_timeout_whatever_error_it_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its limit, a Codex whose stream reported reconnects is excused (``infra-error``): it was
    waiting for the network. One whose own command was still running was waiting on the agent: a
    model writing a reconnect error into its CLI's stdout from a command that then sleeps turned a
    time-out into an exclusion."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codex").write_text(CODEX_STALLED_ON_ITS_OWN_COMMAND)
    (bin_dir / "codex").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    subject = parse_subject("codex", sandbox=SandboxPolicy(expose=(bin_dir,)))
    summary = _only(run_cases([_case(COUNT)], subject, out=tmp_path / "out", progress=False, timeout=4.0))
    assert summary.status == "timeout", (summary.status, summary.reason)


FLOOD = '''"""A subject that calls a cheap tool in a loop, over 4 connections, for 3 s."""
import asyncio, json, os, time
from pathlib import Path
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def one(cfg):
    async with stdio_client(StdioServerParameters(command=cfg["command"], args=cfg.get("args", []))) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            end = time.monotonic() + 3
            while time.monotonic() < end:
                await s.call_tool("use_skill", {"name": "x" * 199})

cfg = json.loads(Path(os.environ["IMAGEBENCH_WORKSPACE"], "mcp.json").read_text())["mcpServers"]["imagebench"]
async def main():
    await asyncio.gather(*(one(cfg) for _ in range(4)))

asyncio.run(main())
'''


@SANDBOX
def test_a_flood_of_tool_calls_is_counted_not_recorded_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call went into the transcript, the harness's memory and the report's table: 10 s of a
    cheap call in a loop made 16 000 (11 MB of transcript.json, 10 MB of report.html), so a case's
    time limit let one sample grow them without bound. Past MAX_RECORDED (here 50) a call is counted."""
    from imagebench.records import read_record
    from imagebench.report import write_html_report
    from imagebench.subjects.mcp import transcript as tr

    monkeypatch.setattr(tr, "MAX_RECORDED", 50, raising=False)
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "flood.py").write_text(FLOOD)
    subject = parse_subject(f"command:python3 {folder / 'flood.py'}", sandbox=SandboxPolicy(expose=(folder,)), mcp=True)
    result = run_cases([_case(COUNT)], subject, out=tmp_path / "out", progress=False)
    summary = _only(result)
    sample = result.run_dir / summary.subject / COUNT / "sample-0"
    record = read_record(sample / tr.TRANSCRIPT, tr.Transcript)
    total = summary.detail["attempt_notes"]["mcp"]["calls"]
    assert total > 200 and len(record.calls) == 50, (total, len(record.calls))
    assert record.total() == total and record.counts() == {"use_skill": total}
    assert summary.usage.tool_calls.value == total
    page = write_html_report(result.run_dir).read_text()
    assert f"tool calls over MCP: {total}" in page
