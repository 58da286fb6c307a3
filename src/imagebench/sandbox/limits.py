"""The limits a confined subject runs under, and how each is enforced (docs/integrity.md).

A subject must not be able to take the machine down. Every confined subject (a sandboxed
command, an isolated function) gets, on by default:

- **memory**: a cgroup leaf of its own (cgroup v2, or the v1 ``memory`` hierarchy) with that
  limit, where this machine lets the harness make one; otherwise ``RLIMIT_AS`` set inside the
  sandbox (address space, a cruder bound);
- **processes**: the leaf's ``pids.max`` where there is one, and always ``RLIMIT_NPROC`` for the
  subject's own uid (one uid per running subject, so the count is its own);
- **open files** (``RLIMIT_NOFILE``), **CPU time** per process (``RLIMIT_CPU``), the size of one
  file it writes (``RLIMIT_FSIZE``: the workspace's size);
- **/tmp**: a tmpfs of a fixed size (bwrap ``--size``);
- **the workspace**: a tmpfs of that size mounted on the workspace folder where the harness may
  mount (root), otherwise a watcher that ends the subject when the folder outgrows it;
- what the harness reads back: each leaving and all of a sample's leavings together are capped
  (:mod:`imagebench.sandbox.workspace`).

A subject that hits one ends with the status ``resource-limit`` and a reason naming it
(``resource-limit: memory``): a failure, like a timeout.

When the harness runs as root the subject never does: it runs as a uid of its own from
:data:`UID_BASE` on (``setpriv`` drops to it inside the sandbox after bwrap has set it up), so a
write that escaped would not be root's.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

GiB = 1 << 30
MiB = 1 << 20
#: the first uid (and gid) a subject runs as when the harness is root; one per running subject
UID_BASE = 61_000
UID_COUNT = 1_000
WORKSPACE_SHOWN = "/workspace"  # imagebench.sandbox.policy.WORKSPACE
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*$")
_SCALE = {"": 1, "k": 1 << 10, "m": MiB, "g": GiB, "t": 1 << 40}


def parse_size(text: str | int, what: str) -> int:
    """``"4G"``, ``"512M"``, ``"1.5GiB"`` or a number of bytes; ValueError naming ``what``."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if m is None:
        raise ValueError(f"{what}: expected a size such as 4G, 512M or a number of bytes, got {text!r}")
    return int(float(m.group(1)) * _SCALE[m.group(2).lower()])


def show_size(n: int) -> str:
    for unit, scale in (("G", GiB), ("M", MiB), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


@dataclass(frozen=True)
class Limits:
    """What one confined subject may use. ``leaving``/``leavings`` of None: derived from the case
    (:func:`leaving_caps`)."""

    memory: int = 4 * GiB
    processes: int = 512
    open_files: int = 1024
    cpu_s: int = 3600
    tmp: int = 1 * GiB
    workspace: int = 2 * GiB
    leaving: int | None = None
    leavings: int | None = None

    def to_record(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_record(cls, raw: object) -> Limits:
        """What :meth:`to_record` wrote (a record without limits: the defaults); ValueError naming the field."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ValueError(f"expected an object of limits, got {type(raw).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown limit(s) {unknown}; known: {sorted(known)}")
        out: dict[str, Any] = {}
        for name, value in raw.items():
            optional = name in ("leaving", "leavings")
            if (value is None and optional) or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                out[name] = value
            else:
                raise ValueError(f"field {name!r} is {value!r}, expected a positive whole number")
        return cls(**out)

    def with_overrides(self, **given: Any) -> Limits:
        return replace(self, **{k: v for k, v in given.items() if v is not None})


def leaving_caps(limits: Limits, layers: dict[str, Any], collect: tuple[Any, ...]) -> tuple[dict[str, int], int]:
    """The byte cap of each leaving and of all of a sample's leavings together.

    An array leaving may be as large as the largest input, in 8-byte values, twice over (a float64
    or int64 answer on the input's grid, with room to spare), and never under 64 MiB; a JSON
    leaving 16 MiB; a scalar 1 MiB. ``limits.leaving``/``limits.leavings`` override them."""
    largest = 0
    for sl in layers.values():
        shape = getattr(getattr(sl, "data", None), "shape", None)
        if shape is not None:
            n = 1
            for d in shape:
                n *= int(d)
            largest = max(largest, n)
    per: dict[str, int] = {}
    for c in collect:
        if limits.leaving is not None:
            per[c.name] = limits.leaving
        elif c.what == "array":
            per[c.name] = max(64 * MiB, largest * 8 * 2 + 64 * 1024)
        elif c.what == "json":
            per[c.name] = 16 * MiB
        else:
            per[c.name] = 1 * MiB
    total = limits.leavings if limits.leavings is not None else sum(per.values())
    return per, total


# --------------------------------------------------------------------------- the subject's uid


class NoSubjectIds(RuntimeError):
    """Every subject uid is taken (more than UID_COUNT subjects at once on this machine)."""


_uid_lock = threading.Lock()
_uids_held: set[int] = set()


@dataclass(frozen=True)
class SubjectIds:
    uid: int
    gid: int


@contextmanager
def subject_ids() -> Iterator[SubjectIds | None]:
    """A uid/gid no other running subject on this machine has (None when the harness is not root:
    then the subject runs as the harness's own, unprivileged, user). A lock file per uid keeps two
    harness processes from handing out the same one."""
    if os.geteuid() != 0:
        yield None
        return
    folder = Path(tempfile.gettempdir()) / "imagebench-uids"
    with suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    held: tuple[int, int] | None = None
    with _uid_lock:
        for uid in range(UID_BASE, UID_BASE + UID_COUNT):
            if uid in _uids_held:
                continue
            fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            _uids_held.add(uid)
            held = (uid, fd)
            break
    if held is None:
        raise NoSubjectIds(f"no free subject uid in {UID_BASE}..{UID_BASE + UID_COUNT - 1}")
    try:
        yield SubjectIds(held[0], held[0])
    finally:
        with _uid_lock:
            _uids_held.discard(held[0])
        os.close(held[1])


def wrapper_argv(limits: Limits, ids: SubjectIds | None, *, rlimit_memory: bool) -> list[str]:
    """What runs inside the sandbox before the command: ``prlimit`` sets the rlimits, then (as
    root) ``setpriv`` drops to the subject's uid with no capabilities and no way to gain any."""
    argv = [
        "/usr/bin/prlimit",
        f"--nproc={limits.processes}",
        f"--nofile={limits.open_files}",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 5}",  # SIGXCPU at the limit (named), SIGKILL 5 s on
        f"--fsize={limits.workspace}",
    ]
    if rlimit_memory:
        argv.append(f"--as={limits.memory}")
    argv.append("--")
    if ids is not None:
        argv += [
            "/usr/bin/setpriv", f"--reuid={ids.uid}", f"--regid={ids.gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
            "/usr/bin/env", f"--chdir={WORKSPACE_SHOWN}",
        ]  # fmt: skip
    return argv


# --------------------------------------------------------------------------- cgroups

_V2 = Path("/sys/fs/cgroup")


class Cgroup:
    """A leaf cgroup for one subject (memory and pids), v2 or v1, removed by :meth:`remove`."""

    def __init__(self, dirs: dict[str, Path], version: int) -> None:
        self.dirs, self.version = dirs, version

    @classmethod
    def make(cls, name: str, limits: Limits) -> Cgroup | None:
        """A leaf under this process's own cgroup with the limits set, or None where none can be made."""
        sweep_stale_cgroups()
        for make in (cls._make_v2, cls._make_v1):
            try:
                group = make(name, limits)
            except OSError:
                group = None
            if group is not None:
                return group
        return None

    @staticmethod
    def _own(controller: str) -> str | None:
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, ctrls, path = line.split(":", 2)
            if (controller == "" and ctrls == "") or controller in ctrls.split(","):
                return path
        return None

    @classmethod
    def _make_v2(cls, name: str, limits: Limits) -> Cgroup | None:
        if not (_V2 / "cgroup.controllers").is_file():
            return None
        own = cls._own("")
        if own is None:
            return None
        parent = _V2 / own.lstrip("/")
        if not {"memory", "pids"} <= set((parent / "cgroup.subtree_control").read_text().split()):
            return None  # the harness may not enable controllers in its own (non-leaf rules) cgroup
        leaf = parent / name
        leaf.mkdir()
        group = cls({"memory": leaf, "pids": leaf}, 2)
        try:
            (leaf / "memory.max").write_text(str(limits.memory))
            with suppress(OSError):
                (leaf / "memory.swap.max").write_text("0")
            (leaf / "pids.max").write_text(str(limits.processes))
        except OSError:
            group.remove()
            raise
        return group

    @classmethod
    def _make_v1(cls, name: str, limits: Limits) -> Cgroup | None:
        dirs: dict[str, Path] = {}
        for controller in ("memory", "pids"):
            root = _V2 / controller
            own = cls._own(controller)
            if own is None or not (root / "cgroup.procs").is_file():
                break
            dirs[controller] = root / own.lstrip("/") / name
        if len(dirs) < 2:
            return None
        group = cls({}, 1)
        try:
            for controller, leaf in dirs.items():
                leaf.mkdir()
                group.dirs[controller] = leaf
            (dirs["memory"] / "memory.limit_in_bytes").write_text(str(limits.memory))
            with suppress(OSError):
                (dirs["memory"] / "memory.memsw.limit_in_bytes").write_text(str(limits.memory))
            (dirs["pids"] / "pids.max").write_text(str(limits.processes))
        except OSError:
            group.remove()
            raise
        return group

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` file of each hierarchy (one in v2; memory's and pids' in v1)."""
        return [str(leaf / "cgroup.procs") for leaf in dict.fromkeys(self.dirs.values())]

    def _events(self, path: Path) -> dict[str, int]:
        out: dict[str, int] = {}
        with suppress(OSError):
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                with suppress(ValueError):
                    out[key] = int(value)
        return out

    def hit(self) -> str | None:
        """``"memory"`` or ``"processes"`` when the subject ran into that limit, else None."""
        memory, pids = self.dirs["memory"], self.dirs["pids"]
        if self.version == 2:
            if self._events(memory / "memory.events").get("oom_kill", 0) > 0:
                return "memory"
        elif self._events(memory / "memory.oom_control").get("oom_kill", 0) > 0:
            return "memory"
        if self._events(pids / "pids.events").get("max", 0) > 0:
            return "processes"
        return None

    def remove(self) -> None:
        """Kill what is left in the leaf and remove it."""
        import signal

        for leaf in dict.fromkeys(self.dirs.values()):
            for _ in range(50):
                try:
                    pids = [int(p) for p in (leaf / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                if not pids:
                    break
                for pid in pids:
                    with suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                threading.Event().wait(0.02)
            with suppress(OSError):
                leaf.rmdir()


_cgroup_seq = 0
_cgroup_seq_lock = threading.Lock()
_LEAF = re.compile(r"^imagebench-(\d+)-\d+$")
_swept = False


def sweep_stale_cgroups() -> list[Path]:
    """Remove the leaves left by harness processes that are gone (killed before they could);
    their subjects died with their sandboxes (``--die-with-parent``). Once per process."""
    global _swept
    if _swept:
        return []
    _swept = True
    removed: list[Path] = []
    parents = []
    for controller in ("", "memory", "pids"):
        own = Cgroup._own(controller)
        if own is not None:
            parents.append((_V2 / controller / own.lstrip("/")) if controller else _V2 / own.lstrip("/"))
    for parent in parents:
        try:
            entries = list(parent.iterdir())
        except OSError:
            continue
        for leaf in entries:
            m = _LEAF.match(leaf.name)
            if m is None or int(m.group(1)) == os.getpid() or Path(f"/proc/{m.group(1)}").exists():
                continue
            with suppress(OSError):
                Cgroup({"memory": leaf, "pids": leaf}, 2).remove()
                if not leaf.exists():
                    removed.append(leaf)
    return removed


def cgroup_name() -> str:
    global _cgroup_seq
    with _cgroup_seq_lock:
        _cgroup_seq += 1
        return f"imagebench-{os.getpid()}-{_cgroup_seq}"
