"""Agent serving's model: the loaded case served to an agent over MCP, and its score. Qt-free.

The agent gets the same tools as ``imagebench mcp serve`` and ``run --subject-mcp``
(:mod:`imagebench.subjects.mcp`), on a fresh session of the loaded fixture; what it left through
them is scored as subject ``mcp:<client name>``. :func:`connect_command` is the command line that
connects the example agent (``examples/agents/classical_agent.py``) to the served case, and
:meth:`AgentModel.heard` turns the agent's ``submit`` into the notice "the agent submitted — press Score".
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_imagebench._base import AGENT_PREFIX, Message, Notices
from napari_imagebench._runs import ResultRow

#: the example MCP agent, in a checkout (docs/agents.md): a scripted client of the SDK
EXAMPLE_AGENT = Path("examples") / "agents" / "classical_agent.py"
SUBMITTED = "the agent submitted — press Score"


def example_agent() -> Path:
    """The example agent's script: its absolute path in the checkout this package runs from, else
    its path relative to a checkout of the repository."""
    import imagebench

    found = Path(imagebench.__file__).resolve().parents[2] / EXAMPLE_AGENT
    return found if found.is_file() else EXAMPLE_AGENT


def connect_command(config: Path) -> str:
    """The command line that connects the example agent to a case served at ``config`` (its
    ``mcp.json``), run with this Python (which has the SDK, numpy, scipy and scikit-image)."""
    return " ".join(shlex.quote(str(part)) for part in (sys.executable, example_agent(), "--config", config))

if TYPE_CHECKING:
    from imagebench.runs.runner import Unit
    from napari_imagebench._results_model import ResultsModel
    from napari_imagebench._workbench_model import WorkbenchModel


@dataclass
class AgentServe:
    """The loaded case served to an agent over MCP: its own unit (a fresh session on the loaded
    fixture), the tools' session, the server on a Unix socket in ``folder``, and ``folder/mcp.json``."""

    unit: Unit
    agent: Any  # imagebench.subjects.mcp.tools.AgentSession
    server: Any  # imagebench.subjects.mcp.server.SocketServer
    folder: Path
    config: Path

    @property
    def subject_name(self) -> str:
        return AGENT_PREFIX + (self.agent.client_name or "agent")

    @property
    def submitted(self) -> bool:
        """The agent called ``submit``: nothing it left can change; Score scores it."""
        return bool(self.agent.submitted.is_set())

    @property
    def connect(self) -> str:
        """How to connect the example agent to this case (:func:`connect_command`)."""
        return connect_command(self.config)


@dataclass(frozen=True)
class ServedAgent:
    """What a run folder records of an agent served from the panel: untrusted, and unconfined (it
    runs wherever its client runs), so its run says ``sandbox: none`` and ``unsealed``."""

    name: str
    sandbox_kind: str = "none"


class AgentModel:
    """At most one agent served at a time: ``agent`` while it is."""

    def __init__(self, notices: Notices, workbench: WorkbenchModel, ledger: ResultsModel) -> None:
        self.notices, self.workbench, self.ledger = notices, workbench, ledger
        self.agent: AgentServe | None = None  # the loaded case served to an agent ("Serve to an agent")
        self._told: AgentServe | None = None  # the served agent whose submit was told

    def serve(
        self,
        *,
        on_layer: Callable[[Any], None] | None = None,
        on_call: Callable[[Any], None] | None = None,
        display: Any = None,
    ) -> AgentServe:
        """Serve the loaded case to an agent: the same tools as ``imagebench mcp serve`` and
        ``run --subject-mcp`` (:mod:`imagebench.subjects.mcp`), on a fresh session of the loaded fixture,
        on a Unix socket in a new folder that also holds ``mcp.json`` (how a client reaches it).
        ``on_layer`` hears of each layer the agent adds or updates, ``on_call`` of each tool call
        (both from the server's thread; without ``on_call``, :meth:`heard` hears them there). The
        panel hands each call on to its GUI thread and gives it to :meth:`heard` there. ``display``
        binds the viewer tools to the live viewer (``napari_imagebench._agent_view.LiveView``;
        default: the session's own view). :meth:`score` scores what it left."""
        import tempfile

        from imagebench.runs.runner import open_unit
        from imagebench.sandbox.process import remove_tree
        from imagebench.subjects.mcp.server import CONFIG_NAME, McpFolder, SocketServer, config_text
        from imagebench.subjects.mcp.tools import AgentSession, CaseView

        loaded = self.workbench.need_loaded()
        if self.agent is not None:
            raise self.notices.fail(f"already serving {loaded.case.label} to an agent: Score or stop it first", "warning")
        unit = open_unit(loaded.case, AGENT_PREFIX + "agent", fixture=loaded.unit.prepared, plane=loaded.plane)
        if unit.failure is not None or unit.session is None:
            unit.release()
            raise self.notices.fail(f"{loaded.case.label}: {unit.failure[1] if unit.failure else 'no session'}")
        unit.confinement = "none"  # the agent is a program of its own, outside any sandbox
        label = loaded.case.label

        def layer_seen(event: Any) -> None:
            """The agent's layers are drawn on the viewer as it works: a person who watched them
            has seen another subject's results (flagged as after a Run's results)."""
            serve = self.agent
            self.workbench.mark(label, f"saw-results-{serve.subject_name if serve is not None else AGENT_PREFIX + 'agent'}")
            if on_layer is not None:
                on_layer(event)

        folder = Path(tempfile.mkdtemp(prefix="imagebench-agent-"))
        try:
            mcp = McpFolder(folder)  # the socket, the bridge and npy reads: the harness's, beside the agent's files
            agent = AgentSession(
                CaseView.of(loaded.case), unit.session, workspace=folder, reads=mcp, route="viewer",
                on_layer=layer_seen, on_call=on_call if on_call is not None else self.heard, display=display,
            )  # fmt: skip
            server = SocketServer(agent, mcp.socket_path)
            (folder / CONFIG_NAME).write_text(config_text(str(mcp.path)), encoding="utf-8")
        except Exception as exc:
            unit.release()
            remove_tree(folder)
            raise self.notices.fail(f"the MCP server could not start: {type(exc).__name__}: {exc}") from None
        self.agent = AgentServe(unit, agent, server, folder, folder / "mcp.json")
        self.notices.notify(
            "info",
            f"serving {loaded.case.label} to an agent: point its MCP client at {self.agent.config}; "
            f"the example agent connects with {self.agent.connect}",
        )
        return self.agent

    def heard(self, call: Any) -> Message | None:
        """A tool call of the served agent (an :class:`imagebench.subjects.mcp.transcript.ToolCall`):
        its first successful ``submit`` is told, once, as :data:`SUBMITTED`; returns that notice."""
        serve = self.agent
        if serve is None or serve is self._told or getattr(call, "tool", None) != "submit" or not getattr(call, "ok", False):
            return None
        self._told = serve
        return self.notices.notify("info", f"{serve.subject_name}: {SUBMITTED}")

    def stop(self) -> None:
        """Stop serving (nothing is scored); the agent's folder goes."""
        from imagebench.sandbox.process import remove_tree

        serve, self.agent = self.agent, None
        if serve is None:
            return
        serve.server.close()
        serve.agent.reads.remove()
        serve.unit.release()
        remove_tree(serve.folder)

    def score(self) -> ResultRow:
        """Stop serving and score what the agent left through the tools (:func:`imagebench.runs.runner.finish_unit`),
        recorded as subject ``mcp:<client name>``; its transcript goes into the sample folder."""
        from imagebench.runs.runner import finish_unit
        from imagebench.sandbox.process import remove_tree
        from imagebench.subjects import SubjectRun
        from imagebench.subjects.mcp.host import transcript_note, write_transcript

        serve = self.agent
        if serve is None:
            raise self.notices.fail("no agent is being served", "warning")
        loaded = self.workbench.need_loaded()
        self.agent = None
        serve.server.close()
        unit, agent, case = serve.unit, serve.agent, loaded.case
        name = serve.subject_name
        unit.subject_name = name
        folder = self.ledger.run_folder(name, ServedAgent(name))
        unit.run_dir, unit.sample = folder.path, folder.next_sample(case.label)
        assert unit.session is not None
        agent.apply_to(unit.session)
        unit.session.notes["mcp"] = transcript_note(agent)
        try:
            write_transcript(agent, unit.sample_dir)
        except OSError as exc:
            self.notices.notify("warning", f"the transcript could not be written: {exc}")
        from imagebench.subjects.served import not_attempted_reason

        idle = None if agent.attempted else not_attempted_reason(agent)  # a client that called no tool
        summary = finish_unit(unit, SubjectRun(seconds=time.perf_counter() - unit.started, not_attempted=idle))
        agent.reads.remove()
        remove_tree(serve.folder)
        self.ledger.add(folder, case, summary)
        result = ResultRow.of(summary, folder.path, unit.sample_dir, checks=tuple(str(c) for c in case.meta.get("checks") or ()))
        return self.ledger.record(result)
