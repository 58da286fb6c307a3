"""An agent CLI's private HOME: a fresh folder in its workspace, seeded, written and read back safely.

The HOME is ``home/`` in the subject's workspace (``/workspace/home`` in the sandbox), so it has the
workspace's size cap and goes with it. Before the CLI starts, the harness copies the user's
template HOME into it (``--subject-home DIR``: read by the harness from a folder the *user* controls;
a link in it is left out, never followed) and writes the CLI's MCP configuration there, beneath the
workspace's descriptor (:mod:`imagebench.sandbox.workspace`). After the CLI ends, its log files are
read back beneath the same descriptor (no link followed, regular files only, size-capped) and
copied flat into the sample folder (``agent-log-<n>-<name>``, so the sample's artifact digests
cover them).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from imagebench.subjects.agents.envelope import AgentLog
from imagebench.subjects.base import SubjectError

if TYPE_CHECKING:
    from imagebench.sandbox.workspace import Workspace

#: the private HOME, relative to the workspace
HOME = "home"
#: what of an agent's logs is kept: bytes in all, files, and bytes of one file
LOGS_CAP = 16 * 1024 * 1024
LOGS_MAX_FILES = 200
TEMPLATE_MAX_BYTES = 64 * 1024 * 1024
TEMPLATE_MAX_FILES = 2000
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def check_template(home: Path, *, secret: list[str]) -> Path:
    """``home`` resolved, when it may seed a private HOME: a folder, not inside anything the
    subject must not see (``secret``: the harness's paths), within the template's caps; else
    SubjectError naming the folder and what is wrong."""
    root = Path(home).expanduser()
    if not root.is_dir() or root.is_symlink():
        raise SubjectError(f"--subject-home {home}: expected a folder (not a link), found none")
    real = os.path.realpath(root)
    for s in secret:
        if real == s or real.startswith(s.rstrip("/") + "/") or s.startswith(real.rstrip("/") + "/"):
            raise SubjectError(
                f"--subject-home {home}: it is, lies inside or holds {s}, which a subject must not see "
                "(the harness, a fixture tree, a run folder, the state folder)"
            )
    files = size = 0
    for folder, dirs, names in os.walk(real):
        files += len(names)
        for name in names:
            try:
                size += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
        if files > TEMPLATE_MAX_FILES or size > TEMPLATE_MAX_BYTES:
            raise SubjectError(
                f"--subject-home {home}: more than {TEMPLATE_MAX_FILES} files or {TEMPLATE_MAX_BYTES >> 20} MiB; "
                "a template HOME holds config, not data"
            )
    return Path(real)


def seed(ws: Workspace, template: Path | None, hidden: tuple[Path, ...] = ()) -> list[str]:
    """Make the private HOME in ``ws`` and copy ``template`` into it (links, FIFOs and devices left
    out and returned, never followed). The bench's own folders found in it (a run, sitting or
    calibration folder, a fixture tree: :mod:`imagebench.sandbox.benchfolders`) and what the run
    hides from its subject (``hidden``: the sample folder, the outcome folder, a bundle's answer
    keys) are left out whole, as the sandbox masks them in a folder it shows."""
    from imagebench.sandbox.benchfolders import is_bench_folder

    ws.mkdir(HOME, 0o700)
    left_out: list[str] = []
    if template is None:
        return left_out
    root = Path(template)
    secret = [os.path.realpath(h) for h in hidden]

    def withheld(path: Path) -> bool:
        real = os.path.realpath(path)
        return is_bench_folder(str(path)) or any(real == s or real.startswith(s.rstrip("/") + "/") for s in secret)

    if withheld(root):
        return ["(the whole template: it is a folder of the bench's or one the run hides)"]
    for folder, dirs, names in os.walk(root):  # os.walk follows no link to a folder
        here = Path(folder)
        rel_folder = here.relative_to(root).as_posix()
        for name in sorted(dirs):
            path = here / name
            rel = f"{HOME}/{name}" if rel_folder == "." else f"{HOME}/{rel_folder}/{name}"
            if path.is_symlink():
                left_out.append(f"{rel[len(HOME) + 1 :]} (a symbolic link)")
                continue
            if withheld(path):
                left_out.append(f"{rel[len(HOME) + 1 :]} (a folder of the bench's or one the run hides)")
                continue
            ws.mkdir(rel, 0o700)
        dirs[:] = [d for d in dirs if not (here / d).is_symlink() and not withheld(here / d)]
        for name in sorted(names):
            path = here / name
            rel = f"{HOME}/{name}" if rel_folder == "." else f"{HOME}/{rel_folder}/{name}"
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as exc:
                left_out.append(f"{rel[len(HOME) + 1 :]} ({'a symbolic link' if path.is_symlink() else exc.strerror})")
                continue
            with os.fdopen(fd, "rb") as fh:
                import stat

                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    left_out.append(f"{rel[len(HOME) + 1 :]} (not a regular file)")
                    continue
                ws.write_bytes(rel, fh.read(TEMPLATE_MAX_BYTES + 1)[:TEMPLATE_MAX_BYTES], 0o600)
    return left_out


def home_file(ws: Workspace, rel: str, cap: int = 1024 * 1024) -> str | None:
    """A text file of the private HOME as written so far (the template's), or None when absent."""
    path = f"{HOME}/{rel}"
    if ws.kind(path) != "file":
        return None
    return ws.read_text(path, cap)


def write_home(ws: Workspace, rel: str, text: str) -> None:
    """Write ``rel`` in the private HOME (its folders made as needed); a file the template
    brought under that name is replaced (the harness's configuration wins)."""
    parts = rel.split("/")
    for i in range(1, len(parts)):
        folder = f"{HOME}/{'/'.join(parts[:i])}"
        if ws.kind(folder) is None:
            ws.mkdir(folder, 0o700)
    path = f"{HOME}/{rel}"
    if ws.kind(path) == "file":
        parent, name = path.rsplit("/", 1)
        fd = ws._dir_beneath(parent)  # noqa: SLF001 (the workspace's own descriptor walk)
        try:
            os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
    ws.write_bytes(path, text.encode("utf-8"), 0o600)


def keep_logs(ws: Workspace, sample_dir: Path, folders: tuple[str, ...], *, kept: int = 0) -> list[AgentLog]:
    """Copy each regular file under ``folders`` (relative to the private HOME) into ``sample_dir``
    as ``agent-log-<n>-<name>``: read beneath the workspace's descriptor, no link followed,
    :data:`LOGS_CAP` bytes and :data:`LOGS_MAX_FILES` files in all (``kept``: how many an earlier
    attempt of the sample kept, numbered before these). What was left out is listed with why."""
    from imagebench.sandbox.workspace import Refused

    logs: list[AgentLog] = []
    left = LOGS_CAP
    prefixes = tuple(f"{HOME}/{f.strip('/')}/" for f in folders)
    for rel, what in ws.walk_files(max_entries=20_000, max_depth=16):
        if not rel.startswith(prefixes) or what == "folder":
            continue
        shown = rel[len(HOME) + 1 :]
        if what != "file":
            logs.append(AgentLog(home_path=shown, why=what))
            continue
        if kept + len([g for g in logs if g.kept_as]) >= LOGS_MAX_FILES:
            logs.append(AgentLog(home_path=shown, why=f"more than {LOGS_MAX_FILES} log files"))
            continue
        try:
            data = ws.read_bytes(rel, left)
        except Refused as exc:
            logs.append(AgentLog(home_path=shown, why=str(exc)[:300]))
            continue
        except OSError as exc:
            logs.append(AgentLog(home_path=shown, why=exc.strerror or str(exc)))
            continue
        n = kept + len([g for g in logs if g.kept_as]) + 1
        name = f"agent-log-{n}-{_SAFE.sub('_', shown.rsplit('/', 1)[-1])[:80]}"
        (sample_dir / name).write_bytes(data)
        left -= len(data)
        logs.append(AgentLog(home_path=shown, kept_as=name, bytes=len(data)))
    return logs
