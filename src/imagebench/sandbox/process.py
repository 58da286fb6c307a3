"""Running one ``command:`` subject: its workspace, its process tree, its output and its time limit.
Long because the three promises below share one child and its reaper: split, each would need the other's state.

Three promises, whatever the command does:

- nothing it started outlives it. In the sandbox (:mod:`imagebench.sandbox.policy`) the command is in
  its own PID namespace, and when bwrap's init ends the kernel kills every process in it,
  ``setsid`` daemons included; bwrap dies with this process (``--die-with-parent``). Without
  the sandbox, its process group, its descendants and every process carrying its tag in the
  environment are killed (a daemon that clears its environment can escape: that is what
  ``sandbox: none`` means);
- its workspace goes even when this process is SIGKILLed: a small reaper (``sh``, in a session
  of its own) waits on a pipe from here; when the pipe closes without a "done" line, it kills
  what is left of the command and removes the workspace. Workspaces a reaper missed (the
  whole machine stopped) are swept when the next one is made;
- its stdout and stderr come through pipes and are kept up to :data:`STREAM_CAP` bytes each,
  with a marker line saying how much was dropped; the last :data:`FINAL_MESSAGE_BYTES` of
  stdout (its final message) are always kept.
"""

from __future__ import annotations

import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from imagebench.sandbox import policy as sandbox
from imagebench.sandbox import seccomp
from imagebench.sandbox.limits import Cgroup, Limits, SubjectIds, cgroup_name, wrapper_argv
from imagebench.sandbox.noexec import program_argv
from imagebench.sandbox.policy import SandboxPolicy

STREAM_CAP = 8 * 1024 * 1024
FINAL_MESSAGE_BYTES = 64 * 1024
KILL_GRACE_S = 2.0
TENSOR_URL_ENV = "IMAGEBENCH_TENSOR_URL"
_TAG_ENV = "IMAGEBENCH_COMMAND_ID"
_WS_PREFIX = "imagebench-ws-"


class CommandHarnessError(RuntimeError):
    """The harness could not run the command (bash, pipes, sandbox, plane bridge): never the subject's fault."""


@dataclass
class Finished:
    """How a command ended, and the end of its stdout (``final_offset``: where that starts in it).
    ``limit`` names the resource limit it ran into (``memory``, ``processes``, ``workspace``,
    ``tmp``, ``cpu``, ``file-size``, ``plane``), if any: it was ended for it."""

    returncode: int
    timed_out: bool
    final: bytes
    final_offset: int
    limit: str | None = None


# --------------------------------------------------------------------------- workspaces

# Waits on stdin. "done" -> exit quietly. End of input without "done" (the harness died) ->
# kill the command's process group and every process tagged with its id, remove the workspace.
_REAPER = r"""trap '' HUP INT TERM QUIT PIPE
pg=; tag=
while read -r word value; do
  case $word in done) exit 0 ;; pgid) pg=$value ;; tag) tag=$value ;; esac
done
[ -n "$pg" ] && kill -KILL -- "-$pg" 2>/dev/null
if [ -n "$tag" ]; then
  for f in /proc/[0-9]*/environ; do
    if grep -qzx "IMAGEBENCH_COMMAND_ID=$tag" "$f" 2>/dev/null; then p=${f#/proc/}; kill -KILL "${p%/environ}" 2>/dev/null; fi
  done
fi
umount -l -- "$1" 2>/dev/null
chmod -R u+w -- "$1" 2>/dev/null; rm -rf -- "$1"
"""


class Reaper:
    """The process that cleans up after this one if it dies while a command runs."""

    def __init__(self, workspace: Path) -> None:
        self._proc = subprocess.Popen(
            ["/bin/sh", "-c", _REAPER, "imagebench-reaper", str(workspace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C or a kill of this process group does not reach it
        )

    def tell(self, word: str, value: object = "") -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(f"{word} {value}\n".encode())
            self._proc.stdin.flush()
        except OSError:
            pass

    def done(self) -> None:
        self.tell("done")
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait()


def remove_tree(path: Path) -> None:
    """Remove ``path`` (unmounting its tmpfs first), even where the command took write permission
    away; never through a link it left (``shutil.rmtree`` works on descriptors, and a folder is
    given its permission back only through a descriptor opened without following links)."""
    unmount(path)

    def retry(func: object, p: str, _exc: object) -> None:
        for folder in (os.path.dirname(p), p):
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.fchmod(fd, 0o755)
            except OSError:
                pass
            finally:
                os.close(fd)
        try:
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
        except OSError:
            pass

    try:
        shutil.rmtree(path, onerror=retry)
    except RecursionError:  # a tree deeper than Python's recursion (a subject's): rm walks it without recursing
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=False)


_MNT_DETACH = 2


def mount_tmpfs(path: Path, size: int, ids: SubjectIds | None) -> bool:
    """Mount a tmpfs of ``size`` bytes on ``path`` (the workspace's cap, exact and race-free);
    False where this process may not mount (not root, or no CAP_SYS_ADMIN)."""
    import ctypes

    if os.geteuid() != 0:
        return False
    owner = f",uid={ids.uid},gid={ids.gid}" if ids is not None else ""
    options = f"size={size},nr_inodes=262144,mode=0700{owner}".encode()
    libc = ctypes.CDLL(None, use_errno=True)
    ms_nosuid, ms_nodev = 2, 4
    return libc.mount(b"tmpfs", os.fsencode(str(path)), b"tmpfs", ms_nosuid | ms_nodev, options) == 0


def unmount(path: Path) -> None:
    """Detach a tmpfs mounted on ``path`` (nothing when none is)."""
    import ctypes

    if os.geteuid() != 0 or not os.path.ismount(path):
        return
    ctypes.CDLL(None, use_errno=True).umount2(os.fsencode(str(path)), _MNT_DETACH)


def _owner_gone(pid: int, made: float) -> bool:
    import psutil

    try:
        return psutil.Process(pid).create_time() > made  # the pid now names a younger process
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def sweep_stale_workspaces(root: Path | None = None) -> list[Path]:
    """Remove the temporary workspaces in ``root`` (the temp folder) whose owning process is gone."""
    return sweep_stale(_WS_PREFIX, root)


def sweep_stale(prefix: str, root: Path | None = None) -> list[Path]:
    """Remove the folders ``<prefix><pid>-*`` in ``root`` (the temp folder) whose process ``pid``
    is gone (a harness killed before it could clean up: a workspace, an MCP folder)."""
    root = Path(root or tempfile.gettempdir())
    removed: list[Path] = []
    named = re.compile(re.escape(prefix) + r"(\d+)-")
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for path in entries:
        match = named.match(path.name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        try:
            made = path.lstat().st_mtime
        except OSError:
            continue
        if path.is_dir() and not path.is_symlink() and _owner_gone(int(match.group(1)), made):
            remove_tree(path)
            removed.append(path)
    return removed


@dataclass
class TemporaryWorkspace:
    """A fresh workspace folder, its reaper, and whether its size is held by a tmpfs of its own."""

    path: Path
    reaper: Reaper
    sized: bool


@contextmanager
def temporary_workspace(limits: Limits | None = None, ids: SubjectIds | None = None) -> Iterator[TemporaryWorkspace]:
    """A fresh empty workspace folder (a tmpfs of ``limits.workspace`` bytes where this process
    may mount one, owned by ``ids``) and its reaper; both gone on exit."""
    sweep_stale_workspaces()
    try:
        workspace = Path(tempfile.mkdtemp(prefix=f"{_WS_PREFIX}{os.getpid()}-"))
        reaper = Reaper(workspace)
    except OSError as exc:
        raise CommandHarnessError(f"could not create the workspace: {exc}") from exc
    try:
        sized = limits is not None and mount_tmpfs(workspace, limits.workspace, ids)
        yield TemporaryWorkspace(workspace, reaper, sized)
    finally:
        remove_tree(workspace)
        reaper.done()


# --------------------------------------------------------------------------- output


class Capture(threading.Thread):
    """Copies one pipe into a file: the first bytes up to the cap, a marker line, the last bytes."""

    def __init__(self, fd: int, path: Path, name: str, cap: int = STREAM_CAP, tail: int = FINAL_MESSAGE_BYTES):
        super().__init__(name=f"imagebench-capture-{name}", daemon=True)
        self.fd, self.name_, self.cap, self.tail_size = fd, name, cap, tail
        self.out = open(path, "wb")  # noqa: SIM115 (closed by run())
        self.total = 0
        self.final = bytearray()  # the last `tail` bytes of the stream
        self._overflow = bytearray()  # past the head: the last `tail` bytes of what did not fit
        self._halt = threading.Event()

    def run(self) -> None:
        head_left = self.cap - self.tail_size
        try:
            while True:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if not ready:
                    if self._halt.is_set():
                        break
                    continue
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    break
                self.total += len(chunk)
                self.final += chunk
                del self.final[: max(0, len(self.final) - self.tail_size)]
                if head_left > 0:
                    taken = min(len(chunk), head_left)
                    self.out.write(chunk[:taken])
                    head_left -= taken
                    chunk = chunk[taken:]
                if chunk:
                    self._overflow += chunk
                    del self._overflow[: max(0, len(self._overflow) - self.tail_size)]
            kept_head = min(self.total, self.cap - self.tail_size)
            dropped = self.total - kept_head - len(self._overflow)
            if dropped > 0:
                self.out.write(
                    f"\n[imagebench: {dropped} bytes of {self.name_} dropped here: kept the first {kept_head} and "
                    f"the last {len(self._overflow)} of {self.total} bytes]\n".encode()
                )
            self.out.write(self._overflow)
        finally:
            self.out.close()
            os.close(self.fd)

    def finish(self, timeout: float = 5.0) -> None:
        """Wait for the end of the stream; stop reading if something escaped holds it open."""
        self.join(timeout)
        if self.is_alive():
            self._halt.set()
            self.join()


# --------------------------------------------------------------------------- the process tree


class Running:
    """A started command and how to end its whole process tree."""

    def __init__(self, proc: subprocess.Popen[bytes], tag: str | None) -> None:
        self.proc, self.tag = proc, tag

    def _members(self) -> list[int]:
        import psutil

        pids: set[int] = set()
        if self.proc.poll() is None:
            try:
                pids |= {c.pid for c in psutil.Process(self.proc.pid).children(recursive=True)}
            except psutil.Error:
                pass
        if self.tag is not None:
            for p in psutil.process_iter():
                try:
                    if p.environ().get(_TAG_ENV) == self.tag:
                        pids.add(p.pid)
                except (psutil.Error, OSError):
                    continue
        pids.discard(os.getpid())
        return sorted(pids)

    def _signal(self, sig: int, pids: Iterable[int]) -> None:
        for target in (-self.proc.pid, *pids):  # its process group, then each member
            try:
                os.kill(target, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def end(self, graceful: bool = False) -> None:
        """SIGTERM, a grace period, then SIGKILL (``graceful``); else SIGKILL at once, until none is left."""
        if graceful:
            self._signal(signal.SIGTERM, self._members())
            try:
                self.proc.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        for _ in range(5):  # a member may fork while we kill
            members = self._members()
            self._signal(signal.SIGKILL, members)
            if not members:
                break


def run(
    command: str,
    workspace: Path,
    *,
    sample_dir: Path,
    timeout_s: float,
    env: dict[str, str],
    policy: SandboxPolicy,
    tensor_url: str | None = None,
    hidden: Iterable[Path] = (),
    running: list[Running] | None = None,
    reaper: Reaper | None = None,
    limits: Limits | None = None,
    ids: SubjectIds | None = None,
    sized: bool = False,
    binds: Iterable[tuple[Path, str]] = (),
    home: str | None = None,
) -> Finished:
    """Run ``command`` with bash in ``workspace`` under ``policy``; stdout/stderr to ``sample_dir``.

    In the sandbox the command runs under ``limits`` (default :class:`Limits()`) as ``ids`` (the
    subject's own uid, when this process is root); ``sized`` says the workspace is a tmpfs of its
    own. ``binds`` are harness folders shown read-only at the given path (the MCP folder). ``home``
    is the sandboxed command's ``HOME`` (default /tmp; unsandboxed, ``env`` says it)."""
    bash = shutil.which("bash")
    if bash is None:
        raise CommandHarnessError("bash is not on PATH; a command: subject needs it")
    running = running if running is not None else []
    fds: list[int] = []  # ours to close once the child has them
    bridge_fds: tuple[int, int] | None = None
    tag: str | None = None
    target: tuple[str, int] | None = None
    group: Cgroup | None = None
    try:
        if policy.enabled:
            limits = limits or Limits()
            bwrap = sandbox.require()
            child_env = sandbox.sandbox_env(env, policy, home=home)
            args = sandbox.mount_args(policy, workspace, hidden, limits=limits, ids=ids, binds=binds)
            if tensor_url and not policy.network:
                target = sandbox.plane_address(tensor_url)
                child_env[TENSOR_URL_ENV] = f"grpc://127.0.0.1:{target[1]}"
                info_r, info_w = os.pipe()
                block_r, block_w = os.pipe()
                fds += [info_w, block_r]
                bridge_fds = (info_r, block_w)
                args += ["--info-fd", str(info_w), "--block-fd", str(block_r)]
            try:
                filter_fd = seccomp.program_fd()  # no user namespaces inside (imagebench.sandbox.seccomp)
            except ValueError:
                filter_fd = None  # a machine the filter does not know: the cgroup still holds memory
            if filter_fd is not None:
                fds.append(filter_fd)
                args += ["--seccomp", str(filter_fd)]
            args_fd = sandbox.args_file(args)
            fds.append(args_fd)
            group = Cgroup.make(cgroup_name(), limits)
            inner = wrapper_argv(limits, ids, rlimit_memory=group is None)
            argv, cwd = [bwrap, "--args", str(args_fd), "--", *inner, *program_argv(policy, bash, command)], "/"
            if group is not None:  # bwrap and all it starts are in the leaf before anything runs
                argv = [*_JOIN_CGROUP, str(len(group.procs_files())), *group.procs_files(), *argv]
        else:
            tag = secrets.token_hex(8)
            child_env, argv, cwd = {**env, _TAG_ENV: tag}, [bash, "-c", command], str(workspace)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        if policy.enabled and ids is not None:  # /dev/stdout and /dev/stderr reopen the pipes: the subject's own
            for fd in (out_w, err_w):
                os.fchown(fd, ids.uid, ids.gid)
        inherited = tuple(fds)  # bwrap's own descriptors; stdout/stderr go as 1 and 2
        fds += [out_w, err_w]
        captures = [Capture(out_r, sample_dir / "stdout.txt", "stdout"), Capture(err_r, sample_dir / "stderr.txt", "stderr")]
    except (OSError, ValueError, sandbox.SandboxUnavailable) as exc:
        for fd in fds:
            os.close(fd)
        if group is not None:
            group.remove()
        raise CommandHarnessError(f"could not start the command: {exc}") from exc
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
            pass_fds=inherited, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        for fd in bridge_fds or ():
            os.close(fd)
        if group is not None:
            group.remove()
        raise CommandHarnessError(f"could not start {argv[0]}: {exc}") from exc
    finally:
        for fd in fds:
            os.close(fd)
        for cap in captures:
            cap.start()
    if reaper is not None:
        reaper.tell("pgid", proc.pid)
        if tag is not None:
            reaper.tell("tag", tag)
    job = Running(proc, tag)
    running.append(job)
    bridge: sandbox.PlaneBridge | None = None
    watch = _Watcher(job, group, workspace, limits, sized) if policy.enabled and limits is not None else None
    timed_out = False
    try:
        if bridge_fds is not None and target is not None:
            bridge = _open_bridge(*bridge_fds, target, job, cap=limits.workspace if limits is not None else None)
        if watch is not None:
            watch.bridge = bridge
            watch.start()
        try:
            returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            job.end(graceful=True)
            returncode = proc.wait()
    except BaseException:
        job.end(graceful=True)
        proc.wait()
        raise
    finally:
        running.remove(job)
        job.end()  # whatever it left running in the background
        if watch is not None:
            watch.stop()
        if bridge is not None:
            bridge.close()
        for cap in captures:
            cap.finish()
    limit = None
    if watch is not None:
        limit = watch.hit or (group.hit() if group is not None else None) or _signal_limit(returncode)
        if limit is None and bridge is not None and bridge.exceeded:
            limit = "plane"
        if limit is None and watch.full():
            limit = "workspace"
    if group is not None:
        group.remove()
    if limit is not None:
        timed_out = False  # ended for a limit, not for the time
    out = captures[0]
    return Finished(returncode, timed_out, bytes(out.final), out.total - len(out.final), limit)


# ``sh -c`` writes its own pid into each cgroup.procs file named, then becomes bwrap: nothing of
# the subject's can start outside its leaf.
_JOIN_CGROUP = [
    "/bin/sh", "-c",
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"',
    "imagebench-cgroup",
]  # fmt: skip
_SIGXCPU, _SIGXFSZ = 24, 25


def _signal_limit(returncode: int) -> str | None:
    """The rlimit a command was killed for (SIGXCPU: CPU time, SIGXFSZ: a file past its size)."""
    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    return {_SIGXCPU: "cpu", _SIGXFSZ: "file-size"}.get(sig)


class _Watcher(threading.Thread):
    """Ends a sandboxed command the moment it runs into a limit the kernel only reports: its
    cgroup's memory or process count, its /tmp or its workspace full (a tmpfs of their size)
    or, where the workspace is a plain folder, grown past its cap."""

    PERIOD_S = 0.2

    def __init__(self, job: Running, group: Cgroup | None, workspace: Path, limits: Limits, sized: bool) -> None:
        super().__init__(name="imagebench-limits", daemon=True)
        self.job, self.group, self.workspace, self.limits, self.sized = job, group, workspace, limits, sized
        self.hit: str | None = None
        self.bridge: sandbox.PlaneBridge | None = None  # the tensor plane's, when the case has one
        self._halt = threading.Event()
        self._walked = 0.0

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(2.0)

    def full(self) -> bool:
        """Whether the workspace is at its cap now."""
        if self.sized:
            try:
                st = os.statvfs(self.workspace)
            except OSError:
                return False
            return st.f_bavail == 0 or st.f_favail == 0
        return _usage(self.workspace) > self.limits.workspace

    def _tmp_full(self) -> bool:
        import psutil

        try:
            init = psutil.Process(self.job.proc.pid).children()
        except psutil.Error:
            return False
        for child in init:  # bwrap's process in the sandbox; its root is the sandbox's
            try:
                st = os.statvfs(f"/proc/{child.pid}/root/tmp")
            except OSError:
                continue
            return st.f_bavail == 0
        return False

    def run(self) -> None:
        import time

        while not self._halt.wait(self.PERIOD_S):
            hit = self.group.hit() if self.group is not None else None
            if hit is None and self.bridge is not None and self.bridge.exceeded:
                hit = "plane"
            if hit is None and self._tmp_full():
                hit = "tmp"
            if hit is None and (self.sized or time.monotonic() - self._walked > 1.0):
                self._walked = time.monotonic()
                if self.full():
                    hit = "workspace"
            if hit is not None:
                self.hit = hit
                self.job.end()
                return


def _usage(root: Path, max_entries: int = 200_000) -> int:
    """Bytes a plain-folder workspace takes on disk (links not followed, sparse files as stored)."""
    total, seen = 0, 0
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            seen += 1
            if seen > max_entries:
                return total
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _open_bridge(
    info_r: int, block_w: int, target: tuple[str, int], job: Running, cap: int | None = None
) -> sandbox.PlaneBridge | None:
    """Bridge the plane into the sandbox bwrap is setting up, then let the command start."""
    try:
        info = sandbox.read_info(info_r)
        if not info.get("child-pid"):
            return None  # bwrap ended before its sandbox was up; its stderr says why
        try:
            bridge = sandbox.PlaneBridge(int(info["child-pid"]), target, cap=cap)
        except OSError as exc:
            job.end()  # before its block-fd closes: the command must not start without its plane
            raise CommandHarnessError(
                f"could not bridge the tensor plane into the sandbox ({exc}); run with --subject-network "
                "to give the command the host's network instead"
            ) from exc
        os.write(block_w, b"go")
        return bridge
    finally:
        os.close(info_r)
        os.close(block_w)
