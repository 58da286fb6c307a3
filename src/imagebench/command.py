"""Running one ``command:`` subject: its workspace, its process tree, its output and its time limit.

Three promises, whatever the command does:

- nothing it started outlives it. In the sandbox (:mod:`imagebench.sandbox`) the command is in
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

from imagebench import sandbox
from imagebench.sandbox import SandboxPolicy

STREAM_CAP = 8 * 1024 * 1024
FINAL_MESSAGE_BYTES = 64 * 1024
KILL_GRACE_S = 2.0
TENSOR_URL_ENV = "IMAGEBENCH_TENSOR_URL"
_TAG_ENV = "IMAGEBENCH_COMMAND_ID"
_WS_PREFIX = "imagebench-ws-"
_WS_NAME = re.compile(re.escape(_WS_PREFIX) + r"(\d+)-")


class CommandHarnessError(RuntimeError):
    """The harness could not run the command (bash, pipes, sandbox, plane bridge): never the subject's fault."""


@dataclass
class Finished:
    """How a command ended, and the end of its stdout (``final_offset``: where that starts in it)."""

    returncode: int
    timed_out: bool
    final: bytes
    final_offset: int


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
    """Remove ``path`` even where the command took write permission away."""

    def retry(func: object, p: str, _exc: object) -> None:
        try:
            os.chmod(os.path.dirname(p), 0o755)
            os.chmod(p, 0o755)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


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
    root = Path(root or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for path in entries:
        match = _WS_NAME.match(path.name)
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


@contextmanager
def temporary_workspace() -> Iterator[tuple[Path, Reaper]]:
    """A fresh empty workspace folder and its reaper; both gone on exit."""
    sweep_stale_workspaces()
    try:
        workspace = Path(tempfile.mkdtemp(prefix=f"{_WS_PREFIX}{os.getpid()}-"))
        reaper = Reaper(workspace)
    except OSError as exc:
        raise CommandHarnessError(f"could not create the workspace: {exc}") from exc
    try:
        yield workspace, reaper
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
) -> Finished:
    """Run ``command`` with bash in ``workspace`` under ``policy``; stdout/stderr to ``sample_dir``."""
    bash = shutil.which("bash")
    if bash is None:
        raise CommandHarnessError("bash is not on PATH; a command: subject needs it")
    running = running if running is not None else []
    fds: list[int] = []  # ours to close once the child has them
    bridge_fds: tuple[int, int] | None = None
    tag: str | None = None
    target: tuple[str, int] | None = None
    try:
        if policy.enabled:
            bwrap = sandbox.require()
            child_env = sandbox.sandbox_env(env, policy)
            args = sandbox.mount_args(policy, workspace, hidden)
            if tensor_url and not policy.network:
                target = sandbox.plane_address(tensor_url)
                child_env[TENSOR_URL_ENV] = f"grpc://127.0.0.1:{target[1]}"
                info_r, info_w = os.pipe()
                block_r, block_w = os.pipe()
                fds += [info_w, block_r]
                bridge_fds = (info_r, block_w)
                args += ["--info-fd", str(info_w), "--block-fd", str(block_r)]
            args_fd = sandbox.args_file(args)
            fds.append(args_fd)
            argv, cwd = [bwrap, "--args", str(args_fd), "--", bash, "-c", command], "/"
        else:
            tag = secrets.token_hex(8)
            child_env, argv, cwd = {**env, _TAG_ENV: tag}, [bash, "-c", command], str(workspace)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        inherited = tuple(fds)  # bwrap's own descriptors; stdout/stderr go as 1 and 2
        fds += [out_w, err_w]
        captures = [Capture(out_r, sample_dir / "stdout.txt", "stdout"), Capture(err_r, sample_dir / "stderr.txt", "stderr")]
    except (OSError, ValueError, sandbox.SandboxUnavailable) as exc:
        for fd in fds:
            os.close(fd)
        raise CommandHarnessError(f"could not start the command: {exc}") from exc
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
            pass_fds=inherited, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        for fd in bridge_fds or ():
            os.close(fd)
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
    timed_out = False
    try:
        if bridge_fds is not None and target is not None:
            bridge = _open_bridge(*bridge_fds, target, job)
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
        if bridge is not None:
            bridge.close()
        for cap in captures:
            cap.finish()
    out = captures[0]
    return Finished(returncode, timed_out, bytes(out.final), out.total - len(out.final))


def _open_bridge(info_r: int, block_w: int, target: tuple[str, int], job: Running) -> sandbox.PlaneBridge | None:
    """Bridge the plane into the sandbox bwrap is setting up, then let the command start."""
    try:
        info = sandbox.read_info(info_r)
        if not info.get("child-pid"):
            return None  # bwrap ended before its sandbox was up; its stderr says why
        try:
            bridge = sandbox.PlaneBridge(int(info["child-pid"]), target)
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
