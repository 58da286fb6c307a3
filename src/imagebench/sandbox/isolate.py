"""A ``python:`` subject's function run in a sandboxed child process (``--isolate``).

In process, a ``python:`` subject is trusted code: it shares the harness's memory, so nothing
stops it from reading the fixture it is scored against (truth is read-only and its digest is
checked after each sample, but reading is enough to cheat). Isolated, the same function runs
in a child Python inside the command sandbox (:mod:`imagebench.sandbox.policy`): the child is given
the session's data as files in its workspace (``prompt.md``, ``inputs/<layer>.npy``, ``files/``),
builds a small session of its own, calls the function, and writes each name the function bound
or rebound to ``outputs/<name>.npy`` (arrays) or ``outputs/<name>.json`` (anything JSON can
hold), where the runner collects them as it does a command's.

Only the function's own code is shown to the sandbox: its package folder (or its single file)
read-only. A function inside the harness's checkout ``src/`` or ``tests/`` cannot be isolated
(the sandbox refuses to show them). The child does not import ``imagebench``.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import sys
from pathlib import Path

from imagebench.sandbox.policy import SandboxPolicy

TARGET_ENV = "IMAGEBENCH_ISOLATE_TARGET"
#: The child's exit code when the function raised (BOOTSTRAP's ``RAISED``).
RAISED_EXIT = 70
PATH_ENV = "IMAGEBENCH_ISOLATE_PATH"

# Run by the child Python. It must not import imagebench (masked in the sandbox).
BOOTSTRAP = r"""
import importlib, json, os, sys
from pathlib import Path
import numpy as np

RAISED = 70  # the function raised (the harness scores it as a subject error, as in process)
ws = Path(os.environ["IMAGEBENCH_WORKSPACE"])
sys.path[:0] = json.loads(os.environ["IMAGEBENCH_ISOLATE_PATH"])
module, _, name = os.environ["IMAGEBENCH_ISOLATE_TARGET"].partition(":")
try:  # a module that cannot be imported here is the subject's failure, as a function that raises is
    func = importlib.import_module(module)
    for part in name.split("."):
        func = getattr(func, part)
except BaseException:
    import traceback

    traceback.print_exc()
    sys.exit(RAISED)


class Session:
    # what a python: subject reads: namespace, prompt, label, workspace (holding files/), notes
    def __init__(self):
        self.prompt = (ws / "prompt.md").read_text(encoding="utf-8")
        self.label = os.environ.get("IMAGEBENCH_ISOLATE_LABEL", "")
        self.workspace = ws if (ws / "files").is_dir() else None
        self.notes = {}
        self.namespace = {p.stem: np.load(p, allow_pickle=False) for p in sorted((ws / "inputs").glob("*.npy"))}
        self.namespace["prompt"] = self.prompt
        tensors = ws / "fixture_tensors.json"
        if tensors.is_file():
            self.namespace["fixture_tensors"] = json.loads(tensors.read_text(encoding="utf-8"))


session = Session()
given = dict(session.namespace)
try:
    func(session)
except BaseException:
    import traceback

    traceback.print_exc()
    sys.exit(RAISED)
out = ws / "outputs"


def plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


failed = []
for key, value in session.namespace.items():
    if key in given and value is given[key]:
        continue
    if not key or "/" in key or key.startswith("."):
        continue
    try:
        if isinstance(value, np.ndarray):
            np.save(out / f"{key}.npy", value, allow_pickle=False)
        else:
            text = json.dumps(value, default=plain)
            (out / f"{key}.json").write_text(text, encoding="utf-8")
    except (TypeError, ValueError) as exc:
        failed.append(key)
        print(f"imagebench --isolate: {key!r} cannot be returned as .npy or .json: {exc}", file=sys.stderr)
sys.exit(3 if failed else 0)
"""


def code_paths(target: str) -> tuple[list[Path], list[Path]]:
    """What of ``target``'s code the sandbox must show, and the folders to put on ``sys.path``.

    ``target`` is ``package.module:function``: its top-level package folder is shown (or, for a
    single-file module, that file), and that folder's parent goes on the child's ``sys.path``.
    A module the tool environment already holds (site-packages) needs nothing shown.
    """
    top = target.partition(":")[0].split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None:
        raise ImportError(f"no module named {top!r}")
    if spec.submodule_search_locations:
        shown = [Path(p).resolve() for p in spec.submodule_search_locations]
    elif spec.origin and spec.origin not in ("built-in", "frozen"):
        shown = [Path(spec.origin).resolve()]
    else:
        return [], []
    shown = [p for p in shown if not _in_environment(p)]
    return shown, sorted({p.parent for p in shown})


def _in_environment(path: Path) -> bool:
    for prefix in {sys.prefix, sys.base_prefix}:
        root = Path(prefix).resolve()
        if path == root or root in path.parents:
            return True
    return False


def isolated_command(policy: SandboxPolicy) -> str:
    """The shell command that runs :data:`BOOTSTRAP` with the tool environment's Python."""
    if policy.enabled and policy.env_prefix is not None:
        python = str(Path(policy.env_prefix) / "bin" / "python3")
    else:
        python = sys.executable
    return f"{shlex.quote(python)} -I -c {shlex.quote(BOOTSTRAP)}"


def isolated_env(target: str, path: list[Path], label: str) -> dict[str, str]:
    return {TARGET_ENV: target, PATH_ENV: json.dumps([str(p) for p in path]), "IMAGEBENCH_ISOLATE_LABEL": label}
