"""``inspect eval imagebench/case -T label=NAMESPACE/CASE --model PROVIDER/MODEL``: one case of the
bench as an inspect_ai task.

The model and its agent loop are inspect's (:func:`inspect_ai.agent.react`); its only tools are
the case session's MCP tools, served by the bench on a Unix socket of the harness's
(:class:`~imagebench.inspectai.subject.InspectSubject`) and reached through inspect's stdio MCP
client and the bench's stdlib bridge. No truth is in the task's input, metadata, target or
sandbox: the input is the server's public instructions and the case's label. The bench's verifier
is the scorer: the sample runs as a run of the bench (``run_cases``) whose one unit's turn is
inspect's loop, and its summary (with inspect's token usage, ``measured``) is written into an
imagebench run folder under ``out`` that ``imagebench report`` and ``compare`` read; the inspect
log is copied beside it (``inspect.eval`` in the run folder) when the inspect run ends.

A sample that is not a measurement of the model (``skipped``, ``harness-error``, ``blocked``,
``stopped``) is an error in inspect's log, never a zero.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver

#: where a sample's outcome is kept in inspect's store, for the scorer and the log
STORE_KEY = "imagebench"
#: the name of the inspect log copied into the run folder
LOG_NAME = "inspect"
#: how long the solver waits for the unit's turn to start serving (building a fixture can take a while)
SERVE_WAIT_S = 600.0
#: the bench's own time limit of the turn is the loop's (inspect's time limit) and this much more,
#: so that the loop always ends first and its transcript is written before the sample's summary
TURN_GRACE_S = 60.0


def _task_name() -> str:
    """``case``, which inspect namespaces ``imagebench/case`` when the package is installed; else
    the namespaced name itself (an editable checkout, which inspect does not see as a package)."""
    try:
        from inspect_ai._util.registry import registry_name
    except ImportError:  # pragma: no cover - inspect moved it: its namespacing is then the only one
        return "case"
    return "case" if registry_name(_task_name, "case").startswith("imagebench/") else "imagebench/case"


def _find_case(label: str) -> tuple[Any, Any]:
    from imagebench.catalog import build_catalog

    catalog = build_catalog()
    found = catalog.get(label)
    if found is None:
        labels = ", ".join(c.label for c in catalog.cases[:8])
        raise ValueError(f"-T label={label!r}: no such case (imagebench list shows them; e.g. {labels}, ...)")
    return found, catalog


def _budget(max_tokens: int | None, max_cost: float | None, prices: str | None) -> Any:
    from imagebench.usage import Budget, read_prices

    table = read_prices(prices) if prices else None
    if max_cost is not None and table is None:
        raise ValueError("-T max_cost needs -T prices=FILE (a price table: imagebench schema prices)")
    try:
        return Budget(max_tokens=max_tokens, max_cost=max_cost, prices=table)
    except ValueError as exc:
        raise ValueError(f"-T max_tokens/max_cost: {exc}") from None


def prompt_for(label: str) -> str:
    """The task's input: the bench server's public instructions and the case's label, nothing else."""
    from imagebench.subjects.mcp.server import INSTRUCTIONS

    return f"{INSTRUCTIONS}\n\nCase: {label}. When you have left your answer and called submit, stop."


@task(name=_task_name())
def case(
    label: str,
    out: str | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    prices: str | None = None,
    timeout: float | None = None,
    message_limit: int = 60,
) -> Task:
    """One case of the bench (``label``: ``imagebench list``) worked by inspect's agent over the
    case's MCP tools and scored by the bench's verifier, into a run folder under ``out`` (default:
    the bench's outcome root). ``max_tokens``/``max_cost`` (with ``prices``, a price table) are the
    sample's budget: inspect's token limit ends the loop at it and the sample is ``budget-exceeded``."""
    found, _ = _find_case(label)
    budget = _budget(max_tokens, max_cost, prices)
    if timeout is not None and not timeout > 0:
        raise ValueError(f"-T timeout must be a positive number of seconds, got {timeout!r}")
    return Task(
        dataset=[Sample(input=prompt_for(found.label), id=found.label.replace("/", "__"))],
        solver=work_case(found.label, out=out, budget=budget, timeout=timeout),
        scorer=bench_verdict(),
        message_limit=message_limit,
        metadata={"imagebench_label": found.label},
    )


def _measured(model: str, messages: list[Any]) -> Any:
    """What inspect counted of this sample's model calls, as the bench's measured usage."""
    from inspect_ai.model import ChatMessageAssistant
    from inspect_ai.model._model import sample_model_usage

    from imagebench.usage import measured_usage

    tokens_in = tokens_out = 0
    for usage in sample_model_usage().values():
        tokens_in += usage.input_tokens + (usage.input_tokens_cache_read or 0) + (usage.input_tokens_cache_write or 0)
        tokens_out += usage.output_tokens
    turns = sum(1 for m in messages if isinstance(m, ChatMessageAssistant))
    return measured_usage(tokens_in=tokens_in, tokens_out=tokens_out, turns=turns, model=model)


@solver
def work_case(label: str, *, out: str | None = None, budget: Any = None, timeout: float | None = None) -> Solver:
    """Run the case ``label`` as a one-unit run of the bench whose turn is inspect's agent loop."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        import sys

        import anyio
        from inspect_ai.agent import react, run
        from inspect_ai.tool import mcp_server_stdio
        from inspect_ai.util import LimitExceededError, time_limit, token_limit

        from imagebench.executor import run_cases
        from imagebench.inspectai.subject import Handoff, InspectSubject

        found, catalog = _find_case(label)
        model = str(state.model)
        limit_s = float(timeout if timeout is not None else found.timeout_s)
        handoff = Handoff()
        subject = InspectSubject(model, handoff)
        box: dict[str, Any] = {}

        def drive() -> None:
            try:
                box["result"] = run_cases(
                    [found],
                    subject,
                    out=out,
                    progress=False,
                    timeout=limit_s + TURN_GRACE_S,
                    budget=budget,
                    sources=catalog.records([found.label]),
                    selection={"inspect": {"model": model, "sample": str(state.sample_id)}},
                )
                from imagebench.report import write_html_report

                write_html_report(box["result"].run_dir)
            except BaseException as exc:  # handed to the scorer: the bench failed, never the model
                box["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                handoff.close()

        thread = threading.Thread(target=drive, name=f"imagebench-inspect:{label}", daemon=True)
        thread.start()
        try:
            bridge = await anyio.to_thread.run_sync(handoff.wait_serving, SERVE_WAIT_S)
            if bridge is not None:
                server = mcp_server_stdio(name="imagebench", command=sys.executable, args=[str(bridge)])
                agent = react(tools=[server], submit=False)
                limits: list[Any] = [time_limit(limit_s)]
                if budget is not None and budget.max_tokens is not None:
                    limits.append(token_limit(budget.max_tokens))
                exceeded = timed_out = error = infra = None
                messages: list[Any] = list(state.messages)
                try:
                    agent_state, limit_error = await run(agent, state.messages, limits=limits)
                    messages = list(agent_state.messages)
                    state.messages, state.output = agent_state.messages, agent_state.output
                    if isinstance(limit_error, LimitExceededError):
                        if limit_error.type == "token":
                            exceeded = f"budget-exceeded: inspect's token limit ({limit_error.message})"
                        elif limit_error.type == "time":
                            timed_out = f"the subject ran past its {limit_s:g} s limit (inspect's time limit)"
                        else:
                            error = f"inspect's {limit_error.type} limit: {limit_error.message}"
                except Exception as exc:  # the model or its loop failed: the subject's failure...
                    infra = infrastructure_failure(exc)  # ...unless the provider could not be reached
                    error = f"the agent loop raised {type(exc).__name__}: {exc}"
                handoff.finish(
                    _measured(model, messages), exceeded=exceeded, timed_out=timed_out, error=error, infra=infra
                )
        finally:
            handoff.cancel()  # whatever happened above, the turn ends
            await anyio.to_thread.run_sync(thread.join)
        state.store.set(STORE_KEY, _outcome(box))
        return state

    return solve


#: the packages a model provider's client raises from, and the names of their errors that mean the
#: provider could not be reached or refused the caller (network, timeout, login, rate limit, outage)
PROVIDER_MODULES = ("openai", "anthropic", "google", "httpx", "httpcore", "requests", "urllib3", "aiohttp", "groq")
INFRA_ERRORS = frozenset(
    {
        "APIConnectionError", "APITimeoutError", "RateLimitError", "AuthenticationError", "PermissionDeniedError",
        "InternalServerError", "ServiceUnavailableError", "OverloadedError", "ConnectError", "ConnectTimeout",
        "ReadTimeout", "ConnectionError", "ClientConnectorError", "ResourceExhausted", "Unauthenticated",
    }
)  # fmt: skip


def infrastructure_failure(exc: BaseException) -> str | None:
    """``infra-error: ...`` when ``exc`` (or an exception it was raised from) is a model provider's
    client failing to reach its service or being refused (:data:`INFRA_ERRORS` raised from one of
    :data:`PROVIDER_MODULES`); None for any other failure, which stays the subject's."""
    seen: set[int] = set()
    here: BaseException | None = exc
    while here is not None and id(here) not in seen:
        seen.add(id(here))
        for cls in type(here).__mro__:
            if cls.__name__ in INFRA_ERRORS and cls.__module__.partition(".")[0] in PROVIDER_MODULES:
                return f"infra-error: the model provider failed ({cls.__module__}.{cls.__name__}: {here})"[:2000]
        here = here.__cause__ or here.__context__
    return None


def _outcome(box: dict[str, Any]) -> dict[str, Any]:
    """What the scorer and the log keep of the bench's run: the sample's status and its run folder."""
    if "error" in box or "result" not in box:
        return {
            "status": "harness-error",
            "reason": box.get("error", "the bench's run left no result"),
            "run_dir": None,
        }
    result = box["result"]
    samples = [s for got in result.samples.values() for s in got]
    if len(samples) != 1:
        return {
            "status": "harness-error",
            "reason": f"the run left {len(samples)} samples, expected 1",
            "run_dir": str(result.run_dir),
        }
    (summary,) = samples
    return {
        "status": summary.status,
        "reason": summary.reason,
        "passed": summary.passed,
        "run_dir": str(result.run_dir),
        "subject": summary.subject,
        "metrics": {m.name: m.value for m in summary.metrics},
        "usage": summary.usage.model_dump(mode="json") if summary.usage is not None else None,
    }


@scorer(metrics=[accuracy(), stderr()])
def bench_verdict() -> Any:
    """The bench's verifier's verdict on what the agent left: CORRECT for ``ok``, INCORRECT for any
    failure; a sample that is not a measurement (skipped, harness-error, blocked, stopped) raises,
    so inspect reports it as an error, apart, never as a zero."""
    from imagebench.runs.verdict import NOT_MEASURED

    async def score(state: TaskState, target: Target) -> Score:
        got = state.store.get(STORE_KEY)
        if not isinstance(got, dict):
            raise RuntimeError("imagebench: the solver left no outcome (was the task's solver replaced?)")
        status = got.get("status")
        if status in NOT_MEASURED:
            raise RuntimeError(f"imagebench: {status} (not a measurement of the model): {got.get('reason')}")
        return Score(
            value=CORRECT if status == "ok" and got.get("passed") else INCORRECT,
            answer=str(status),
            explanation=got.get("reason") or str(status),
            metadata=got,
        )

    return score


def run_folders(log: Any) -> list[Path]:
    """The run folders the samples of an inspect log wrote (their scores' metadata)."""
    folders: list[Path] = []
    for sample in getattr(log, "samples", None) or []:
        # the scores' metadata, and the solver's outcome in the sample's store: a sample the scorer
        # raised on (infra-error, harness-error: an error in the log, not a score) has only the latter
        places = [sc.metadata or {} for sc in (sample.scores or {}).values()]
        kept = (getattr(sample, "store", None) or {}).get(STORE_KEY)
        if isinstance(kept, dict):
            places.append(kept)
        for place in places:
            where = place.get("run_dir")
            if isinstance(where, str) and Path(where).is_dir() and Path(where) not in folders:
                folders.append(Path(where))
    return folders
