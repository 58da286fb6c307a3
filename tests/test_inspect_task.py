"""Cases as inspect_ai tasks (issue 31 part 5), offline: inspect's ``mockllm`` model driven by
scripted tool calls over the case's MCP tools. A passing script ends ``ok``, a failing one
not-ok, a token budget ends the sample ``budget-exceeded``; the run folder reads back through
``imagebench report``; the model is offered the bench's tools and nothing else, and nothing of
the truth is in what the task hands it."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("inspect_ai")
pytest.importorskip("mcp")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model  # noqa: E402

import imagebench  # noqa: E402
from imagebench.inspectai.registry import case  # noqa: E402  (the task and the hook, as the entry point loads them)

ROOT = Path(imagebench.__file__).resolve().parents[2]
LABEL = "segment-nuclei/count-nuclei"
MODEL = "mockllm/model"
PER_CALL = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)


def _count(image: np.ndarray) -> int:
    sys.path.insert(0, str(ROOT / "examples" / "agents"))
    try:
        from classical_agent import count
    finally:
        sys.path.remove(str(ROOT / "examples" / "agents"))
    return int(count(image))


def _script(off_by: int, seen: dict[str, Any]) -> Any:
    """The model's turns: get_prompt, read the input, set the count (``off_by`` wrong), submit, stop."""

    def step(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> ModelOutput:
        seen.setdefault("tools", {t.name for t in tools})
        seen.setdefault("first", messages[-1].text if messages else "")
        results = [m for m in messages if isinstance(m, ChatMessageTool)]
        if not results:
            out = ModelOutput.for_tool_call(MODEL, "get_prompt", {})
        elif len(results) == 1:
            name = json.loads(results[0].text)["inputs"][0]["name"]
            out = ModelOutput.for_tool_call(MODEL, "read_layer", {"name": name, "encoding": "base64"})
        elif len(results) == 2:
            got = json.loads(results[1].text)
            image = np.frombuffer(base64.b64decode(got["data"]), dtype=np.dtype(got["dtype"])).reshape(got["shape"])
            answer = {"count": _count(image) + off_by}
            out = ModelOutput.for_tool_call(MODEL, "set_answer", {"name": "answer", "value": answer})
        elif len(results) == 3:
            out = ModelOutput.for_tool_call(MODEL, "submit", {})
        else:
            out = ModelOutput.from_content(MODEL, "Done.")
        out.usage = PER_CALL  # given, so mockllm counts no tokens itself (that would need the network)
        return out

    return step


def _eval(tmp_path: Path, off_by: int = 0, **params: Any) -> tuple[Any, Any, dict[str, Any]]:
    seen: dict[str, Any] = {}
    (log,) = inspect_eval(
        case(label=LABEL, out=str(tmp_path / "out"), **params),
        model=get_model(MODEL, custom_outputs=_script(off_by, seen)),
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success", log.error
    (sample,) = log.samples
    (score,) = sample.scores.values()
    return log, score, seen


def _summary(run_dir: Path) -> Any:
    from imagebench.runs.reader import read_run

    contents = read_run(run_dir)
    assert contents.verified, contents.problems  # journal, receipt, summaries: all check out
    (summary,) = contents.samples(LABEL)
    return summary


def test_a_passing_script_ends_ok_with_measured_usage_and_its_run_reads_back(tmp_path: Path) -> None:
    from imagebench.cli import main

    _, score, seen = _eval(tmp_path)
    assert score.value == "C" and score.answer == "ok", score.explanation
    run_dir = Path(score.metadata["run_dir"])
    assert run_dir.parent == tmp_path / "out"
    summary = _summary(run_dir)
    assert summary.status == "ok" and summary.subject == "inspect-mockllm-model" and summary.sandbox == "none"
    usage = summary.usage
    assert usage is not None and usage.model is not None and usage.model.id == MODEL
    assert (usage.tokens_in.value, usage.tokens_out.value, usage.turns.value) == (500, 50, 5)  # five model calls
    assert {usage.tokens_in.source, usage.turns.source, usage.model.source} == {"measured"}
    assert usage.tool_calls is not None and (usage.tool_calls.value, usage.tool_calls.source) == (4, "measured")
    assert (run_dir / "inspect.eval").is_file()  # the inspect log beside it
    transcript = json.loads(next(run_dir.glob("*/*/*/sample-0/transcript.json")).read_text())
    assert [c["tool"] for c in transcript["calls"]] == ["get_prompt", "read_layer", "set_answer", "submit"]
    assert main(["report", str(run_dir), "--quiet"]) == 0
    page = (run_dir / "report.html").read_text()
    assert (
        "inspect-mockllm-model" in page
        and "tokens in 500 (measured)" in page
        and "model mockllm/model (measured)" in page
    )


def test_a_failing_script_ends_not_ok(tmp_path: Path) -> None:
    _, score, _ = _eval(tmp_path, off_by=3)
    assert score.value == "I" and score.answer == "wrong-answer"
    assert _summary(Path(score.metadata["run_dir"])).status == "wrong-answer"


def test_a_token_budget_ends_the_sample_budget_exceeded(tmp_path: Path) -> None:
    _, score, _ = _eval(tmp_path, max_tokens=250)
    assert score.value == "I" and score.answer == "budget-exceeded", score.explanation
    summary = _summary(Path(score.metadata["run_dir"]))
    assert summary.status == "budget-exceeded" and "token limit" in summary.reason
    assert summary.usage is not None and summary.usage.tokens is not None and summary.usage.tokens > 250


def test_the_model_gets_the_bench_tools_only_and_no_truth(tmp_path: Path) -> None:
    import asyncio

    from helpers import truth_leaks

    from imagebench.case.session import open_session
    from imagebench.catalog import build_catalog
    from imagebench.runs.runner import prepare_fixture
    from imagebench.subjects.mcp.server import build_server
    from imagebench.subjects.mcp.tools import AgentSession, CaseView

    task = case(label=LABEL, out=str(tmp_path / "out"))
    (sample,) = task.dataset
    assert not sample.target and not sample.files and sample.sandbox is None and task.sandbox is None
    assert not sample.metadata and task.metadata == {"imagebench_label": LABEL}
    found = build_catalog().get(LABEL)
    fixture = prepare_fixture(found).fixture
    handed = json.dumps([sample.input, sample.id, task.metadata]).encode()
    assert truth_leaks(fixture.truth, handed) == []
    agent = AgentSession(CaseView.of(found), open_session(found, fixture))
    served = {t.name for t in asyncio.run(build_server(agent).list_tools())}
    _, _, seen = _eval(tmp_path)
    assert seen["tools"] == served  # the bench's MCP tools, and no shell, editor or other tool of inspect's
    assert seen["first"] == sample.input


def test_an_unknown_label_and_a_cost_budget_without_prices_are_named_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="label='segment-nuclei/no-such'"):
        case(label="segment-nuclei/no-such")
    with pytest.raises(ValueError, match="max_cost needs -T prices"):
        case(label=LABEL, max_cost=1.0)


def _one_run(tmp_path: Path, outputs: Any, **params: Any) -> Any:
    (log,) = inspect_eval(
        case(label=LABEL, out=str(tmp_path / "out"), **params),
        model=get_model(MODEL, custom_outputs=outputs),
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    (sample,) = log.samples
    (score,) = sample.scores.values()
    return score


def test_the_loops_time_limit_ends_the_sample_timeout(tmp_path: Path) -> None:
    import anyio

    async def slow(*_: Any) -> ModelOutput:
        await anyio.sleep(5)
        out = ModelOutput.for_tool_call(MODEL, "get_prompt", {})
        out.usage = PER_CALL
        return out

    score = _one_run(tmp_path, slow, timeout=1.0)
    assert score.value == "I" and score.answer == "timeout", score.explanation
    assert "1 s limit" in score.explanation


def test_a_model_that_fails_is_the_subjects_failure_not_a_pass(tmp_path: Path) -> None:
    def broken(*_: Any) -> ModelOutput:
        raise RuntimeError("the provider went away")

    score = _one_run(tmp_path, broken)
    assert score.value == "I" and score.answer == "subject-error"
    assert "the provider went away" in score.explanation


def test_a_provider_that_cannot_be_reached_is_infra_error_apart_never_a_zero(tmp_path: Path) -> None:
    import httpx

    def offline(*_: Any) -> ModelOutput:
        try:
            raise httpx.ConnectError("[Errno -3] Temporary failure in name resolution")
        except httpx.ConnectError as exc:  # as a provider's client wraps it
            raise RuntimeError("request failed") from exc

    (log,) = inspect_eval(
        case(label=LABEL, out=str(tmp_path / "out")),
        model=get_model(MODEL, custom_outputs=offline),
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    (sample,) = log.samples
    assert not sample.scores and sample.error is not None  # an error in inspect's log, not a score
    assert "infra-error" in sample.error.message
    (run_dir,) = [p.parent for p in (tmp_path / "out").rglob("run.json")]
    summary = _summary(run_dir)
    assert summary.status == "infra-error" and "httpx.ConnectError" in summary.reason


def test_only_a_providers_own_errors_are_infrastructure() -> None:
    from imagebench.inspectai.task import infrastructure_failure

    class ConnectionError(Exception):  # a subject's own class of the same name is not the provider's
        pass

    assert infrastructure_failure(ConnectionError("no")) is None
    assert infrastructure_failure(RuntimeError("Connection refused (429 rate limit)")) is None
    import httpx

    assert infrastructure_failure(httpx.ReadTimeout("slow")) is not None
