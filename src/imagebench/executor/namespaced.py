"""A local dask cluster whose workers share nothing with the driver's files: each worker runs in a
filesystem namespace of its own (bubblewrap), the way a worker on another machine would see them.

Each worker sees the system (``/usr``, ``/etc`` and the links beside them), the Python the driver
runs on (its base prefix, at its own path), the driver's virtual environment at
``/opt/imagebench-worker/venv``, a copy of the ``imagebench`` package the driver imported at
``/opt/imagebench-worker/code`` (without its packaged fixture tree: curated files travel by
digest), an empty ``/tmp`` and its own cache folder at ``/opt/imagebench-worker/cache``. Nothing
else: not ``/work``, ``/root``, ``/home``, nor the driver's ``/tmp``, so not the driver's checkout,
fixture trees, fixture cache, state folder or outcome folder.

An editable install puts the driver's checkout on ``sys.path`` (a ``.pth`` line) or behind a
finder; in the worker that path does not exist, and ``PYTHONPATH`` names the copy, which comes
first on ``sys.path``, so ``imagebench`` is imported from the copy (:func:`worker_imports` says
where each worker found it).

The scheduler runs in this process (a ``LocalCluster`` with no workers of its own, on loopback);
the workers share the host's network to reach it. Used by the share-nothing test and
``benchmarks/bench_remote.py``; needs ``bwrap``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagebench.executor.cluster import THREAD_ENV

INSIDE = "/opt/imagebench-worker"
_SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def bwrap() -> str | None:
    return shutil.which("bwrap")


def copy_code(dest: Path) -> Path:
    """A copy of the imported ``imagebench`` package under ``dest`` (no caches, no packaged fixture tree)."""
    import imagebench

    source = Path(imagebench.__file__).resolve().parent
    target = dest / "imagebench"
    if target.exists():
        shutil.rmtree(target)

    def ignore(folder: str, names: list[str]) -> list[str]:
        skip = [n for n in names if n == "__pycache__"]
        if Path(folder).resolve() == source / "data":
            skip.append("fixtures")
        return skip

    shutil.copytree(source, target, ignore=ignore)
    return dest


def worker_argv(address: str, name: str, code: Path, cache: Path) -> list[str]:
    """The bwrap command line of one worker of ``address``."""
    exe = bwrap()
    if exe is None:
        raise RuntimeError("bwrap is not installed: a namespaced worker cannot start")
    args = [exe, "--die-with-parent", "--unshare-pid", "--unshare-ipc"]
    for top in _SYSTEM:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/sys", "/sys"]
    base = os.path.realpath(sys.base_prefix)
    args += ["--ro-bind", base, base]
    if os.path.realpath(sys.prefix) != base:  # a virtual environment, shown at a path of its own
        args += ["--ro-bind", os.path.realpath(sys.prefix), f"{INSIDE}/venv"]
        python = f"{INSIDE}/venv/bin/python"
    else:
        python = os.path.join(base, "bin", "python3")
    args += ["--ro-bind", str(code), f"{INSIDE}/code", "--bind", str(cache), f"{INSIDE}/cache", "--chdir", "/tmp"]
    return [
        *args,
        python,
        "-m",
        "distributed.cli.dask_worker",
        address,
        "--nthreads",
        "1",
        "--no-nanny",
        "--no-dashboard",
        "--name",
        name,
        "--local-directory",
        "/tmp/dask",
    ]


def worker_env() -> dict[str, str]:
    return {
        "PATH": f"{INSIDE}/venv/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp/home",
        "PYTHONPATH": f"{INSIDE}/code",
        "PYTHONDONTWRITEBYTECODE": "1",
        "IMAGEBENCH_CACHE": f"{INSIDE}/cache/fixtures",
        "IMAGEBENCH_SHIPPED": f"{INSIDE}/cache/shipped",
        "LANG": "C.UTF-8",
        **THREAD_ENV,
    }


@dataclass
class NamespacedCluster:
    """A scheduler here and workers in namespaces of their own; ``address`` is what ``--scheduler`` takes."""

    address: str
    root: Path
    scheduler: Any
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    caches: list[Path] = field(default_factory=list)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(Exception):
            self.scheduler.close()

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(self.root.glob("worker-*.log"))
        )


def start(n_workers: int, root: Path, *, timeout: float = 90.0, fresh_caches: bool = False) -> NamespacedCluster:
    """Start a scheduler here and ``n_workers`` namespaced workers; ``root`` keeps the code copy, each
    worker's cache (``root/cache-<i>``, kept between starts unless ``fresh_caches``) and its log."""
    from distributed import Client, LocalCluster

    root.mkdir(parents=True, exist_ok=True)
    code = copy_code(root / "code")
    scheduler = LocalCluster(
        n_workers=0,
        host="127.0.0.1",
        dashboard_address=None,
        scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
        silence_logs=logging.CRITICAL,
    )
    cluster = NamespacedCluster(scheduler.scheduler_address, root, scheduler)
    try:
        for i in range(n_workers):
            cache = root / f"cache-{i}"
            if fresh_caches and cache.exists():
                shutil.rmtree(cache)
            cache.mkdir(exist_ok=True)
            cluster.caches.append(cache)
            log = open(root / f"worker-{i}.log", "wb")  # noqa: SIM115 - the worker writes it while it lives
            cluster.procs.append(
                subprocess.Popen(
                    worker_argv(cluster.address, f"ns-{i}", code, cache),
                    env=worker_env(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            log.close()
        with Client(cluster.address, set_as_default=False) as client:
            deadline = time.monotonic() + timeout
            while len(client.scheduler_info().get("workers", {})) < n_workers:
                dead = [p for p in cluster.procs if p.poll() is not None]
                if dead or time.monotonic() > deadline:
                    raise RuntimeError(f"namespaced workers did not start ({len(dead)} exited)\n{cluster.logs()}")
                time.sleep(0.1)
    except BaseException:
        cluster.close()
        raise
    return cluster


@contextlib.contextmanager
def namespaced_cluster(n_workers: int, root: Path, **kw: Any) -> Iterator[NamespacedCluster]:
    cluster = start(n_workers, root, **kw)
    try:
        yield cluster
    finally:
        cluster.close()


def worker_imports(client: Any) -> dict[str, str]:
    """``{worker: where it imported imagebench from}``."""
    return dict(client.run(_imagebench_file))


def worker_sees(client: Any, paths: Sequence[str | os.PathLike[str]]) -> dict[str, list[str]]:
    """``{worker: the paths of ``paths`` that exist in its namespace}``."""
    return dict(client.run(_existing, [os.fspath(p) for p in paths]))


def _imagebench_file() -> str:
    import imagebench

    return str(imagebench.__file__)


def _existing(paths: list[str]) -> list[str]:
    return [p for p in paths if os.path.lexists(p)]
