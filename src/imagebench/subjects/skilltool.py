"""The harness's ``skill`` tool: how a ``command:`` subject of a trigger case activates a skill.

A trigger case is graded only from what the harness itself observed (:mod:`imagebench.case.skills`).
An MCP client activates a skill with ``use_skill``; every command subject of a trigger case is
also given this tool, whether or not it is served MCP:

- a folder of the harness's (:class:`SkillFolder`) holding the program ``skill`` and the Unix
  socket ``skill.sock`` beside it; the sandbox shows it read-only at :data:`SKILL_SHOWN`
  (``/skill``), an unsandboxed command reaches it at its own path;
- ``$IMAGEBENCH_SKILL_TOOL`` names the program, and ``skill-tool.md`` in the workspace says how
  to use it (the case's prompt points there)::

      "$IMAGEBENCH_SKILL_TOOL" --list      the skills it may activate, each with what it is for
      "$IMAGEBENCH_SKILL_TOOL" <name>      activate one: prints its instructions

The program is stdlib-only ``python3`` (the sandbox's own, as for the MCP bridge). It sends one
JSON line over the socket and prints the harness's answer; the harness's thread
(:class:`SkillServer`) checks the name against the case's skills and keeps each call. When the
command ends, the activations go into the session's notes (channel ``skill-tool``) and every call
into ``skill-tool.json`` in the sample folder (a :class:`~imagebench.subjects.mcp.transcript.Transcript`).
Nothing in the workspace takes part: a subject can ask the harness to activate a skill, never
write that it did. The socket is 0600, the subject uid's own; a request is one line of at most
:data:`MAX_REQUEST` bytes, read within :data:`REQUEST_TIMEOUT_S`; at most
:data:`MAX_CONNECTIONS` are served at once and :data:`MAX_CALLS` in all.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.case.skills import note_observed
from imagebench.subjects.mcp.transcript import ToolCall, Transcript, summarise
from imagebench.subjects.sockets import listen_unix

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.sandbox.limits import SubjectIds
    from imagebench.sandbox.workspace import Workspace

#: where the sandbox shows the folder (read-only)
SKILL_SHOWN = "/skill"
TOOL_NAME = "skill"
SOCKET_NAME = "skill.sock"
FOLDER_PREFIX = "imagebench-skill-"
#: the variable naming the program, and the workspace file saying how to use it
TOOL_ENV = "IMAGEBENCH_SKILL_TOOL"
README_NAME = "skill-tool.md"
#: the sample folder's record of every call
TRANSCRIPT_NAME = "skill-tool.json"
CHANNEL = "skill-tool"
MAX_REQUEST = 4096
REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 4
MAX_CALLS = 1024

#: Runs inside the sandbox with only the standard library: one request to the harness, its answer printed.
PROGRAM = r'''#!/usr/bin/env python3
"""imagebench skill tool. `skill --list`: the skills you may activate. `skill <name>`: activate one
(the harness records it and answers with its instructions). Exit 0: done; 1: refused or the
harness could not be reached; 2: usage."""
import json
import os
import socket
import sys

USAGE = "usage: skill --list | skill <name>"


def main(argv):
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv[:1] in (["-h"], ["--help"]) else sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    request = {"list": True} if argv[0] == "--list" else {"use": argv[0]}
    os.chdir(os.path.dirname(os.path.abspath(__file__)))  # a short relative socket path
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    try:
        sock.connect("skill.sock")
        sock.sendall(json.dumps(request).encode("utf-8") + b"\n")
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while len(data) < 1 << 20:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        print(f"skill: cannot reach the harness: {exc}", file=sys.stderr)
        return 1
    try:
        reply = json.loads(data.decode("utf-8"))
    except ValueError:
        print("skill: the harness's answer is not JSON", file=sys.stderr)
        return 1
    if "error" in reply:
        print(f"skill: {reply['error']}", file=sys.stderr)
        return 1
    print(json.dumps(reply, indent=2))
    return 0


sys.exit(main(sys.argv[1:]))
'''


def readme_text(program: str, skills: Mapping[str, str]) -> str:
    """``skill-tool.md``: what the tool is, how to call it (``program`` as the subject sees it), the skills."""
    lines = [
        "# The skill tool",
        "",
        "The harness gives you a `skill` tool. Activating a skill through it is the only way a skill",
        "activation is recorded: the harness keeps the record itself, and nothing you write (a trace",
        "file in outputs/, say) counts.",
        "",
        f"- `{program} --list` (or `python3 {program} --list`): the skills you may activate, each with what it is for;",
        f"- `{program} <name>` (or `python3 {program} <name>`): activate one; it prints the skill's instructions.",
        "",
        f"`${TOOL_ENV}` holds `{program}`. Exit status 0: done; 1: refused (an unknown skill) or the harness",
        "could not be reached; 2: usage.",
        "",
        "Skills:",
        "",
        *(f"- `{name}`: {about}" for name, about in sorted(skills.items())),
        "",
    ]
    return "\n".join(lines)


class SkillFolder:
    """A fresh folder of the harness's holding the ``skill`` program (0755) and, once served, its
    socket. Made 0755 (the subject's uid reads it), written only beneath a descriptor held since
    it was made, with ``O_EXCL | O_NOFOLLOW``."""

    def __init__(self, parent: Path | None = None) -> None:
        from imagebench.sandbox.process import sweep_stale

        if parent is None:
            sweep_stale(FOLDER_PREFIX)  # the folders of harnesses killed before they could clean up
        self.path = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-", dir=parent))
        os.chmod(self.path, 0o755)
        self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(TOOL_NAME, flags, 0o755, dir_fd=self._fd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(PROGRAM.encode("utf-8"))
        os.chmod(TOOL_NAME, 0o755, dir_fd=self._fd)  # the umask may have taken the execute bits

    @property
    def program(self) -> Path:
        return self.path / TOOL_NAME

    @property
    def socket_path(self) -> Path:
        return self.path / SOCKET_NAME

    def remove(self) -> None:
        import shutil

        with suppress(OSError):
            os.close(self._fd)
        shutil.rmtree(self.path, ignore_errors=True)


class SkillServer:
    """The harness's end of the skill tool: a thread answering one request per connection on
    ``path``, until :meth:`close`. ``skills``: ``{id: what it is for}``, the ones it may activate.

    A request is one JSON object on one line: ``{"list": true}`` or ``{"use": "<name>"}``; the
    answer one JSON object (``{"error": ...}`` when refused). Every call is kept in
    :attr:`transcript` (tool ``skill``), each activation in :attr:`transcript.skills`."""

    def __init__(
        self,
        skills: Mapping[str, str],
        path: Path,
        *,
        ids: SubjectIds | None = None,
        label: str = "",
        instructions: Mapping[str, str] | None = None,
    ) -> None:
        self.skills = dict(skills)
        self.instructions = dict(instructions or {})  # {id: the body of its SKILL.md}
        self.path = Path(path)
        self.transcript = Transcript(label=label, route=CHANNEL)
        self.activations: list[str] = []  # every successful activation, in order (repeats kept)
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self._stop = threading.Event()
        self._active = 0
        self._workers: list[threading.Thread] = []
        self._conns: set[socket.socket] = set()
        self._sock = listen_unix(self.path, ids, backlog=MAX_CONNECTIONS)
        self._thread = threading.Thread(target=self._accept, name="imagebench-skill-tool", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- serving

    def _accept(self) -> None:
        import select

        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._sock], [], [], 0.1)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            with self._lock:
                busy = self._active >= MAX_CONNECTIONS or self._stop.is_set()
                if not busy:
                    self._active += 1
                    self._conns.add(conn)
            if busy:  # one more than the limit is closed as it comes
                with suppress(OSError):
                    conn.close()
                continue
            worker = threading.Thread(target=self._serve_one, args=(conn,), daemon=True)
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
            worker.start()

    def _serve_one(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(True)
            line = _read_line(conn)
            if line is None:  # read the rest first (to a bound): closing on unread bytes would reset the answer
                _drain(conn)
            reply = self.answer(line)
            conn.sendall(json.dumps(reply, allow_nan=False).encode("utf-8") + b"\n")
        except (OSError, ValueError):
            pass  # the subject went away, or never finished its line: nothing to answer
        finally:
            with suppress(OSError):
                conn.close()
            with self._lock:
                self._active -= 1
                self._conns.discard(conn)

    # ---------------------------------------------------------------- one request

    def answer(self, line: bytes | None) -> dict[str, Any]:
        """The answer to one request line (None: longer than :data:`MAX_REQUEST`), recorded as a call."""
        start = time.perf_counter()
        request: Any = None
        error: str | None = None
        reply: dict[str, Any] = {}
        if line is None:
            error = f"a request is one line of at most {MAX_REQUEST} bytes"
        else:
            try:
                request = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                error = 'a request is one JSON object: {"list": true} or {"use": "<skill>"}'
        with self._lock:
            if error is None and len(self.transcript.calls) >= MAX_CALLS:
                return {"error": f"the skill tool takes at most {MAX_CALLS} calls a sample"}
            if error is None:
                reply, error = self._handle(request)
            record = ToolCall(
                seq=len(self.transcript.calls) + 1,
                tool=TOOL_NAME,
                arguments=summarise(request) if isinstance(request, dict) else {},
                ok=error is None,
                error=error,
                result="; ".join(f"{k}: {str(v)[:60]}" for k, v in reply.items() if k != "skills")[:300],
                started_s=round(start - self._t0, 6),
                seconds=round(time.perf_counter() - start, 6),
            )
            if len(self.transcript.calls) < MAX_CALLS:
                self.transcript.calls.append(record)
        return {"error": error} if error is not None else reply

    def _handle(self, request: Any) -> tuple[dict[str, Any], str | None]:
        if not isinstance(request, dict) or set(request) not in ({"list"}, {"use"}):
            return {}, 'a request is one JSON object: {"list": true} or {"use": "<skill>"}'
        if "list" in request:
            return {"skills": [{"name": k, "about": v} for k, v in sorted(self.skills.items())]}, None
        name = request["use"]
        if not isinstance(name, str) or name not in self.skills:
            shown = name if isinstance(name, str) and len(name) <= 80 else type(name).__name__
            return {}, f"no skill named {shown!r} (skills: {sorted(self.skills)})"
        self.activations.append(name)
        if name not in self.transcript.skills:
            self.transcript.skills.append(name)
        instructions = self.instructions.get(name) or self.skills[name]
        return {"skill": name, "activated": True, "instructions": instructions}, None

    # ---------------------------------------------------------------- ending

    def close(self) -> None:
        """Stop serving: no connection is accepted after this, one still open is cut (a request
        not yet read is never answered); the socket goes."""
        self._stop.set()
        self._thread.join(timeout=5)
        with suppress(OSError):
            self._sock.close()
        with self._lock:
            for conn in self._conns:
                with suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        for worker in list(self._workers):
            worker.join(timeout=REQUEST_TIMEOUT_S + 1)
        with suppress(OSError):
            self.path.unlink()

    def observed(self) -> list[str]:
        with self._lock:
            return list(self.activations)


def _read_line(conn: socket.socket) -> bytes | None:
    """One request line (without its newline), or None when it runs past :data:`MAX_REQUEST`;
    TimeoutError when it has not come within :data:`REQUEST_TIMEOUT_S` in all."""
    data = b""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no request line within {REQUEST_TIMEOUT_S:g} s")
        conn.settimeout(left)
        chunk = conn.recv(MAX_REQUEST + 1 - len(data))
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST and b"\n" not in data:
            return None
    return data.split(b"\n", 1)[0]


def _drain(conn: socket.socket, most: int = 1 << 20) -> None:
    """Read and drop what the client still sends, up to ``most`` bytes or :data:`REQUEST_TIMEOUT_S`."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while most > 0 and (left := deadline - time.monotonic()) > 0:
        conn.settimeout(left)
        chunk = conn.recv(min(most, 1 << 16))
        if not chunk:
            return
        most -= len(chunk)


@dataclass(frozen=True)
class ProvidedTool:
    """The skill tool while a command works: its folder, where the command sees it, its variable."""

    folder: SkillFolder
    shown: str

    @property
    def program(self) -> str:
        return f"{self.shown.rstrip('/')}/{TOOL_NAME}"

    @property
    def env(self) -> dict[str, str]:
        return {TOOL_ENV: self.program}


@contextmanager
def provided(
    skills: Mapping[str, str],
    session: Session,
    workspace: Workspace,
    *,
    sandboxed: bool,
    sample_dir: Path,
    ids: SubjectIds | None = None,
    instructions: Mapping[str, str] | None = None,
) -> Iterator[ProvidedTool]:
    """Give the command working in ``workspace`` the skill tool for ``skills`` while it works: the
    folder and its server, ``skill-tool.md`` in the workspace. Afterwards the server stops, the
    folder goes, every call is written to ``skill-tool.json`` in ``sample_dir`` and the
    activations are noted in ``session.notes`` (channel ``skill-tool``), even when there were none."""
    from imagebench.records import write_record

    folder = SkillFolder()
    try:
        server = SkillServer(skills, folder.socket_path, ids=ids, label=session.label, instructions=instructions)
    except BaseException:
        folder.remove()
        raise
    tool = ProvidedTool(folder, SKILL_SHOWN if sandboxed else str(folder.path))
    try:
        workspace.write_text(README_NAME, readme_text(tool.program, skills))
        yield tool
    finally:
        server.close()
        folder.remove()
        try:
            sample_dir.mkdir(parents=True, exist_ok=True)
            write_record(sample_dir / TRANSCRIPT_NAME, server.transcript)
        finally:
            note_observed(session.notes, CHANNEL, server.observed())
            session.notes["skill_tool"] = {
                "calls": len(server.transcript.calls),
                "errors": server.transcript.errors(),
                "skills": list(server.transcript.skills),
                "transcript": TRANSCRIPT_NAME,
            }
