"""What a ``command:`` subject can see and reach: a bubblewrap sandbox around the command.
Long because what is bound, masked and withheld is one policy: split, a mount could be added without the mask that guards it.

A subject is untrusted: it must not read the truth, the harness's own code or the run folder.
Withholding environment variables is not enough (``/proc/$PPID/environ`` gives them back, and
``/proc/$PPID/cmdline`` names an interpreter that imports ``imagebench`` and its packaged
masks). So the command runs under ``bwrap`` in its own mount, PID, IPC and network
namespaces, with every capability dropped (CI runs as root: bwrap keeps root's capabilities
unless told, and with CAP_SYS_ADMIN a subject could unmount what hides the harness).

Inside it sees only: the system read-only (``/usr``, ``/etc`` without its secrets, the
``/bin``/``/lib*`` links), a fresh ``/tmp``, ``/dev`` and a ``/proc`` of its own PID namespace,
a tool environment read-only (the harness's interpreter and site-packages, or ``env_prefix``)
with every ``imagebench`` entry of its site-packages masked, the paths in ``expose`` read-only,
and its workspace read-write at ``/workspace``. The checkout, the fixture tree, the run folder
and other workspaces are never bound; where one lies inside a bound tree it is masked, and so is
every run, sitting or calibration folder and fixture tree found inside an exposed folder
(:mod:`imagebench.sandbox.benchfolders`).

bwrap reads its arguments from a file descriptor (``--args``), so ``/proc/1/cmdline`` in the
sandbox says ``bwrap --args N`` and names no host path. See ``docs/integrity.md``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from imagebench.sandbox.benchfolders import bench_folders
from imagebench.sandbox.limits import Limits, SubjectIds

SandboxKind = Literal["bubblewrap", "none"]

#: where the workspace appears inside the sandbox
WORKSPACE = "/workspace"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
    "tools/setup.sh does it), or run with --no-sandbox to let the command see this whole machine "
    "(recorded as sandbox: none)"
)
_SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Host secrets under /etc a subject has no business reading (root can read them: CI runs as root).
_ETC_SECRETS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh", "/etc/ssl/private",
    "/etc/sudoers", "/etc/sudoers.d", "/etc/security/opasswd",
)
# Variables that describe the harness's Python, not the tool environment's.
_HARNESS_ONLY_ENV = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "TMPDIR",
    "OLDPWD", "_",  # where the harness was started from, and how
    # the user's folders on the host (HOME is /tmp inside): the fixture cache and the source wheels live there
    "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
    "IMAGEBENCH_CACHE", "IMAGEBENCH_WHEELS", "IMAGEBENCH_SHIPPED",
)  # fmt: skip
_PACKAGES = ("imagebench", "napari_imagebench")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot start here (the message says how to fix it)."""


@dataclass(frozen=True)
class SandboxPolicy:
    """How a command subject is confined.

    ``enabled=False`` is ``--no-sandbox`` (the command sees the machine; recorded as ``none``);
    ``network=True`` is ``--subject-network`` (the host's network namespace); ``env_prefix`` is
    ``--subject-env PREFIX`` (that environment instead of the harness's interpreter); ``expose``
    are extra folders bound read-only at their own path (a subject's own code); ``limits`` what
    it may use (:mod:`imagebench.sandbox.limits`, the ``--limit-*`` flags); ``env_pass`` the names of host
    variables it is given beyond the minimal environment (``--subject-env-pass``, an agent's API
    key: the records keep the names, never the values); ``access`` the access setting the run
    declared (``--access``, :mod:`imagebench.sandbox.access`; None: none declared).
    """

    enabled: bool = True
    network: bool = False
    env_prefix: Path | None = None
    expose: tuple[Path, ...] = field(default_factory=tuple)
    limits: Limits = field(default_factory=Limits)
    env_pass: tuple[str, ...] = ()
    access: str | None = None

    @property
    def kind(self) -> SandboxKind:
        return "bubblewrap" if self.enabled else "none"

    def to_record(self) -> dict[str, object]:
        """The policy as JSON (``run.json`` keeps it, so ``--resume`` confines the subject the same way)."""
        return {
            "kind": self.kind,
            "network": self.network,
            "env_prefix": None if self.env_prefix is None else str(self.env_prefix),
            "expose": [str(p) for p in self.expose],
            "limits": self.limits.to_record() if self.enabled else None,
            "env_pass": list(self.env_pass),
            **({"access": self.access} if self.access is not None else {}),
        }

    @classmethod
    def from_record(cls, raw: object) -> SandboxPolicy:
        """The policy :meth:`to_record` wrote; ValueError naming the field that is not as expected.
        A record written before limits and env_pass existed gets the default limits and passes nothing."""
        if not isinstance(raw, dict):
            raise ValueError(f"expected an object with kind, network, env_prefix and expose, got {type(raw).__name__}")
        kind, network, prefix, expose = (raw.get(k) for k in ("kind", "network", "env_prefix", "expose"))
        if kind not in ("bubblewrap", "none"):
            raise ValueError(f"field 'kind' is {kind!r}, expected 'bubblewrap' or 'none'")
        if not isinstance(network, bool):
            raise ValueError(f"field 'network' is {network!r}, expected true or false")
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError(f"field 'env_prefix' is {prefix!r}, expected a path or null")
        if not isinstance(expose, list) or not all(isinstance(p, str) for p in expose):
            raise ValueError(f"field 'expose' is {expose!r}, expected a list of paths")
        try:
            limits = Limits.from_record(raw.get("limits"))
        except ValueError as exc:
            raise ValueError(f"field 'limits': {exc}") from None
        passed = raw.get("env_pass", [])
        if not isinstance(passed, list) or not all(isinstance(n, str) and valid_env_name(n) for n in passed):
            raise ValueError(f"field 'env_pass' is {passed!r}, expected a list of variable names")
        access = raw.get("access")
        if access is not None:
            from imagebench.sandbox.access import AccessError, parse_access

            try:
                access = parse_access(access).name
            except AccessError as exc:
                raise ValueError(f"field 'access': {exc}") from None
        return cls(
            enabled=kind == "bubblewrap",
            network=network,
            env_prefix=None if prefix is None else Path(prefix),
            expose=tuple(Path(p) for p in expose),
            limits=limits,
            env_pass=tuple(passed),
            access=access,
        )


def valid_env_name(name: str) -> bool:
    return bool(name) and (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name)


# --------------------------------------------------------------------------- can it start?


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def _probe(bwrap: str) -> str | None:
    argv = [bwrap, *_CORE, "--unshare-net", "--ro-bind", "/usr", "/usr", *_system_links(), "--proc", "/proc",
            "--dev", "/dev", "--", "/usr/bin/true"]  # fmt: skip
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if done.returncode != 0:
        return f"bwrap failed a test run: {done.stderr.decode('utf-8', 'backslashreplace').strip() or done.returncode}"
    return None


def unavailable_reason() -> str | None:
    """Why no sandbox can start here (with how to fix it), or None when bubblewrap works."""
    bwrap = bwrap_path()
    if bwrap is None:
        return f"a command: subject runs in a bubblewrap sandbox, but bwrap is not on PATH; {INSTALL_HINT}"
    wrappers = ["/usr/bin/prlimit", "/usr/bin/env"] + (["/usr/bin/setpriv"] if os.geteuid() == 0 else [])
    missing = [w for w in wrappers if not os.access(w, os.X_OK)]
    if missing:
        return (
            f"a sandboxed subject's limits and uid are set by {', '.join(missing)}, which this machine lacks; "
            "install util-linux (apt-get install util-linux; tools/setup.sh does it), or run with --no-sandbox"
        )
    why = _probe(bwrap)
    return None if why is None else f"a command: subject runs in a bubblewrap sandbox, but {why}; {INSTALL_HINT}"


def require() -> str:
    """The bwrap executable, or :class:`SandboxUnavailable` saying how to get one."""
    why = unavailable_reason()
    if why is not None:
        raise SandboxUnavailable(why)
    return bwrap_path()  # type: ignore[return-value]


# --------------------------------------------------------------------------- what is bound

_CORE = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
         "--new-session", "--cap-drop", "ALL")  # fmt: skip


def _system_links() -> list[str]:
    """``/bin``, ``/lib``... as the symlinks they are on a merged-/usr system (else bound)."""
    out: list[str] = []
    for top in _SYSTEM[2:]:
        if os.path.islink(top):
            out += ["--symlink", os.readlink(top), top]
    return out


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def tool_trees(policy: SandboxPolicy) -> list[str]:
    """The environment prefixes bound read-only: the harness's, or ``env_prefix`` and its base."""
    if policy.env_prefix is None:
        trees = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    else:
        prefix = Path(policy.env_prefix)
        if not prefix.is_dir():
            raise SandboxUnavailable(f"--subject-env {prefix}: no such environment folder")
        trees = [str(prefix)]
        cfg = prefix / "pyvenv.cfg"  # a venv: its interpreter lives in the base it was made from
        if cfg.is_file():
            for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    trees.append(str(Path(value.strip()).parent))
    return _outermost(_real(t) for t in trees)


def _outermost(paths: Iterable[str]) -> list[str]:
    kept: list[str] = []
    for p in sorted(set(paths), key=len):
        if p != "/" and not any(_inside(p, k) for k in kept):
            kept.append(p)
    return kept


def _site_dirs(trees: list[str]) -> list[str]:
    dirs = {_real(p) for p in sys.path if p and os.path.isdir(p)}
    for tree in trees:
        for pattern in ("lib*/python*/site-packages", "lib*/python*/dist-packages", "lib/python3/dist-packages"):
            dirs |= {_real(p) for p in Path(tree).glob(pattern)}
    return sorted(dirs)


def _venv_sites(trees: list[str]) -> list[str]:
    """The site-packages of a Python environment at, or one folder below, each of ``trees`` (an
    agent's own ``.venv`` in the folder ``--subject-expose`` shows it)."""
    found: set[str] = set()
    for tree in trees:
        for pattern in ("lib*/python*/site-packages", "*/lib*/python*/site-packages"):
            found |= {_real(p) for p in Path(tree).glob(pattern) if p.is_dir()}
    return sorted(found)


def _checkout_of(package_dir: str) -> str | None:
    """The source checkout a package is imported from (an editable install), if any."""
    for parent in Path(package_dir).parents:
        if (parent / "pyproject.toml").is_file() or (parent / ".git").exists():
            return str(parent)
        if parent.name not in ("src", "lib", "python"):
            break
    return None


def harness_paths() -> list[str]:
    """What of the harness a subject must never see: its packages (and their data) and checkout,
    the fixture tree and the outcome folder named in the environment, the fixture cache, and the
    registry data the curated fixtures were authored from (:mod:`imagebench.fixtures.registry`), and the
    user's state folder (:mod:`imagebench.state`: the journal key, the secrets of sealed runs)."""
    found: list[str] = []
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        for loc in (spec.submodule_search_locations or []) if spec is not None else []:
            found.append(_real(loc))
            checkout = _checkout_of(_real(loc))
            if checkout is not None:
                found.append(checkout)
    for var in ("IMAGEBENCH_FIXTURES", "IMAGEBENCH_OUTCOME_DIR"):
        if os.environ.get(var):
            found.append(_real(os.environ[var]))
    from imagebench.fixtures.cache import cache_root
    from imagebench.state import state_root

    found.append(_real(state_root()))  # the journal key and the secrets of runs sealed by default

    cached = cache_root()  # built fixtures, truth included
    if cached is not None:
        found.append(_real(cached))
    from imagebench.fixtures.blobs import shipped_root

    found.append(_real(shipped_root()))  # a worker's shipped fixture files, truth included
    from imagebench.fixtures.registry import source_paths

    found += source_paths()  # the registry data curated fixtures were made from (their truth, their originals)
    return found


def _never_exposed(secret: list[str]) -> list[str]:
    """Where no ``expose`` path may lie: every secret, except that inside a checkout only its
    code, tests and history are off limits (a subject's own solver may live in ``examples/``;
    a bundle's answers there are hidden by the run, see ``UnitContext.hidden``)."""
    out: list[str] = []
    for path in secret:
        if os.path.isfile(os.path.join(path, "pyproject.toml")) or os.path.exists(os.path.join(path, ".git")):
            out += [os.path.join(path, part) for part in ("src", "tests", ".git")]
            out += [p for p in secret if _inside(p, path) and p != path]
        else:
            out.append(path)
    return out


def _exposed(policy: SandboxPolicy, secret: list[str]) -> list[str]:
    exposed: list[str] = []
    for path in policy.expose:
        real = _real(path)
        if not os.path.exists(real):
            raise SandboxUnavailable(f"cannot expose {path} to the subject: no such file or folder")
        clash = next((s for s in _never_exposed(secret) if _inside(real, s)), None)  # one inside it is masked
        if clash is not None:
            where = "it is (or lies inside)" if real == clash else "it lies inside"
            raise SandboxUnavailable(
                f"cannot expose {path} to the subject: {where} {clash}, which it must not see (the harness, a fixture "
                "tree, a run folder, or the code of the case's builder, verifier, reference or baseline)"
            )
        exposed.append(real)
    return _outermost(exposed)


def check_policy(policy: SandboxPolicy) -> None:
    """Raise :class:`SandboxUnavailable` for a policy that cannot be honoured (a missing
    ``env_prefix``, an ``expose`` path inside the harness)."""
    if policy.enabled:
        tool_trees(policy)
        _exposed(policy, harness_paths())


def shown_tree(policy: SandboxPolicy, path: str | os.PathLike[str]) -> str | None:
    """The tree a subject under ``policy`` is shown that holds ``path`` (the system, the tool
    environment, an exposed folder), or None when the sandbox never shows it. A secret the run
    keeps on disk (a sealed run's secret file) must get None."""
    if not policy.enabled:
        return "/ (the subject runs without a sandbox)"
    real = _real(path)
    trees = [t for t in _SYSTEM if os.path.isdir(t) and not os.path.islink(t)]
    trees += tool_trees(policy) + [_real(p) for p in policy.expose]
    return next((t for t in trees if _inside(real, t)), None)


def mount_args(
    policy: SandboxPolicy,
    workspace: Path,
    hidden: Iterable[Path] = (),
    *,
    limits: Limits | None = None,
    ids: SubjectIds | None = None,
    binds: Iterable[tuple[Path, str]] = (),
) -> list[str]:
    """The bwrap options (no command) for ``policy``, with ``workspace`` at :data:`WORKSPACE`.

    ``hidden`` are more paths the subject must not see (the run folder, a bundle): masked where
    they lie inside a bound tree; an ``expose`` path inside one of them is refused. ``/tmp`` is a
    tmpfs of ``limits.tmp`` bytes. With ``ids`` (the harness is root) bwrap keeps only the
    capabilities ``setpriv`` needs to drop to that uid before the command starts
    (:func:`imagebench.sandbox.limits.wrapper_argv`). ``binds`` are harness folders bound read-only at
    the path given (the MCP folder at ``/mcp``).
    """
    limits = limits or Limits()
    args = [*_CORE]
    if ids is not None:
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    if not policy.network:
        args.append("--unshare-net")
    bound: list[str] = []
    for top in _SYSTEM:
        if os.path.islink(top):
            continue
        if os.path.isdir(top):
            args += ["--ro-bind", top, top]
            bound.append(top)
    args += _system_links()
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp), "--perms", "1777", "--tmpfs", "/tmp"]
    trees = [t for t in tool_trees(policy) if not any(_inside(t, b) for b in bound)]
    secret = [*harness_paths(), *(_real(h) for h in hidden)]
    exposed = _exposed(policy, secret)
    secret += [f for tree in exposed for f in bench_folders(tree)]  # runs, calibrations, trees beside this one
    made: set[str] = set()
    for tree in [*trees, *exposed]:
        if not any(_inside(tree, b) for b in bound):
            args += _parents(tree, made)
            args += ["--ro-bind", tree, tree]
            bound.append(tree)
    masks = [s for s in _ETC_SECRETS if os.path.lexists(s)]
    masks += _access_masks(policy)
    masks += [s for s in secret if any(_inside(s, b) for b in bound)]
    for site in _site_dirs(trees):
        if any(_inside(site, b) for b in bound):
            masks += [os.path.join(site, e) for e in os.listdir(site) if "imagebench" in e.lower()]
    from imagebench.fixtures.registry import data_files_in

    # the registry data in every environment shown (a --subject-env, a virtualenv in an exposed
    # folder, the system's own Python packages under /usr), not only the harness's: the same
    # originals a curated fixture was authored from
    for site in _site_dirs([*trees, "/usr", "/usr/local"]) + _venv_sites(exposed):
        masks += [f for f in data_files_in(site) if any(_inside(f, b) for b in bound)]
    for mask in _outermost(masks):
        args += ["--tmpfs", mask, "--remount-ro", mask] if os.path.isdir(mask) else ["--ro-bind", "/dev/null", mask]
    args += ["--bind", str(workspace), WORKSPACE]
    for folder, shown in binds:
        args += ["--ro-bind", str(folder), shown]
    # bwrap has dropped its capabilities by the time it changes folder, and the workspace is the
    # subject uid's (0700): with ids, the wrapper enters it once it runs as that uid.
    args += ["--chdir", "/" if ids is not None else WORKSPACE]
    return args


def _access_masks(policy: SandboxPolicy) -> list[str]:
    """Under an access setting without code (``tools``), every shell the sandbox would show."""
    if policy.access is None:
        return []
    from imagebench.sandbox.access import parse_access, shell_masks

    if parse_access(policy.access).code:
        return []
    prefix = str(policy.env_prefix) if policy.env_prefix is not None else sys.prefix
    return shell_masks([os.path.join(prefix, "bin")])


def _parents(tree: str, made: set[str]) -> list[str]:
    """``--dir`` for each folder above ``tree`` (bwrap would make them 0700: a subject running as
    its own uid could not reach the tree through them)."""
    out: list[str] = []
    for parent in reversed(Path(tree).parents):
        p = str(parent)
        if p != "/" and p not in made:
            made.add(p)
            out += ["--perms", "0755", "--dir", p]
    return out


def sandbox_env(env: dict[str, str], policy: SandboxPolicy, home: str | None = None) -> dict[str, str]:
    """The command's environment inside the sandbox: its tool environment first on PATH; ``HOME``
    is ``home`` (a folder the harness made in the workspace: an agent CLI's private HOME) or /tmp."""
    out = {k: v for k, v in env.items() if k not in _HARNESS_ONLY_ENV}
    prefix = str(policy.env_prefix) if policy.env_prefix is not None else sys.prefix
    out.update(PATH=f"{prefix}/bin:/usr/local/bin:/usr/bin:/bin", HOME=home or "/tmp", TMPDIR="/tmp", PWD=WORKSPACE)
    out["IMAGEBENCH_WORKSPACE"] = WORKSPACE
    return out


def args_file(args: list[str]) -> int:
    """An open file descriptor holding ``args`` NUL-separated, for ``bwrap --args FD``."""
    fh = tempfile.TemporaryFile()
    fh.write(b"".join(a.encode("utf-8") + b"\0" for a in args))
    fh.flush()
    fd = os.dup(fh.fileno())
    fh.close()
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, False)
    return fd


# --------------------------------------------------------------------------- the tensor plane

_CLONE_NEWNET = 0x40000000


def plane_address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if not parts.hostname or not parts.port:
        raise ValueError(f"the data-plane URL {url!r} names no host and port")
    return parts.hostname, parts.port


#: connections a sandbox may hold open to the plane at once (one more is closed as it is accepted)
MAX_BRIDGE_CONNECTIONS = 32


class PlaneBridge:
    """The data plane's port inside a sandbox whose network is unshared.

    A listening socket is opened *in the sandbox's network namespace* (a thread of this process
    enters it with setns; the socket stays there) on ``127.0.0.1:<plane port>``; each connection
    is relayed to the real plane. The subject reaches the plane and nothing else on the host:
    not the dask scheduler, not another run's plane. Entering the namespace needs
    CAP_SYS_ADMIN over it (bwrap run by root; CI is root); elsewhere this raises OSError.

    What the subject sends to the plane (its uploads land on the host's disk) is counted over all
    its connections; past ``cap`` bytes every connection is cut and :attr:`exceeded` is set (the
    sample ends ``resource-limit: plane``).
    """

    def __init__(self, sandbox_pid: int, target: tuple[str, int], cap: int | None = None) -> None:
        self.target = target
        self.cap = cap
        self.sent = 0
        self.exceeded = False
        self._open = 0  # connections relayed now
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = self._listen_in(sandbox_pid, target[1])
        threading.Thread(target=self._accept, name="imagebench-plane-bridge", daemon=True).start()

    @staticmethod
    def _listen_in(pid: int, port: int) -> socket.socket:
        result: dict[str, object] = {}

        def enter() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
            theirs = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                if libc.setns(theirs, _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    result["error"] = OSError(err, f"cannot enter the sandbox's network namespace: {os.strerror(err)}")
                    return
                deadline = time.monotonic() + 5
                while True:  # bwrap brings its loopback up as it starts
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                        sock.bind(("127.0.0.1", port))
                        sock.listen(16)
                        result["sock"] = sock
                        return
                    except OSError as exc:
                        sock.close()
                        if time.monotonic() > deadline:
                            result["error"] = exc
                            return
                        time.sleep(0.01)
            finally:
                if libc.setns(own, _CLONE_NEWNET) != 0:  # never leave a harness thread inside
                    os.abort()
                os.close(own)
                os.close(theirs)

        thread = threading.Thread(target=enter, name="imagebench-plane-netns")
        thread.start()
        thread.join()
        if "sock" not in result:
            raise result.get("error") or OSError("no listener")  # type: ignore[misc]
        return result["sock"]  # type: ignore[return-value]

    def _accept(self) -> None:
        while True:
            try:
                inner, _ = self._listener.accept()
            except OSError:
                if self._listener.fileno() == -1:
                    return
                continue
            with self._lock:
                full = self._open >= MAX_BRIDGE_CONNECTIONS
            if full:  # each connection costs this process two descriptors and two threads
                inner.close()
                continue
            try:
                outer = socket.create_connection(self.target, timeout=10)
                outer.settimeout(None)
            except OSError:
                inner.close()
                continue
            with self._lock:
                self._socks += [inner, outer]
                self._open += 1
            ended = [0]

            def finished(inner: socket.socket = inner, outer: socket.socket = outer, ended: list[int] = ended) -> None:
                """One direction is done; when both are, the connection's descriptors go."""
                with self._lock:
                    ended[0] += 1
                    if ended[0] < 2:
                        return
                    self._open -= 1
                    for sock in (inner, outer):
                        if sock in self._socks:
                            self._socks.remove(sock)
                for sock in (inner, outer):
                    with contextlib.suppress(OSError):
                        sock.close()

            threading.Thread(target=self._upstream, args=(inner, outer, finished), daemon=True).start()
            threading.Thread(target=_pump, args=(outer, inner, finished), daemon=True).start()

    def _upstream(self, src: socket.socket, dst: socket.socket, finished: Callable[[], None]) -> None:
        """The subject's bytes to the plane, counted against the cap."""
        try:
            while data := src.recv(65536):
                with self._lock:
                    self.sent += len(data)
                    over = self.cap is not None and self.sent > self.cap
                if over:
                    self.exceeded = True
                    self.close()
                    return
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            finished()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for s in self._socks:
                s.close()


def _pump(src: socket.socket, dst: socket.socket, finished: Callable[[], None] | None = None) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        if finished is not None:
            finished()


def read_info(fd: int) -> dict[str, int]:
    """bwrap's ``--info-fd`` report (its sandbox's host pid), or {} when bwrap ended first."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
        try:
            return json.loads(data)
        except ValueError:
            continue
    return {}
