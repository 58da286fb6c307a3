"""Running one subject's turn: binding it to its case, its time limit, a person's Stop."""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.sandbox.process import KILL_GRACE_S
from imagebench.subjects.base import (
    Subject,
    SubjectBudgetExceeded,
    SubjectHarnessError,
    SubjectInfraError,
    SubjectNotAttempted,
    SubjectResourceLimit,
    SubjectTimeout,
    UnitContext,
)

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.case.session import Session


@dataclass
class SubjectRun:
    """How a subject's turn ended: its wall time, whether it timed out, and what it raised."""

    seconds: float
    timed_out: bool = False
    timeout_reason: str = ""
    error: str | None = None
    harness_error: str | None = None
    stopped: bool = False  # a person stopped the turn (``stop`` was set)
    resource_limit: str | None = None  # "resource-limit: memory (...)": it was ended for a limit
    budget_exceeded: str | None = None  # "budget-exceeded: ...": it spent more than its budget and was ended
    not_attempted: str | None = None  # why the subject never took up the case (SubjectNotAttempted)
    infra_error: str | None = None  # its infrastructure failed, as an agent CLI reported it (infra-error)


#: Set while a run is being interrupted: every subject's turn still under way ends now (its
#: processes killed) and raises KeyboardInterrupt in its own thread, so no summary is written for
#: a unit the interrupt cut short (a resume runs it again). The serial loop is interrupted in its
#: own thread; the threads of ``--workers`` for commands (imagebench.executor.threads) need this.
_INTERRUPTED = threading.Event()
_ACTIVE: dict[int, Callable[[], None]] = {}
_ACTIVE_LOCK = threading.Lock()


def interrupt_subjects() -> None:
    """End every subject's turn under way in this process, now (an interrupted run)."""
    _INTERRUPTED.set()
    with _ACTIVE_LOCK:
        cancels = list(_ACTIVE.values())
    for cancel in cancels:
        try:
            cancel()
        except Exception:  # ending the others matters more than why one would not end
            pass


def clear_interrupt() -> None:
    """After an interrupted run has wound down: turns may start again in this process."""
    _INTERRUPTED.clear()


def bind_subject(subject: Subject, case: Case, context: UnitContext) -> Callable[[Session], None]:
    """The callable that works this sample: ``subject.bind(case, context)`` when it has one, else itself."""
    bind = getattr(subject, "bind", None)
    return bind(case, context) if bind is not None else subject


def _describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = "; ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames)
    text = f"{type(exc).__name__}: {exc}"
    return f"{text} (at {where})" if where else text


def run_subject(
    work: Callable[[Session], None], session: Session, timeout_s: float, stop: threading.Event | None = None
) -> SubjectRun:
    """Run ``work(session)`` with a time limit; ``stop`` (set from another thread) ends it early.

    In-process work runs in a daemon thread that is abandoned when it runs past ``timeout_s`` or is
    stopped (Python cannot kill a thread; the session is private to this sample, so nothing it
    still writes reaches a result); a command is killed with everything it started. Work that
    enforces its own limit (a command) gets a grace margin.
    """
    own_limit = bool(getattr(work, "enforces_timeout", False))
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            work(session)
        except SubjectTimeout as exc:
            outcome["timeout"] = str(exc)
        except SubjectResourceLimit as exc:
            outcome["limit"] = str(exc)
        except SubjectBudgetExceeded as exc:
            outcome["budget"] = str(exc)
        except SubjectHarnessError as exc:
            outcome["harness"] = str(exc)
        except SubjectNotAttempted as exc:
            outcome["not_attempted"] = str(exc)
        except SubjectInfraError as exc:
            outcome["infra"] = str(exc)
        except BaseException as exc:  # the subject's own failure: recorded, the run goes on
            outcome["error"] = _describe(exc)

    start = time.perf_counter()
    thread = threading.Thread(target=target, name=f"imagebench-subject:{session.label}", daemon=True)
    thread.start()
    cancel = getattr(work, "cancel", None)
    limit = timeout_s + (KILL_GRACE_S + 10.0 if own_limit else 0.0)
    key = id(thread)
    if cancel is not None:
        with _ACTIVE_LOCK:
            _ACTIVE[key] = cancel
    try:
        while (
            thread.is_alive()
            and time.perf_counter() - start < limit
            and not (stop is not None and stop.is_set())
            and not _INTERRUPTED.is_set()
        ):
            thread.join(0.05)
        if _INTERRUPTED.is_set():
            raise KeyboardInterrupt("the run was interrupted")
    except BaseException:  # interrupted (Ctrl-C): take the subject's processes down with us
        if cancel is not None:
            cancel()
        raise
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.pop(key, None)
    if stop is not None and stop.is_set() and thread.is_alive():
        if cancel is not None:
            cancel()  # a command: its whole process tree ends now
        return SubjectRun(seconds=time.perf_counter() - start, stopped=True)
    seconds = time.perf_counter() - start
    if thread.is_alive():
        return SubjectRun(
            seconds=seconds, timed_out=True, timeout_reason=f"the subject ran past its {timeout_s:g} s limit"
        )
    if "timeout" in outcome:
        return SubjectRun(seconds=seconds, timed_out=True, timeout_reason=outcome["timeout"])
    if "limit" in outcome:
        return SubjectRun(seconds=seconds, resource_limit=outcome["limit"])
    if "budget" in outcome:
        return SubjectRun(seconds=seconds, budget_exceeded=outcome["budget"])
    if "not_attempted" in outcome:
        return SubjectRun(seconds=seconds, not_attempted=outcome["not_attempted"])
    if "infra" in outcome:
        return SubjectRun(seconds=seconds, infra_error=outcome["infra"])
    return SubjectRun(seconds=seconds, error=outcome.get("error"), harness_error=outcome.get("harness"))
