"""A command's workspace under the run's access setting, and the evidence a sample keeps of it
(:mod:`imagebench.sandbox.access` names the settings and the tools each is served).

:func:`prepare_access` writes the workspace before the command starts: under a setting with files,
what a command always gets (``prompt.md``, ``inputs/``, ``outputs/``, ``files/``,
``fixture_tensors.json``); under ``tools`` only ``prompt.md`` and ``outputs/``; under ``views-N``
those and ``views/`` (:mod:`imagebench.subjects.views`). ``prompt.md`` then ends with a section
saying what the setting gives. The sample's ``notes["access"]`` keeps what was there (every
file the harness wrote, by path), and the MCP host adds the tools it served
(:func:`imagebench.sandbox.access.note_tools`); the run records the setting and how it was enforced
(:func:`enforcement`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.sandbox.access import ACCESS_NOTE
from imagebench.subjects.views import VIEWS_DIR

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.sandbox.access import Access
    from imagebench.sandbox.policy import SandboxPolicy
    from imagebench.sandbox.workspace import Workspace

#: files listed at most in the evidence
MAX_LISTED = 200


def access_section(access: Access, views: Sequence[str] = ()) -> str:
    """The end of ``prompt.md`` under ``access``: what the subject is given, and what not."""
    lines = ["", f"## Access: {access.name}", ""]
    if access.views is not None:
        lines += [
            f"You see the data only as {access.views} fixed rendered view(s), PNG files in views/ "
            "(described in views/views.json): " + ", ".join(f"views/{v}" for v in views) + ".",
            "There is no inputs/ folder and no array of the data, on disk or through a tool; the inputs "
            "named above are what the views show.",
        ]
    elif not access.files:
        lines += [
            "The inputs are not on disk: there is no inputs/ folder. Read them through the MCP tools "
            "(mcp.json names the server). There is no shell: the command is the only program that runs.",
        ]
    else:
        lines.append(access.words()[0].upper() + access.words()[1:] + ".")
    return "\n".join(lines) + "\n"


def prepare_access(
    session: Session,
    ws: Workspace,
    files: Path | None,
    access: Access,
    *,
    prepare: Callable[[Session, Workspace, Path | None, str], None],
) -> None:
    """The workspace under ``access`` (``prepare(session, ws, files, prompt)`` writes it whole, for
    a setting with files), and ``session.notes["access"]``."""
    from imagebench.subjects.base import SubjectHarnessError

    views: list[str] = []
    try:
        if access.files:
            prepare(session, ws, files, session.prompt + access_section(access))
        else:
            ws.mkdir("outputs")
            if access.views is not None:
                from imagebench.subjects.views import ViewsError, write_views

                try:
                    views = [v.name for v in write_views(session, ws, access.views)]
                except ViewsError as exc:
                    raise SubjectHarnessError(f"access setting {access.name}: {exc}") from None
            ws.write_text("prompt.md", session.prompt + access_section(access, views))
    except (OSError, ValueError) as exc:
        raise SubjectHarnessError(f"could not write the workspace for access setting {access.name}: {exc}") from exc
    session.notes[ACCESS_NOTE] = {"setting": access.name, "views": [f"{VIEWS_DIR}/{v}" for v in views]}
    note_workspace(session, ws)


def note_workspace(session: Session, ws: Workspace) -> None:
    """Add to the sample's access evidence every file in the workspace now (the harness calls it
    again just before the command starts, once ``mcp.json`` and the skill tool's note are there)."""
    held = session.notes.get(ACCESS_NOTE)
    if not isinstance(held, dict):
        return
    listed = sorted(rel for rel, kind in ws.walk_files(max_entries=MAX_LISTED) if kind == "file")
    held["workspace"] = listed
    held["inputs_on_disk"] = any(r.startswith("inputs/") for r in listed)


def _workspace(access: Access, *, mcp: bool) -> list[str]:
    """What the harness writes into the workspace under ``access`` (a sample's notes list the files)."""
    out = ["prompt.md", "outputs/"]
    if access.files:
        out += ["inputs/<layer>.npy", "files/ (a bundle case's)", "fixture_tensors.json (a tensor case's)"]
    if access.views is not None:
        out += [f"views/view-1.png .. view-{access.views}.png", "views/views.json"]
    if mcp:
        out.append("mcp.json (naming the case's MCP server)")
    return out


def _mounts(policy: SandboxPolicy, access: Access, *, mcp: bool) -> list[str]:
    """What the sandbox shows under ``access`` (no paths of this machine: the receipt keeps none)."""
    # in words, no slashes: the receipt keeps no path (it scrubs anything that looks like one)
    out = [
        "the workspace, read-write",
        "the system folders, read-only (etc without its secrets)",
        "the tool environment, read-only",
        "a fresh tmpfs for temporary files",
    ]
    if policy.expose:
        out.append(f"{len(policy.expose)} --subject-expose folder(s), read-only")
    if mcp:
        out.append("the MCP folder (bridge and socket), read-only")
    if access.code:
        out.append("the skill tool's folder on a trigger case, read-only")
    if access.files and not policy.network:
        out.append("the data plane through a bridge, on a case presenting a tensor")
    if not access.code:
        out.append("every shell masked (the null device bound over it)")
    return out


def _tools(access: Access, *, mcp: bool) -> list[str]:
    """The MCP tools served under ``access``, by name (the server's one table, filtered as it is)."""
    from imagebench.sandbox.access import offered_tools
    from imagebench.subjects.mcp.toolset import tool_names

    if not mcp or not access.tools:
        return []
    return list(offered_tools(access, tool_names()))


def enforcement(policy: SandboxPolicy | None, *, mcp: bool, mounts: bool = False) -> dict[str, Any] | None:
    """How the run's access setting was enforced, as the run records it (None: the subject has no
    sandbox policy). A run that declared none records the setting a command always had. ``mounts``:
    with what the sandbox mounts (the receipt's evidence; ``run.json``'s execution conditions leave
    it to the ``sandbox`` condition, so that only the setting decides whether ``access`` differs)."""
    from imagebench.sandbox.access import default_access, evidence_record, parse_access

    if policy is None:
        return None
    declared = policy.access is not None
    access = parse_access(policy.access) if policy.access is not None else default_access(mcp=mcp)
    enforced: dict[str, Any] = {
        "declared": declared,
        "inputs_on_disk": access.files,
        "shell": access.code,
        "workspace": _workspace(access, mcp=mcp),
        "tools_offered": _tools(access, mcp=mcp),
        "views": access.views or 0,
    }
    if mounts and policy.enabled:  # the receipt's evidence; C4 compares the sandbox on its own
        enforced["mounts"] = _mounts(policy, access, mcp=mcp)
    if not access.code and policy.enabled:
        import os

        from imagebench.sandbox.access import shell_masks
        from imagebench.sandbox.noexec import exec_rule

        enforced["exec"] = exec_rule()
        prefix = str(policy.env_prefix) if policy.env_prefix is not None else sys.prefix
        enforced["shells_masked"] = sorted({os.path.basename(p) for p in shell_masks([os.path.join(prefix, "bin")])})
    return evidence_record(access, enforced=enforced)


__all__ = ["access_section", "enforcement", "note_workspace", "prepare_access"]
