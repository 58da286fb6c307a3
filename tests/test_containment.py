"""Containment: the harness trusts nothing a subject touched, and a subject cannot exhaust the machine.

One dishonest subject per route (issue 23). Each ends with a named non-ok status or a refusal;
no host file outside the run folder changes; no process, workspace or cgroup is left. The
routes to the truth through the sandbox's walls are in tests/test_dishonest.py; here the
subject works *inside* its walls and tries to make the harness act for it: read through a
link it planted, block on a FIFO, allocate a declared shape, write through its links, run its
code in the harness, or take the machine's memory, processes and disk.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import socket
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import imagebench
from imagebench import cases as builtin
from imagebench.executor import run_cases
from imagebench.records import RunRecord, read_record
from imagebench.runs.verdict import RunResult
from imagebench.sandbox.limits import Limits, MiB
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.sandbox.workspace import Refused, Workspace
from imagebench.subjects import CommandSubject, parse_subject

SANDBOX = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the harness drops the subject to a uid of its own only as root")
PY = shlex.quote(sys.executable)
SRC = Path(imagebench.__file__).resolve().parent
PACKAGED = SRC / "data" / "fixtures"
VOLUMES = "calibrated-measurements/stardist-3d-volumes"
VOLUMES_TRUTH = PACKAGED / "calibrated-measurements" / "stardist-3d-volumes" / "volumes_um3.npy"


def _run(tmp_path: Path, label: str, command: str, *, sandboxed: bool = True, **policy: object) -> RunResult:
    subject = CommandSubject(command, sandbox=SandboxPolicy(enabled=sandboxed, **policy))  # type: ignore[arg-type]
    return run_cases([builtin.get_case(label)], subject, out=tmp_path / "out", progress=False)


def _one(result: RunResult, label: str):
    (summary,) = result.samples[label]
    return summary


def _nothing_left() -> None:
    ours = list(Path(tempfile.gettempdir()).glob(f"imagebench-ws-{os.getpid()}-*"))
    assert ours == [], f"workspaces left behind: {ours}"
    for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")):
        left = [p for p in root.rglob(f"imagebench-{os.getpid()}-*")] if root.is_dir() else []
        assert left == [], f"cgroups left behind: {left}"


# --------------------------------------------------------------------------- leavings the harness reads


LINK_ROUTES = {
    "file": f"ln -s {VOLUMES_TRUTH} outputs/volumes.npy",
    "folder": f"rm -rf outputs && ln -s {VOLUMES_TRUTH.parent} outputs && ln -s volumes_um3.npy outputs/volumes.npy 2>/dev/null; true",
    "chain": f"ln -s {VOLUMES_TRUTH} /tmp/c && ln -s /tmp/c /tmp/b && ln -s /tmp/b outputs/volumes.npy",
    "proc-self": f"ln -s /proc/self/root{VOLUMES_TRUTH} outputs/volumes.npy",
}


@SANDBOX
@pytest.mark.parametrize("route", sorted(LINK_ROUTES))
def test_a_symlinked_leaving_is_refused_never_followed(tmp_path: Path, route: str) -> None:
    """The subject cannot read the truth but can name it (the package layout is public): a link
    to it, or a folder link, a chain of links or a link through /proc/self, is refused by name."""
    result = _run(tmp_path, VOLUMES, LINK_ROUTES[route])
    summary = _one(result, VOLUMES)
    assert summary.status == "unscorable-result", summary.reason
    assert "symbolic link" in summary.reason, summary.reason
    _nothing_left()


@SANDBOX
def test_the_linked_truth_is_real_truth(tmp_path: Path) -> None:
    """Control: the same bytes, copied by a subject that can see them (--no-sandbox), score ok."""
    result = _run(tmp_path, VOLUMES, f"cp {VOLUMES_TRUTH} outputs/volumes.npy", sandboxed=False)
    assert _one(result, VOLUMES).status == "ok"


@SANDBOX
def test_a_fifo_leaving_does_not_block_the_harness(tmp_path: Path) -> None:
    start = time.perf_counter()
    result = _run(tmp_path, VOLUMES, "mkfifo outputs/volumes.npy")
    summary = _one(result, VOLUMES)
    assert summary.status == "unscorable-result" and "FIFO" in summary.reason, summary.reason
    assert time.perf_counter() - start < 60


def test_a_device_node_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    (tmp_path / "outputs").mkdir()
    os.mknod(tmp_path / "outputs" / "volumes.npy", 0o644 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's
    with Workspace(tmp_path) as ws, pytest.raises(Refused, match="character device"):
        ws.read_array("outputs/volumes.npy", cap=1 << 20)


@SANDBOX
def test_a_sparse_many_gib_leaving_is_refused_by_its_size_unread(tmp_path: Path) -> None:
    """1.5 GiB of nothing (no disk used): refused on its size before a byte is read."""
    result = _run(tmp_path, "segment-nuclei/count-nuclei", "truncate -s 1536M outputs/answer.json")
    summary = _one(result, "segment-nuclei/count-nuclei")
    assert summary.status == "unscorable-result", summary.reason
    assert "more than the limit" in summary.reason, summary.reason


@SANDBOX
def test_an_npy_header_declaring_a_huge_shape_is_refused_before_allocation(tmp_path: Path) -> None:
    code = (
        "import numpy as np\n"
        "from numpy.lib import format as f\n"
        "with open('outputs/volumes.npy', 'wb') as fh:\n"
        "    f.write_array_header_1_0(fh, {'descr': '<f8', 'fortran_order': False, 'shape': (40000, 40000, 40000)})\n"
        "    fh.write(b'0' * 16)\n"
    )
    result = _run(tmp_path, VOLUMES, f"{PY} -c {shlex.quote(code)}")
    summary = _one(result, VOLUMES)
    assert summary.status == "unscorable-result", summary.reason
    assert "declares shape (40000, 40000, 40000)" in summary.reason, summary.reason


def test_a_leaving_swapped_for_a_link_after_it_was_listed_is_not_followed(tmp_path: Path) -> None:
    """No check-then-open: the bytes come from the descriptor that was checked."""
    secret = tmp_path / "secret.npy"
    np.save(secret, np.arange(5.0))
    ws_dir = tmp_path / "ws"
    (ws_dir / "outputs").mkdir(parents=True)
    np.save(ws_dir / "outputs" / "x.npy", np.zeros(5))
    with Workspace(ws_dir) as ws:
        assert ws.kind("outputs/x.npy") == "file"
        (ws_dir / "outputs" / "x.npy").unlink()
        (ws_dir / "outputs" / "x.npy").symlink_to(secret)
        with pytest.raises(Refused, match="symbolic link"):
            ws.read_array("outputs/x.npy", cap=1 << 20)


def test_the_walk_fallback_refuses_links_as_openat2_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import imagebench.sandbox.workspace as wsmod

    (tmp_path / "real").mkdir()
    np.save(tmp_path / "real" / "x.npy", np.ones(3))
    (tmp_path / "outputs").symlink_to(tmp_path / "real")
    monkeypatch.setattr(wsmod, "_HAVE_OPENAT2", False)
    with Workspace(tmp_path) as ws:
        with pytest.raises(Refused, match="lies in outputs, which is a symbolic link"):
            ws.read_array("outputs/x.npy", cap=1 << 20)
        assert ws.read_array("real/x.npy", cap=1 << 20).tolist() == [1.0, 1.0, 1.0]


@SANDBOX
def test_a_kept_workspace_copies_no_link(tmp_path: Path) -> None:
    """keep_workspace copies regular files only: a link to a host file is named, never followed."""
    host = tmp_path / "host.txt"
    host.write_text("host file\n")
    subject = CommandSubject(f"ln -s {host} outputs/l; mkfifo outputs/p; echo 3 > outputs/n.txt", keep_workspace=True)
    result = run_cases([builtin.get_case(VOLUMES)], subject, out=tmp_path / "out", progress=False)
    summary = _one(result, VOLUMES)
    kept = result.run_dir / summary.subject / summary.label / "sample-0" / "workspace" / "outputs"
    assert sorted(p.name for p in kept.iterdir()) == ["n.txt"]
    assert not any(p.is_symlink() for p in kept.parent.rglob("*"))
    assert host.read_text() == "host file\n"


# --------------------------------------------------------------------------- no subject code in the harness


def test_isolate_never_imports_the_subject_in_the_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module whose top level wraps open_session to stash truth runs only in the sandbox."""
    pkg = tmp_path / "code" / "stasher"
    pkg.mkdir(parents=True)
    marker = tmp_path / "ran-in-the-harness"
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('top level ran')\n")
    (pkg / "solve.py").write_text("def solve(session):\n    session.namespace['volumes'] = [0.0]\n")
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    if unavailable_reason() is not None:
        pytest.skip(str(unavailable_reason()))
    subject = parse_subject("python:stasher.solve:solve", isolate=True)
    assert not marker.exists(), "parsing imported the subject's module in the harness"
    result = run_cases([builtin.get_case(VOLUMES)], subject, out=tmp_path / "out", progress=False)
    assert _one(result, VOLUMES).status != "ok"
    assert not marker.exists(), "the subject's top level ran outside the sandbox"
    assert "stasher" not in sys.modules


# --------------------------------------------------------------------------- limits


def _small(**given: int) -> dict[str, object]:
    return {"limits": Limits(**given)}


@SANDBOX
def test_a_memory_balloon_ends_with_resource_limit_memory(tmp_path: Path) -> None:
    code = "x = bytearray(1 << 30); x[::4096] = b'1' * len(x[::4096])"
    result = _run(tmp_path, VOLUMES, f"{PY} -c {shlex.quote(code)}", **_small(memory=256 * MiB))
    summary = _one(result, VOLUMES)
    assert summary.status in ("resource-limit", "subject-error", "no-result"), summary.reason
    if Path("/sys/fs/cgroup/memory").is_dir() or Path("/sys/fs/cgroup/cgroup.controllers").is_file():
        assert summary.status == "resource-limit" and summary.reason.startswith("resource-limit: memory"), summary.reason
    assert summary.limits is not None and summary.limits["memory"] == 256 * MiB
    _nothing_left()


@SANDBOX
def test_a_fork_loop_ends_with_resource_limit_processes(tmp_path: Path) -> None:
    result = _run(tmp_path, VOLUMES, "f(){ f | f & }; f; sleep 30", **_small(processes=64))
    summary = _one(result, VOLUMES)
    assert summary.status == "resource-limit", summary.reason
    assert summary.reason.startswith("resource-limit: processes"), summary.reason
    _nothing_left()


@SANDBOX
def test_filling_tmp_ends_with_resource_limit_tmp(tmp_path: Path) -> None:
    result = _run(tmp_path, VOLUMES, "head -c 100M /dev/zero > /tmp/fill; sleep 30", **_small(tmp=32 * MiB))
    summary = _one(result, VOLUMES)
    assert summary.status == "resource-limit" and summary.reason.startswith("resource-limit: tmp"), summary.reason
    _nothing_left()


@SANDBOX
def test_filling_the_workspace_ends_with_resource_limit(tmp_path: Path) -> None:
    result = _run(tmp_path, VOLUMES, "head -c 100M /dev/zero > fill; sleep 30", **_small(workspace=32 * MiB))
    summary = _one(result, VOLUMES)
    assert summary.status == "resource-limit", summary.reason
    assert summary.reason.startswith(("resource-limit: workspace", "resource-limit: file-size")), summary.reason
    _nothing_left()


@SANDBOX
def test_cpu_time_past_its_limit_ends_with_resource_limit_cpu(tmp_path: Path) -> None:
    result = _run(tmp_path, VOLUMES, f"{PY} -c 'while True: pass'", **_small(cpu_s=1))
    summary = _one(result, VOLUMES)
    assert summary.status == "resource-limit" and summary.reason.startswith("resource-limit: cpu"), summary.reason


@SANDBOX
def test_an_honest_subject_under_the_default_limits_scores_ok(tmp_path: Path) -> None:
    code = "import numpy as np; l = np.load('inputs/labels.npy'); np.save('outputs/volumes.npy', np.bincount(l.ravel())[1:] * 0.25)"
    result = _run(tmp_path, VOLUMES, f"{PY} -c {shlex.quote(code)}")
    summary = _one(result, VOLUMES)
    assert summary.status == "ok", summary.reason
    assert summary.limits == Limits().to_record()
    record = read_record(result.run_dir / "run.json", RunRecord)
    assert record.limits == Limits().to_record()
    receipt = json.loads((result.run_dir / "receipt.json").read_text())
    assert receipt["subject"]["limits"] == Limits().to_record()


# --------------------------------------------------------------------------- who the subject is, what it sees


@SANDBOX
@ROOT_ONLY
def test_the_subject_runs_as_a_uid_of_its_own_without_capabilities(tmp_path: Path) -> None:
    cmd = "id -u > /dev/stderr; grep CapEff /proc/self/status >&2; echo x > /dev/stdout"
    result = _run(tmp_path, VOLUMES, cmd)
    summary = _one(result, VOLUMES)
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    uid = int(err.split()[0])
    assert uid != 0 and uid >= 61_000, err
    assert "CapEff:\t0000000000000000" in err, err


@SANDBOX
def test_host_secrets_are_not_in_the_subjects_environment_unless_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "s3cr3t-value")
    probe = "printenv SECRET_TOKEN >&2 || echo absent >&2; env | cut -d= -f1 | sort >&2"
    result = _run(tmp_path / "a", VOLUMES, probe)
    summary = _one(result, VOLUMES)
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert "s3cr3t-value" not in err and err.startswith("absent"), err
    names = set(err.split()[1:])
    assert names <= {"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "PWD", "SHLVL", "_", "IMAGEBENCH_WORKSPACE",
                     "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                     "MKL_NUM_THREADS"} | {n for n in names if n.startswith("LC_")}, names  # fmt: skip
    passed = _run(tmp_path / "b", VOLUMES, probe, env_pass=("SECRET_TOKEN",))
    summary = _one(passed, VOLUMES)
    err = (passed.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert err.startswith("s3cr3t-value"), err
    run_json = (passed.run_dir / "run.json").read_text()
    assert "SECRET_TOKEN" in run_json and "s3cr3t-value" not in run_json
    assert "s3cr3t-value" not in (passed.run_dir / "receipt.json").read_text()


# --------------------------------------------------------------------------- MCP


# A raw JSON-RPC client over the MCP socket (stdlib only): what a dishonest agent would write.
_RAW_CLIENT = r"""
import json, os, socket, sys
def rpc(sock, buf, i, method, params):
    sock.sendall((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    while b"\n" not in buf[0]:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return None
        buf[0] += chunk
    line, _, buf[0] = buf[0].partition(b"\n")
    return json.loads(line)
def connect():
    s = socket.socket(socket.AF_UNIX); s.connect("/mcp/server.sock"); buf = [b""]
    rpc(s, buf, 0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})
    s.sendall(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    return s, buf
def call(s, buf, i, tool, args):
    r = rpc(s, buf, i, "tools/call", {"name": tool, "arguments": args})
    return None if r is None else json.loads(r["result"]["content"][0]["text"]) if not r["result"].get("isError") else r["result"]["content"][0]["text"]
"""


def _mcp_subject(code: str) -> CommandSubject:
    return CommandSubject(f"{PY} -c {shlex.quote(_RAW_CLIENT + code)}", mcp=True)


@SANDBOX
def test_planted_mcp_links_in_the_workspace_redirect_no_harness_write(tmp_path: Path) -> None:
    """The old route: `.mcp` / `.mcp/reads` planted as links to a host folder, then an npy read. The
    reads go to the harness's own folder (read-only at /mcp); nothing appears at the link's target."""
    target = tmp_path / "host-folder"
    target.mkdir()
    code = (
        f"os.makedirs('.mcp', exist_ok=True); os.symlink({str(target)!r}, '.mcp/reads'); os.symlink({str(target)!r}, 'mcp-reads')\n"
        "s, buf = connect()\n"
        "out = call(s, buf, 1, 'read_layer', {'name': 'labels', 'encoding': 'npy'})\n"
        "print(json.dumps(out), file=sys.stderr)\n"
        "try:\n    open('/mcp/reads/evil', 'w')\nexcept OSError as e:\n    print('ro:', e.errno, file=sys.stderr)\n"
    )
    result = run_cases([builtin.get_case(VOLUMES)], _mcp_subject(code), out=tmp_path / "out", progress=False)
    summary = _one(result, VOLUMES)
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert '"path": "/mcp/reads/labels-1.npy"' in err, err
    assert "ro:" in err, err
    assert list(target.iterdir()) == []
    _nothing_left()


@SANDBOX
@ROOT_ONLY
def test_the_mcp_socket_is_the_subjects_only(tmp_path: Path) -> None:
    code = "st = os.stat('/mcp/server.sock'); print(oct(st.st_mode & 0o777), st.st_uid, os.getuid(), file=sys.stderr)"
    result = run_cases([builtin.get_case(VOLUMES)], _mcp_subject(code), out=tmp_path / "out", progress=False)
    summary = _one(result, VOLUMES)
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    mode, owner, me = err.split()[:3]
    assert mode == "0o600" and owner == me and me != "0", err


@SANDBOX
def test_a_200mb_mcp_line_ends_its_connection_and_the_session_goes_on(tmp_path: Path) -> None:
    code = (
        "s = socket.socket(socket.AF_UNIX); s.connect('/mcp/server.sock')\n"
        "try:\n"
        "    chunk = b'[' * (1 << 20)\n"
        "    for _ in range(200):\n        s.sendall(chunk)\n"
        "    print('sent all', file=sys.stderr)\n"
        "except OSError as e:\n    print('cut off:', e.errno, file=sys.stderr)\n"
        "s2, buf = connect()\n"
        "print('after:', call(s2, buf, 1, 'list_layers', {})['layers'][0]['name'], file=sys.stderr)\n"
    )
    result = run_cases([builtin.get_case(VOLUMES)], _mcp_subject(code), out=tmp_path / "out", progress=False)
    summary = _one(result, VOLUMES)
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert "cut off:" in err and "after: labels" in err, err


def test_too_many_mcp_connections_are_closed_as_they_come(tmp_path: Path) -> None:
    from imagebench.case.session import open_session
    from imagebench.runs.runner import prepare_fixture
    from imagebench.subjects.mcp.server import MAX_CONNECTIONS, McpFolder, SocketServer
    from imagebench.subjects.mcp.tools import AgentSession, CaseView

    case = builtin.get_case(VOLUMES)
    session = open_session(case, prepare_fixture(case).fixture)
    folder = McpFolder(tmp_path)
    server = SocketServer(AgentSession(CaseView.of(case), session, reads=folder), folder.socket_path)
    try:
        held = []
        for _ in range(MAX_CONNECTIONS):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(folder.socket_path))
            held.append(s)
        time.sleep(0.3)
        extra = socket.socket(socket.AF_UNIX)
        extra.connect(str(folder.socket_path))
        extra.settimeout(5)
        assert extra.recv(1) == b"", "a connection past the limit is closed at once"
    finally:
        server.close()
        folder.remove()


def test_add_layer_npy_loses_no_race_to_a_rename_exchange(tmp_path: Path) -> None:
    """A folder swapped with a link to a host folder (renameat2 RENAME_EXCHANGE) in a loop while
    add_layer(npy=...) is called: every call loads the subject's own array or is refused."""
    from imagebench.case.session import open_session
    from imagebench.runs.runner import prepare_fixture
    from imagebench.subjects.mcp.tools import AgentSession, CaseView, ToolError

    case = builtin.get_case("segment-nuclei/synthetic-blobs")
    session = open_session(case, prepare_fixture(case).fixture)
    shape = session.layers["nuclei"].data.shape
    host = tmp_path / "host"
    host.mkdir()
    np.save(host / "x.npy", np.full(shape, 7, np.int32))  # "the truth"
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    np.save(ws / "d" / "x.npy", np.ones(shape, np.int32))
    (ws / "e").symlink_to(host)
    agent = AgentSession(CaseView.of(case), session, workspace=ws)
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            libc.renameat2(-100, b"%s/d" % bytes(ws), -100, b"%s/e" % bytes(ws), 2)  # AT_FDCWD, RENAME_EXCHANGE

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    agent.add_layer("l", "labels", data=np.ones(shape, np.int32).tolist(), like="nuclei")
    loaded = refused = 0
    try:
        for _ in range(400):
            try:
                agent.update_layer("l", npy="d/x.npy")
                loaded += 1
                assert int(agent.layers["l"].data.max()) == 1, "the harness read through the swapped link"
            except ToolError as exc:
                assert "symbolic link" in str(exc) or "no such file" in str(exc) or "kept changing" in str(exc), exc
                refused += 1
    finally:
        stop.set()
        thread.join()
    assert loaded + refused == 400 and refused > 0, (loaded, refused)


# --------------------------------------------------------------------------- the one place


# Modules that handle a subject's workspace or leavings; every read or write there goes through
# imagebench.sandbox.workspace (or a folder of the harness's own, named here with its reason).
_WORKSPACE_MODULES = (
    "subjects/command.py", "subjects/python.py", "subjects/running.py", "subjects/files.py", "sandbox/process.py",
    "sandbox/isolate.py", "subjects/mcp/tools.py", "subjects/mcp/host.py", "subjects/mcp/server.py", "subjects/mcp/folder.py",
    "subjects/skilltool.py", "subjects/sockets.py",
)  # fmt: skip
_ALLOWED = {
    ("sandbox/process.py", "open(path, 'wb')"): "Capture writes stdout.txt/stderr.txt into the sample folder (the harness's)",
    ("subjects/files.py", "shutil.copytree(files, root / 'files'"): "readonly_files: a bundle's files into a temporary folder of the harness's",
    ("subjects/mcp/folder.py", "np.save(buf, arr"): "an npy read serialised in memory, then written beneath the McpFolder's descriptor",
    ("subjects/python.py", "file.is_file()"): "python:path/file.py:func: the solver file the user named, checked when the spec is parsed, before any workspace exists",
    ("subjects/python.py", "candidate.is_file()"): "python:package.module:function: the module file of the solver the user named, found without importing it, before any workspace exists",
}
_DIRECT = {"load", "read_bytes", "read_text", "write_text", "write_bytes", "open", "save", "is_file", "copytree"}


def test_no_module_that_handles_a_workspace_reads_it_directly() -> None:
    """A grep of the modules that touch a subject's workspace: no direct open / np.load /
    Path.read_* / np.save / is_file / copytree on a path; imagebench.sandbox.workspace is the one place."""
    import ast

    found = []
    for rel in _WORKSPACE_MODULES:
        tree = ast.parse((SRC / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
            if name not in _DIRECT:
                continue
            owner = fn.value if isinstance(fn, ast.Attribute) else None
            # os.open with a dir_fd / our own descriptors is how the workspace module works; allow os.*
            if isinstance(owner, ast.Name) and owner.id == "os":
                continue
            if isinstance(owner, ast.Attribute) and owner.attr in ("workspace", "ws") or (
                isinstance(owner, ast.Name) and owner.id in ("ws", "workspace")
            ):
                continue  # the Workspace object's own methods
            text = ast.unparse(node)
            if any(rel == where and text.startswith(start) for where, start in _ALLOWED):
                continue
            found.append(f"{rel}:{node.lineno} {text[:80]}")
    assert found == [], "direct file access in a module that handles a subject's workspace:\n" + "\n".join(found)


def test_the_http_route_refuses_a_body_past_the_line_limit_before_parsing() -> None:
    import asyncio

    from imagebench.subjects.mcp.server import capped_body

    parsed: list[bytes] = []

    async def app(scope, receive, send):  # the MCP app: it would parse what it receives
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        parsed.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def call(headers, chunks):
        sent: list[dict] = []
        queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

        async def receive():
            return queue.pop(0)

        async def send(message):
            sent.append(message)

        asyncio.run(capped_body(app, 1000)({"type": "http", "headers": headers}, receive, send))
        return sent[0]["status"]

    assert call([(b"content-length", b"5000")], [b"x" * 10]) == 413
    assert call([], [b"x" * 600, b"x" * 600]) == 413
    assert parsed == []
    assert call([(b"content-length", b"10")], [b"x" * 10]) == 200 and parsed == [b"x" * 10]


@SANDBOX
def test_where_no_tmpfs_can_be_mounted_a_watcher_ends_a_workspace_fill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness that may not mount (not root) keeps a plain folder: files each under the cap
    that outgrow it together end the subject within a second or so."""
    import imagebench.sandbox.process as command

    monkeypatch.setattr(command, "mount_tmpfs", lambda *a, **k: False)
    fill = "for i in 1 2 3 4 5 6; do head -c 20M /dev/zero > fill$i; done; sleep 30"
    result = _run(tmp_path, VOLUMES, fill, **_small(workspace=48 * MiB))
    summary = _one(result, VOLUMES)
    assert summary.status == "resource-limit" and summary.reason.startswith("resource-limit: workspace"), summary.reason
    assert summary.times["subject_s"] < 20
    _nothing_left()


@SANDBOX
def test_where_no_cgroup_can_be_made_the_address_space_is_limited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import imagebench.sandbox.process as command

    monkeypatch.setattr(command.Cgroup, "make", classmethod(lambda cls, *a, **k: None))
    code = "import resource, sys; print(resource.getrlimit(resource.RLIMIT_AS)[0], file=sys.stderr); bytearray(1 << 30)"
    result = _run(tmp_path, VOLUMES, f"{PY} -c {shlex.quote(code)}", **_small(memory=512 * MiB))
    summary = _one(result, VOLUMES)
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert err.split()[0] == str(512 * MiB) and "MemoryError" in err, err
    assert summary.status != "ok"


# --------------------------------------------------------------------------- found by a red-team run


@SANDBOX
def test_a_lone_surrogate_in_an_answer_is_a_wrong_answer_not_a_harness_error(tmp_path: Path) -> None:
    """A key ``"\\udfff"`` once made writing the summary fail: the failure became a harness error,
    which every figure leaves out (pass@1 went from 0.5 to 1.0)."""
    result = _run(tmp_path, "segment-nuclei/count-nuclei", 'echo "{\\"count\\": 0, \\"\\\\udfff\\": 0}"')
    summary = _one(result, "segment-nuclei/count-nuclei")
    assert summary.status == "wrong-answer", summary.reason
    path = result.run_dir / summary.subject / summary.label / "sample-0" / "summary.json"
    assert "\\\\udfff" in path.read_text(encoding="utf-8")  # kept as its escape


@SANDBOX
def test_labels_past_int64_are_unusable_not_a_verifier_crash(tmp_path: Path) -> None:
    code = (
        "import numpy as np; l = np.zeros(np.load('inputs/nuclei.npy').shape[:2], np.uint64); "
        "l[0, 0] = 2**64 - 1; np.save('outputs/labels.npy', l)"
    )
    result = _run(tmp_path, "segment-nuclei/synthetic-blobs", f"{PY} -c {shlex.quote(code)}")
    summary = _one(result, "segment-nuclei/synthetic-blobs")
    assert summary.status == "unscorable-result", summary.reason
    assert "2**63" in summary.reason


def test_a_verifier_broken_by_a_leaving_is_the_subjects_failure(tmp_path: Path) -> None:
    from helpers import make_toy_case, toy_verify

    def fragile(fixture, attempt):
        if "area" in attempt.arrays and attempt.arrays["area"] == 13:
            raise ValueError("thirteen")
        return toy_verify(fixture, attempt)

    def broken(fixture, attempt):
        raise RuntimeError("the bench's own bug")

    def solve(session):
        session.namespace["area"] = 13

    from imagebench.subjects import PythonSubject

    subject = PythonSubject(target="t:solve", function=solve)
    result = run_cases([make_toy_case(verify=fragile)], subject, out=tmp_path / "a", progress=False)
    (summary,) = result.samples["toy/rectangle"]
    assert summary.status == "unscorable-result" and "thirteen" in summary.reason, summary.reason
    result = run_cases([make_toy_case(verify=broken)], subject, out=tmp_path / "b", progress=False)
    (summary,) = result.samples["toy/rectangle"]
    assert summary.status == "harness-error" and "the bench's own bug" in summary.reason


def test_an_agent_cannot_make_the_harness_hold_unbounded_layers(tmp_path: Path) -> None:
    from imagebench.case.session import open_session
    from imagebench.runs.runner import prepare_fixture
    from imagebench.subjects.mcp import tools
    from imagebench.subjects.mcp.tools import AgentSession, CaseView, ToolError

    case = builtin.get_case("segment-nuclei/synthetic-blobs")
    session = open_session(case, prepare_fixture(case).fixture)
    agent = AgentSession(CaseView.of(case), session, workspace=tmp_path)
    agent.layers["nuclei"].data = np.zeros((4096, 4096), np.uint8)  # a layer has its input's shape
    big = np.zeros((4096, 4096), np.float64)  # 128 MiB
    np.save(tmp_path / "big.npy", big)
    for i in range(tools.MAX_AGENT_BYTES // big.nbytes):
        agent.add_layer(f"scratch{i}", "image", npy="big.npy")
    with pytest.raises(ToolError, match="a session keeps"):
        agent.add_layer("one-more", "image", npy="big.npy")
    np.save(tmp_path / "small.npy", big.astype(np.uint8))
    agent.update_layer("scratch0", npy="small.npy")  # room is freed by updating a layer
    np.save(tmp_path / "half.npy", big.astype(np.float32))
    agent.add_layer("one-more", "image", npy="half.npy")
    many = AgentSession(CaseView.of(case), session, workspace=tmp_path)
    many.layers["nuclei"].data = np.zeros((2, 1), np.uint8)
    small = [[0]] * 2
    with pytest.raises(ToolError, match="the most a session keeps"):
        for i in range(tools.MAX_AGENT_LAYERS + 1):
            many.add_layer(f"tiny{i}", "labels", data=small)
    fresh = AgentSession(CaseView.of(case), session, workspace=tmp_path)
    with pytest.raises(ToolError, match="not a plain relative path"):
        fresh.add_layer("nul", "image", npy="big.npy\x00.npy")


@SANDBOX
@ROOT_ONLY
def test_the_plane_takes_no_more_from_a_subject_than_its_workspace_limit(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow.flight")
    code = (
        "import os, json, numpy as np, pyarrow as pa, pyarrow.flight as fl\n"
        "c = fl.FlightClient(os.environ['IMAGEBENCH_TENSOR_URL'])\n"
        "auth = fl.FlightCallOptions(headers=[(b'authorization', b'Bearer ' + os.environ['IMAGEBENCH_TENSOR_TOKEN'].encode())])\n"
        "schema = pa.schema([('index', pa.list_(pa.int64())), ('data', pa.binary())])\n"
        "block = np.zeros((1024, 4096), np.float32)\n"
        "for k in range(8):\n"
        "    req = {'op': 'upload', 'version': 1, 'name': f'junk-{k}', 'shape': [1024, 4096], 'dtype': 'float32',\n"
        "           'chunks': [1024, 4096], 'dim_labels': None, 'downsample': 'mean'}\n"
        "    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(req).encode()), schema, options=auth)\n"
        "    w.write_batch(pa.record_batch([pa.array([[0, 0]], pa.list_(pa.int64())), pa.array([block.tobytes()], pa.binary())], schema=schema))\n"
        "    w.done_writing(); r.read(); w.close()\n"
        "import time; time.sleep(20)\n"
    )
    label = "drift-correction/large-field-tensor"
    result = _run(tmp_path, label, f"{PY} -c {shlex.quote(code)}", **_small(workspace=40 * MiB))
    summary = _one(result, label)
    assert summary.status == "resource-limit" and summary.reason.startswith("resource-limit: plane"), summary.reason


@SANDBOX
def test_no_user_namespace_can_be_made_inside(tmp_path: Path) -> None:
    code = (
        "import ctypes, os, subprocess, threading, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('unshare', libc.unshare(0x10000000), ctypes.get_errno(), file=sys.stderr)\n"
        "print('clone3', libc.syscall(435, 0, 0), ctypes.get_errno(), file=sys.stderr)\n"
        "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "print('child', subprocess.run(['true']).returncode, file=sys.stderr)\n"
    )
    result = _run(tmp_path, VOLUMES, f"unshare -U -r true 2>&1 >&2 || echo refused >&2; {PY} -c {shlex.quote(code)}")
    summary = _one(result, VOLUMES)
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    assert "refused" in err and "unshare -1 1" in err and "clone3 -1 38" in err and "child 0" in err, err


@SANDBOX
def test_a_kept_workspace_of_many_or_deep_folders_is_copied_as_far_as_it_can_be(tmp_path: Path) -> None:
    deep = "d/" * 1500
    cmd = f"mkdir -p {deep}x; for i in $(seq 1 3000); do mkdir -p many/$i; done; echo 1 > outputs/n.txt"
    subject = CommandSubject(cmd, keep_workspace=True)
    result = run_cases([builtin.get_case(VOLUMES)], subject, out=tmp_path / "out", progress=False)
    summary = _one(result, VOLUMES)
    assert summary.status != "harness-error", summary.reason
    kept = result.run_dir / summary.subject / summary.label / "sample-0" / "workspace"
    assert (kept / "outputs" / "n.txt").read_text() == "1\n" and (kept / "many" / "3000").is_dir()


def test_mcp_folders_of_killed_harnesses_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from imagebench.subjects.mcp.folder import FOLDER_PREFIX, McpFolder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale = tmp_path / f"{FOLDER_PREFIX}999999999-abc"
    stale.mkdir()
    (stale / "bridge.py").write_text("x")
    folder = McpFolder()
    try:
        assert not stale.exists() and folder.path.parent == tmp_path
    finally:
        folder.remove()


@SANDBOX
def test_an_isolated_module_that_does_not_import_is_a_subject_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "code" / "unimportable"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('no such thing here')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    subject = parse_subject("python:unimportable.x:solve", isolate=True)
    result = run_cases([builtin.get_case(VOLUMES)], subject, out=tmp_path / "out", progress=False)
    summary = _one(result, VOLUMES)
    assert summary.status == "subject-error", summary.reason


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), 1e308])
def test_huge_shifts_cannot_swamp_the_truth(value: float) -> None:
    """A constant shift of 2**63 made ``shifts - truth`` lose the truth in float64 rounding, so
    every error was 0 and the sample scored ok (a red-team fuzz on stack-alignment/mri-anatomical)."""
    from helpers import solve_case

    case = builtin.get_case("stack-alignment/mri-anatomical")
    fixture = case.build()
    shape = np.asarray(fixture.truth["offsets"]).shape

    def cheat(session):
        session.namespace["shifts"] = np.full(shape, value)

    outcome = solve_case(case, fixture, cheat)
    assert outcome.status == "unscorable-result" and not outcome.passed, outcome.metrics


@SANDBOX
@ROOT_ONLY
def test_a_subject_cannot_run_the_harness_out_of_descriptors_through_the_plane(tmp_path: Path) -> None:
    """Each bridged connection costs the harness two descriptors and two threads: at most 32 are held."""
    pytest.importorskip("pyarrow.flight")
    from imagebench.sandbox.policy import MAX_BRIDGE_CONNECTIONS

    code = (
        "import os, socket, sys, time\n"
        "port = int(os.environ['IMAGEBENCH_TENSOR_URL'].rsplit(':', 1)[1])\n"
        "held = []\n"
        "for _ in range(300):\n"
        "    s = socket.create_connection(('127.0.0.1', port)); held.append(s)\n"
        "time.sleep(1.0)\n"
        "alive = 0\n"
        "for s in held:\n"
        "    s.setblocking(False)\n"
        "    try:\n"
        "        alive += s.recv(1) != b''\n"
        "    except BlockingIOError:\n"
        "        alive += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print('alive', alive, file=sys.stderr)\n"
    )
    label = "drift-correction/large-field-tensor"
    result = _run(tmp_path, label, f"{PY} -c {shlex.quote(code)}")
    summary = _one(result, label)
    assert summary.status != "harness-error", summary.reason
    err = (result.run_dir / summary.subject / summary.label / "sample-0" / "stderr.txt").read_text()
    alive = int(err.split("alive")[1].split()[0])
    assert alive <= MAX_BRIDGE_CONNECTIONS, err


def test_a_snapshot_costs_its_picture_not_its_layer_and_names_are_short(tmp_path: Path) -> None:
    import resource

    from imagebench.case.session import open_session
    from imagebench.runs.runner import prepare_fixture
    from imagebench.subjects.mcp.tools import MAX_NAME_CHARS, AgentSession, CaseView, ToolError

    case = builtin.get_case("segment-nuclei/synthetic-blobs")
    session = open_session(case, prepare_fixture(case).fixture)
    agent = AgentSession(CaseView.of(case), session, workspace=tmp_path)
    agent.layers["nuclei"].data = np.zeros((8192, 8192), np.uint8)  # a layer has its input's shape
    np.save(tmp_path / "big.npy", np.ones((8192, 8192), np.uint8))
    agent.add_layer("scratch", "labels", npy="big.npy")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    png = agent.snapshot(layer="scratch")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert png.startswith(b"\x89PNG") and grown_mib < 256, grown_mib
    with pytest.raises(ToolError, match=f"1 to {MAX_NAME_CHARS} characters"):
        agent.add_layer("x" * (MAX_NAME_CHARS + 1), "labels", data=[[0]])
