"""The command: sandbox against dishonest subjects: each command here tries to reach what a
subject must never see (the harness's environment, its interpreter and packages, the packaged
masks, the run folder, the checkout) or to outlive its turn, and must fail."""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from helpers import make_toy_case

import imagebench
from imagebench.case.session import open_session
from imagebench.sandbox.policy import SandboxPolicy
from imagebench.subjects import (
    CommandSubject,
    SubjectError,
    UnitContext,
    bind_subject,
    parse_subject,
    run_subject,
)

PY = shlex.quote(sys.executable)
SRC = Path(imagebench.__file__).resolve().parents[1]
CHECKOUT = SRC.parent
TESTS = Path(__file__).resolve().parent
MASK = SRC / "imagebench" / "data" / "fixtures" / "segment-nuclei" / "dsb2018" / "mask2d.tif"
BOTH = pytest.mark.parametrize("policy", [SandboxPolicy(), SandboxPolicy(enabled=False)], ids=["bubblewrap", "none"])


def _run(command: str, tmp_path: Path, *, timeout: float = 20.0, policy: SandboxPolicy | None = None, **kw: object):
    case = make_toy_case()
    session = open_session(case, case.build())
    ctx = UnitContext(sample_dir=tmp_path / "run" / "sample-0", timeout_s=timeout, **kw)  # type: ignore[arg-type]
    subject = CommandSubject(command) if policy is None else CommandSubject(command, sandbox=policy)
    run = run_subject(bind_subject(subject, case, ctx), session, timeout)
    out = (ctx.sample_dir / "stdout.txt").read_bytes()
    return session, run, ctx, out


def _sleepers(seconds: int) -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["cmdline"] == ["sleep", str(seconds)] and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p.pid)
    return found


def _wait_until(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


def _mark(base: int) -> int:
    return base + os.getpid() % 10_000


# --------------------------------------------------------------------------- what it can read

DRIVER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from helpers import make_toy_case
    from imagebench.case.session import open_session
    from imagebench.subjects import CommandSubject, UnitContext, bind_subject, run_subject

    command, sample_dir, sandboxed = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"
    if sandboxed:
        subject = CommandSubject(command)
    else:
        from imagebench.sandbox.policy import SandboxPolicy
        subject = CommandSubject(command, sandbox=SandboxPolicy(enabled=False))
    case = make_toy_case()
    session = open_session(case, case.build())
    run_subject(bind_subject(subject, case, UnitContext(sample_dir, 30.0)), session, 30.0)
    print("done", flush=True)
    """
)


def _driver(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[Path, dict[str, str]]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    full = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{TESTS}", **(env or {})}
    return script, full


def test_parent_environment_is_out_of_reach(tmp_path: Path) -> None:
    """/proc/$PPID/environ (and every other process's) shows no withheld variable."""
    secret = str(tmp_path / "fixture-tree-secret")
    script, env = _driver(tmp_path, {"IMAGEBENCH_FIXTURES": secret})
    command = "cat /proc/$PPID/environ /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep IMAGEBENCH_FIXTURES"
    sample = tmp_path / "sample-0"
    done = subprocess.run(
        [sys.executable, str(script), command, str(sample), "1"], env=env, timeout=60, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert secret not in (sample / "stdout.txt").read_text()


def test_parent_interpreter_cannot_import_the_harness(tmp_path: Path) -> None:
    """Running /proc/$PPID/cmdline's program, or python itself, does not reach imagebench."""
    probe = "import imagebench, napari_imagebench, os; print('LE' + 'AK', os.path.dirname(imagebench.__file__))"
    command = (
        f"exe=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | head -n 1); \"$exe\" -c {shlex.quote(probe)}; "
        f"{PY} -c {shlex.quote(probe)}; python -c {shlex.quote(probe)}; "
        f"PYTHONPATH={shlex.quote(str(SRC))} python -c {shlex.quote(probe)}; cat /proc/1/cmdline"
    )
    _, run, _, out = _run(command, tmp_path)
    assert run.error is None and not run.timed_out
    assert b"LEAK" not in out
    assert b"--bind" not in out and b"--ro-bind" not in out  # bwrap read its mounts from a descriptor


def test_tool_environment_has_the_scientific_stack_and_no_harness(tmp_path: Path) -> None:
    code = (
        "import numpy as np, scipy, skimage, tifffile, imageio\n"
        "np.save('outputs/mask.npy', np.load('inputs/image.npy') > 0.5)\n"
        "import importlib.util as u\n"
        "print('found' if u.find_spec('imagebench') or u.find_spec('napari_imagebench') else 'absent')\n"
    )
    session, run, ctx, out = _run(f"python -c {shlex.quote(code)}; grep CapEff /proc/self/status", tmp_path)
    assert run.error is None, (ctx.sample_dir / "stderr.txt").read_text()
    assert session.namespace["mask"].any()
    assert b"absent" in out
    assert b"CapEff:\t0000000000000000" in out  # no capability left (CI runs as root)


def test_packaged_masks_cannot_be_copied(tmp_path: Path) -> None:
    assert MASK.is_file()
    digest = hashlib.sha256(MASK.read_bytes()).hexdigest()
    site = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    command = (
        f"sha256sum {shlex.quote(str(MASK))}; cp {shlex.quote(str(MASK))} outputs/; "
        f"for d in $(python -c {shlex.quote(site)}); do find \"$d\" -name 'mask2d*' -exec sha256sum {{}} +; done"
    )
    session, run, _, out = _run(command, tmp_path)
    assert run.error is None and not run.timed_out
    assert digest.encode() not in out
    assert session.workspace is not None and not (session.workspace / "outputs" / "mask2d.tif").exists()


def test_stdout_cannot_be_followed_into_the_run_folder(tmp_path: Path) -> None:
    """readlink /proc/$$/fd/1 names a pipe, never a file beside the sample's."""
    command = (
        'f=$(readlink /proc/$$/fd/1); case "$f" in /*) d=$(dirname "$(dirname "$f")"); '
        'mkdir -p "$d/sample-9" && echo pwned > "$d/sample-9/evil.txt";; esac; echo "$f"'
    )
    _, run, ctx, out = _run(command, tmp_path)
    assert run.error is None
    assert out.startswith(b"pipe:")
    assert not (ctx.sample_dir.parent / "sample-9").exists()


def test_checkout_is_invisible(tmp_path: Path) -> None:
    command = f"cat {shlex.quote(str(CHECKOUT / 'pyproject.toml'))}; ls {shlex.quote(str(SRC))} {shlex.quote(str(TESTS))}"
    _, run, _, out = _run(command, tmp_path)
    assert run.error is None
    assert b"napari-imagebench" not in out and b"napari_imagebench" not in out and b"conftest" not in out


def test_exposed_code_is_seen_and_hidden_folders_inside_it_are_not(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "secret").mkdir(parents=True)
    (agent / "tool.sh").write_text("echo tool-ran\n")
    (agent / "secret" / "key.txt").write_text("the-answer-key\n")
    command = f"sh {shlex.quote(str(agent / 'tool.sh'))}; cat {shlex.quote(str(agent / 'secret' / 'key.txt'))}"
    _, run, _, out = _run(command, tmp_path, policy=SandboxPolicy(expose=(agent,)), hidden=(agent / "secret",))
    assert run.error is None
    assert b"tool-ran" in out  # what it was shown, it sees
    assert b"the-answer-key" not in out  # a hidden folder inside it is masked
    with pytest.raises(SubjectError, match="must not see"):
        parse_subject("command: true", sandbox=SandboxPolicy(expose=(SRC / "imagebench",)))
    with pytest.raises(SubjectError, match="no such environment folder"):
        parse_subject("command: true", sandbox=SandboxPolicy(env_prefix=tmp_path / "no-env"))


# --------------------------------------------------------------------------- what it can leave behind


@BOTH
def test_setsid_child_is_gone_after_return_and_after_timeout(tmp_path: Path, policy: SandboxPolicy) -> None:
    mark = _mark(700_000)
    _, run, _, _ = _run(f"setsid sleep {mark} & sleep 0.2; echo started", tmp_path / "a", policy=policy)
    assert not run.timed_out
    assert _wait_until(lambda: not _sleepers(mark)), "a setsid child outlived the command"
    mark = _mark(710_000)
    _, run, _, _ = _run(f"setsid sleep {mark} & sleep 60", tmp_path / "b", timeout=1.0, policy=policy)
    assert run.timed_out
    assert _wait_until(lambda: not _sleepers(mark)), "a setsid child outlived the timeout"


@BOTH
def test_sigkill_of_the_runner_leaves_no_process_and_no_workspace(tmp_path: Path, policy: SandboxPolicy) -> None:
    outer, inner = _mark(720_000), _mark(730_000)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script, env = _driver(tmp_path, {"TMPDIR": str(tmp)})
    command = f"setsid sleep {inner} & sleep {outer}"
    driver = subprocess.Popen(
        [sys.executable, str(script), command, str(tmp_path / "sample-0"), "1" if policy.enabled else "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert _wait_until(lambda: bool(_sleepers(outer)) and bool(_sleepers(inner)), 30)
        assert [p.name for p in tmp.iterdir() if p.name.startswith("imagebench-ws-")]
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        assert _wait_until(lambda: not _sleepers(outer) and not _sleepers(inner)), "the command outlived its runner"
        assert _wait_until(lambda: not any(p.name.startswith("imagebench-ws-") for p in tmp.iterdir()))
    finally:
        driver.kill()
        for pid in _sleepers(outer) + _sleepers(inner):
            os.kill(pid, signal.SIGKILL)


def test_stale_workspaces_of_dead_runners_are_swept(tmp_path: Path) -> None:
    from imagebench.sandbox.process import sweep_stale_workspaces

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"imagebench-ws-{dead.pid}-abc"
    live = tmp_path / f"imagebench-ws-{os.getppid()}-abc"
    for d in (stale, live):
        (d / "outputs").mkdir(parents=True)
    (stale / "outputs").chmod(0o555)
    assert sweep_stale_workspaces(tmp_path) == [stale]
    assert not stale.exists() and live.exists()


def test_a_flood_of_stdout_is_capped_with_a_marker(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('x' * 50_000_000 + '\\n'); print('the end')"
    _, run, _, out = _run(f"python -c {shlex.quote(code)}", tmp_path)
    assert run.error is None and not run.timed_out
    assert len(out) < 8 * 1024 * 1024 + 200
    marker = next(line for line in out.splitlines() if line.startswith(b"[imagebench:"))
    dropped = 50_000_000 + len("\nthe end\n") - (len(out) - len(marker) - 2)
    assert f"{dropped} bytes of stdout dropped".encode() in marker
    assert out.endswith(b"x\nthe end\n")


# --------------------------------------------------------------------------- network


def _listener(greeting: bytes) -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(greeting)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, srv.getsockname()[1]


def _dial(port: int) -> str:
    code = (
        "import socket\n"
        "try:\n"
        f"    print(socket.create_connection(('127.0.0.1', {port}), timeout=3).recv(100).decode())\n"
        "except OSError as e:\n"
        "    print('unreachable', type(e).__name__)\n"
    )
    return f"python -c {shlex.quote(code)}"


def test_network_is_off_but_the_tensor_plane_is_bridged(tmp_path: Path) -> None:
    plane, plane_port = _listener(b"plane-here")
    other, other_port = _listener(b"scheduler-here")
    try:
        _, _, _, out = _run(_dial(other_port), tmp_path / "off")
        assert b"unreachable" in out
        url = f"grpc://127.0.0.1:{plane_port}"
        _, _, _, out = _run(f"{_dial(plane_port)}; {_dial(other_port)}; echo $IMAGEBENCH_TENSOR_URL", tmp_path / "t", tensor_url=url)
        lines = out.decode().splitlines()
        assert lines[0] == "plane-here"
        assert lines[1].startswith("unreachable")  # only the plane's port crosses
        assert lines[2] == url
        _, _, _, out = _run(_dial(other_port), tmp_path / "on", policy=SandboxPolicy(network=True))
        assert out.decode().strip() == "scheduler-here"
    finally:
        plane.close()
        other.close()


# --------------------------------------------------------------------------- where it cannot start


def test_no_bubblewrap_refuses_command_subjects_unless_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import imagebench.sandbox.policy as sb

    monkeypatch.setattr(sb, "bwrap_path", lambda: None)
    with pytest.raises(SubjectError, match=r"apt-get install bubblewrap.*--no-sandbox"):
        parse_subject("command: true")
    case = make_toy_case()
    with pytest.raises(SubjectError, match="bwrap is not on PATH"):
        bind_subject(CommandSubject("true"), case, UnitContext(tmp_path, 5.0))
    monkeypatch.setattr(sb, "bwrap_path", lambda: "/bin/false")  # present, but fails its test run
    with pytest.raises(SubjectError, match="failed a test run"):
        parse_subject("command: true")
    subject = parse_subject("command: echo 4 > outputs/area.json", sandbox=SandboxPolicy(enabled=False))
    assert isinstance(subject, CommandSubject) and subject.sandbox_kind == "none"
    session, run, _, _ = _run("echo 4 > outputs/area.json", tmp_path, policy=subject.sandbox)
    assert run.error is None and run.harness_error is None
    assert session.namespace["area"] == 4
    assert CommandSubject("true").sandbox_kind == "bubblewrap"


def test_a_real_data_plane_answers_through_the_bridge(tmp_path: Path) -> None:
    """Arrow Flight (gRPC over HTTP/2) works across the bridge, with pyarrow alone (no imagebench)."""
    pytest.importorskip("pyarrow.flight")
    from imagebench.plane import RunPlane

    code = (
        "import os, pyarrow.flight as fl\n"
        "client = fl.connect(os.environ['IMAGEBENCH_TENSOR_URL'])\n"
        "auth = fl.FlightCallOptions(headers=[(b'authorization', b'Bearer ' + os.environ['IMAGEBENCH_TENSOR_TOKEN'].encode())])\n"
        "print('flights', len(list(client.list_flights(options=auth))))\n"
    )
    with RunPlane.start() as plane:
        token = plane.token_for([])  # the plane asks every call for a token (docs/plane.md, Read tokens)
        _, run, ctx, out = _run(f"python -c {shlex.quote(code)}", tmp_path, tensor_url=plane.url, tensor_token=token)
    assert run.error is None and not run.timed_out
    assert out.startswith(b"flights "), (ctx.sample_dir / "stderr.txt").read_text()


def test_the_environment_names_no_harness_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the harness was started from, and its supervisor's report file, stay outside."""
    monkeypatch.setenv("OLDPWD", str(CHECKOUT))
    monkeypatch.setenv("_", str(CHECKOUT / ".venv" / "bin" / "imagebench"))
    monkeypatch.setenv("IMAGEBENCH_SUPERVISED", str(tmp_path / "imagebench-exit-x"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(CHECKOUT) + "-cache")  # where the fixture cache would be
    monkeypatch.setenv("IMAGEBENCH_WHEELS", str(CHECKOUT / "wheels"))
    _, run, _, out = _run("env; tr '\\0' '\\n' < /proc/1/environ", tmp_path)
    assert run.error is None
    lines = out.decode().splitlines()
    withheld = ("OLDPWD=", "IMAGEBENCH_SUPERVISED=", "XDG_CACHE_HOME=", "IMAGEBENCH_WHEELS=")
    assert not [line for line in lines if line.startswith(withheld)], lines
    assert not [line for line in lines if line.startswith("_=") and "imagebench" in line], lines  # bash sets its own
    assert "PWD=/workspace" in lines
    # PATH names the tool environment's own bin folder (bound read-only at its path), nothing else of the host
    assert [line for line in lines if str(CHECKOUT) in line] == [line for line in lines if line.startswith("PATH=")]


def test_a_stopped_command_ends_with_its_whole_process_tree(tmp_path: Path) -> None:
    """The panel's Stop: ``stop`` set while the command sleeps ends it (a setsid child too) at once."""
    mark = _mark(6000)
    case = make_toy_case()
    session = open_session(case, case.build())
    ctx = UnitContext(sample_dir=tmp_path / "sample-0", timeout_s=60)
    work = bind_subject(CommandSubject(f"setsid sleep {mark} & sleep {mark}"), case, ctx)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    run = run_subject(work, session, 60, stop=stop)
    assert run.stopped and not run.timed_out
    assert time.monotonic() - started < 3.0
    assert _wait_until(lambda: not _sleepers(mark))


def test_the_registry_data_fixtures_were_made_from_is_masked(tmp_path: Path) -> None:
    """scikit-image's bundled images and nibabel's test volumes are the originals of perturbed
    curated fixtures (a drift, a warp, a vignetting field, re-placed slices): a sandboxed subject
    sees the packages' code, never those files; the source wheels are kept outside the environment."""
    import sys

    from imagebench.fixtures.registry import package_data_dir, source_paths, wheels_dir
    from imagebench.sandbox.policy import SandboxPolicy, mount_args

    args = mount_args(SandboxPolicy(), tmp_path)
    masked = {args[i + 2] for i in range(len(args) - 2) if args[i : i + 2] == ["--ro-bind", "/dev/null"]}
    masked |= {args[i + 1] for i in range(len(args) - 1) if args[i] == "--tmpfs"}
    originals = [package_data_dir("skimage", "data") / "cell.png", package_data_dir("nibabel", "tests/data") / "anatomical.nii"]
    for path in originals:
        assert os.path.realpath(path) in source_paths()
        assert os.path.realpath(path) in masked, f"{path} is shown to a sandboxed subject"
    assert not any(str(package_data_dir("skimage", "data") / "__init__.py") == m for m in masked)  # code stays
    assert not str(wheels_dir().resolve()).startswith(os.path.realpath(sys.prefix))
