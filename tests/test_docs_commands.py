"""The user docs' walkthroughs run as printed: docs/solvers.md ("Write a solver") and
docs/own-case.md ("Add your own case").

Each page is run as a reader would: every block after a ``<!-- file: NAME -->`` comment is
written to that file, then every ``$ `` line of its ``console`` blocks runs, in order, in one
bash (``set -euo pipefail``) in an empty folder, with this interpreter's ``imagebench`` and
``python`` first on PATH and nothing of the developer's environment (no fixture tree, outcome
folder, suites folder, cache or state of theirs).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ("solvers.md", "own-case.md")
_FILE = re.compile(r"<!-- file: (?P<name>[\w.-]+) -->\n```\w*\n(?P<body>.*?)```", re.S)
_CONSOLE = re.compile(r"```console\n(?P<body>.*?)```", re.S)


def page_parts(text: str) -> tuple[dict[str, str], list[str]]:
    """The files a page has the reader write, and its commands in order."""
    files = {m["name"]: m["body"] for m in _FILE.finditer(text)}
    commands = [
        line[2:] for block in _CONSOLE.finditer(text) for line in block["body"].splitlines() if line.startswith("$ ")
    ]
    return files, commands


def test_every_page_has_commands_and_the_files_it_names() -> None:
    for page in PAGES:
        files, commands = page_parts((DOCS / page).read_text(encoding="utf-8"))
        assert commands, page
        for name in files:
            assert any(name in c or name.removesuffix(".py") in c for c in commands), (page, name)


@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_as_printed(page: str, tmp_path: Path) -> None:
    files, commands = page_parts((DOCS / page).read_text(encoding="utf-8"))
    for name, body in files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    script = "set -euo pipefail\n" + "".join(f"echo '$ '{_quote(c)}\n{c}\n" for c in commands)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEBENCH_") and k != "PYTHONPATH"}
    bindir = str(Path(sys.executable).parent)
    env.update(
        PATH=bindir + os.pathsep + env.get("PATH", ""),
        IMAGEBENCH_STATE=str(tmp_path / ".state"),
        IMAGEBENCH_CACHE=str(tmp_path / ".cache"),
        COLUMNS="160",
    )
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{page}: a command failed\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    assert done.stdout.count("$ ") >= len(commands)


def _quote(command: str) -> str:
    return "'" + command.replace("'", "'\\''") + "'"
