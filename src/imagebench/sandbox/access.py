"""Access settings: what evidence a subject may obtain, named, declared by a run and enforced.

A run declares one setting (``imagebench run --access``); what a result means depends on it, so it is
part of the conditions ``compare`` checks (C4) and of the receipt, with its evidence:

- ``files+code``: the inputs on disk (``inputs/<layer>.npy``, the case's ``files/``, the data
  plane) and a shell; no MCP tools;
- ``files+code+tools``: both, and the case's MCP tools (``--subject-mcp``);
- ``tools``: the MCP tools only. The workspace holds no ``inputs/``, no ``files/`` and no data-plane
  address; the command runs without a shell (its words are the program and its arguments), every
  shell of the system is masked in the sandbox (``/dev/null`` bound over it), and where the kernel
  has Landlock only the program, its interpreter and the dynamic loader may be executed
  (:mod:`imagebench.sandbox.noexec`);
- ``views-N`` (N from 1 to :data:`MAX_VIEWS`): only N fixed rendered views of the data, as PNGs
  in ``views/`` of the workspace (:mod:`imagebench.subjects.views`); no array on disk or through a
  tool (the MCP tools served are :data:`VIEW_TOOLS`: none that reads a layer or renders one).

Which tools are served is decided here and nowhere else (:func:`offered_tools`): by name, an
allow-list for ``views-N`` (a tool added later is not served there until it is named), all for
the settings with tools, none for ``files+code``.

A case may declare the settings it is meaningful under (``case.meta["access"]``, a bundle
``case.json``'s ``access``); :func:`refusal` adds what a case's own inputs rule out (a case
handing over ``files/`` is not meaningful without them, a case presenting a tensor has no fixed
views). A sample of a case under a setting it is not meaningful under is ``skipped``, with the
reason (:func:`refusal`): never a zero.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.case.model import Case

#: the settings a run may declare (``views-N`` for N in 1..MAX_VIEWS)
SETTINGS: tuple[str, ...] = ("files+code", "files+code+tools", "tools", "views-N")
MAX_VIEWS = 16
#: ``case.meta`` key of the settings a case declares it is meaningful under
ACCESS_META = "access"
#: ``session.notes`` key of a sample's access evidence (:mod:`imagebench.subjects.access`)
ACCESS_NOTE = "access"
#: the MCP tools a ``views-N`` subject is served: the task, the layers' names and shapes, leaving
#: answers, skills and submit; never read_layer, snapshot or a viewer tool
VIEW_TOOLS: frozenset[str] = frozenset(
    {"get_prompt", "list_layers", "add_layer", "update_layer", "set_answer", "list_skills", "use_skill", "submit"}
)
#: the shells masked in the sandbox of a setting without code
SHELLS: tuple[str, ...] = (
    "sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "csh", "tcsh",
    "fish", "yash", "posh", "busybox", "elvish", "nu", "xonsh",
)  # fmt: skip
_SHELL_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/local/sbin")
#: shell syntax a command run without a shell may not hold (it would be passed on as words)
_SHELL_SYNTAX = re.compile(r"^[();<>|&]+$")
_VIEWS = re.compile(r"^views-([1-9][0-9]?)$")


class AccessError(ValueError):
    """A setting that is not one of :data:`SETTINGS`, or one a subject cannot be held to."""


@dataclass(frozen=True)
class Access:
    """One access setting: ``name`` as declared (``files+code``, ..., ``views-3``)."""

    name: str

    def __post_init__(self) -> None:
        if not _valid(self.name):
            raise AccessError(
                f"access setting {self.name!r} is not one of {', '.join(SETTINGS)} (views-N: N from 1 to {MAX_VIEWS})"
            )

    @property
    def views(self) -> int | None:
        """N of ``views-N``; None for the other settings."""
        m = _VIEWS.match(self.name)
        return int(m.group(1)) if m else None

    @property
    def files(self) -> bool:
        """The inputs are on disk: ``inputs/``, ``files/``, the data plane."""
        return self.name in ("files+code", "files+code+tools")

    @property
    def code(self) -> bool:
        """A shell: the command line runs with bash and may run any program the sandbox shows."""
        return self.name != "tools"

    @property
    def tools(self) -> bool:
        """MCP tools are served (all, or for ``views-N`` the :data:`VIEW_TOOLS`)."""
        return self.name != "files+code"

    def words(self) -> str:
        """What the setting gives, in words (the receipt, the report, the prompt's note)."""
        if self.views is not None:
            return (
                f"{self.views} fixed rendered view(s) of the data as PNGs in views/; no array on disk or through a tool"
            )
        return {
            "files+code": "the inputs on disk and a shell; no MCP tools",
            "files+code+tools": "the inputs on disk, a shell and the MCP tools",
            "tools": "the MCP tools only: no shell, no inputs on disk",
        }[self.name]


def parse_access(text: str) -> Access:
    """The setting named ``text``; :class:`AccessError` naming what is expected."""
    if not isinstance(text, str):
        raise AccessError(f"an access setting is text, one of {', '.join(SETTINGS)}; got {type(text).__name__}")
    return Access(text.strip())


def _valid(name: str) -> bool:
    if name in ("files+code", "files+code+tools", "tools"):
        return True
    m = _VIEWS.match(name)
    return m is not None and 1 <= int(m.group(1)) <= MAX_VIEWS


def default_access(*, mcp: bool) -> Access:
    """The setting of a run that declares none: what a command always had (inputs and a shell),
    with the tools when it is served MCP."""
    return Access("files+code+tools" if mcp else "files+code")


# --------------------------------------------------------------------------- the tools served


def offered_tools(access: Access | None, names: Iterable[str]) -> tuple[str, ...]:
    """The one filter of the MCP tools a subject under ``access`` is served, by name, in the
    order given. None: no setting declared (every tool, as before settings existed)."""
    names = list(dict.fromkeys(names))
    if access is None or (access.tools and access.views is None):
        return tuple(names)
    if access.views is not None:
        return tuple(n for n in names if n in VIEW_TOOLS)
    return ()


def served_tool_names(server: Any) -> list[str]:
    """The names of the tools an MCP SDK ``FastMCP`` server serves, in its order."""
    return [tool.name for tool in server._tool_manager.list_tools()]


def note_tools(notes: MutableMapping[str, Any], offered: Sequence[str]) -> None:
    """Add the MCP tools served to a sample's access evidence (``notes["access"]``)."""
    held = notes.get(ACCESS_NOTE)
    if isinstance(held, dict):
        held["tools"] = list(offered)


def tool_refusal(access: Access | None, tool: str) -> str | None:
    """Why ``tool`` may not be called under ``access`` (a call that reached it anyway), or None."""
    if tool in offered_tools(access, [tool]):
        return None
    assert access is not None
    return f"tool {tool!r} is not served under access setting {access.name} ({access.words()})"


# --------------------------------------------------------------------------- the sandbox


def shell_masks(extra_dirs: Sequence[str] = ()) -> list[str]:
    """The shells to mask in a sandbox without code: each real file of :data:`SHELLS` found in the
    system's program folders and ``extra_dirs`` (a tool environment's ``bin``)."""
    found: list[str] = []
    for folder in (*_SHELL_DIRS, *extra_dirs):
        for name in SHELLS:
            path = os.path.join(folder, name)
            if os.path.lexists(path):
                real = os.path.realpath(path)
                if os.path.isfile(real) and real not in found:
                    found.append(real)
                if path != real and os.path.islink(path) and not os.path.islink(folder) and path not in found:
                    found.append(path)  # the link itself too: binding over its target hides both
    return found


def command_words(command: str) -> list[str]:
    """``command`` as the words of a program run without a shell; :class:`AccessError` for shell
    syntax (a pipe, a redirection, a list) or an empty line. Leading ``NAME=value`` words stay:
    the launcher sets them."""
    import shlex

    try:
        words = shlex.split(command)
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as exc:
        raise AccessError(f"the command cannot be split into words ({exc})") from None
    if not words:
        raise AccessError("the command is empty")
    bad = [t for t in tokens if _SHELL_SYNTAX.match(t)] + [w for w in words if "`" in w or "$" in w]
    if bad:
        raise AccessError(
            f"under access setting tools the command runs without a shell, and it holds shell syntax {bad[0]!r}; "
            "give a program and its arguments"
        )
    return words


def subject_problem(access: Access, *, sandboxed: bool, mcp: bool, command: str | None) -> str | None:
    """Why a subject cannot be held to ``access`` (a usage error before anything runs), or None.
    ``command``: the command line of a command subject (None: a subject the harness does not run
    as a command, which no setting can hold but ``files+code``, what it has anyway)."""
    if command is None:
        if access.name == "files+code":
            return None
        return (
            f"--access {access.name} is enforced by the sandbox around a command: this subject is not one "
            "(a python: function, reference, baseline or nop sees the arrays in memory); use files+code or a command: subject"
        )
    if not sandboxed and access.name != "files+code":
        return f"--access {access.name} is enforced by the sandbox; drop --no-sandbox"
    if access.tools and access.views is None and not mcp:
        return f"--access {access.name} serves the case's MCP tools: add --subject-mcp"
    if not access.tools and mcp:
        return f"--access {access.name} serves no MCP tools; drop --subject-mcp or use --access files+code+tools"
    if not access.code:
        try:
            command_words(command)
        except AccessError as exc:
            return str(exc)
    return None


# --------------------------------------------------------------------------- what a case is meaningful under


def declared(case: Case) -> tuple[str, ...] | None:
    """The settings ``case`` declares (``meta["access"]``), or None when it declares none."""
    raw = case.meta.get(ACCESS_META)
    if raw is None:
        return None
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        raise AccessError(f"case {case.label}: meta['access'] must be a list of {', '.join(SETTINGS)}, got {raw!r}")
    out: list[str] = []
    for item in raw:
        if item == "views-N":
            out.append(item)
            continue
        out.append(parse_access(item).name)
    return tuple(dict.fromkeys(out))


def _why_not(case: Case, access: Access) -> str | None:
    listed = declared(case)
    if listed is not None and access.name not in listed and not (access.views is not None and "views-N" in listed):
        return f"case {case.label} declares it is meaningful under {', '.join(listed)}, not {access.name}"
    if not access.files and case.meta.get("workspace_files"):
        return f"case {case.label} hands the subject files/ on disk, which access setting {access.name} withholds"
    if access.views is not None:
        if any(layer.presentation == "tensor" for layer in case.layers):
            return f"case {case.label} presents a tensor on the data plane; access setting {access.name} has no fixed views of it"
        if not any(layer.kind in ("image", "labels") for layer in case.layers):
            return f"case {case.label} has no image or labels input to render; access setting {access.name} would show nothing"
    return None


def refusal(case: Case, access: Access | None) -> str | None:
    """Why a sample of ``case`` is skipped under ``access`` (None: no setting declared, or meaningful)."""
    if access is None:
        return None
    why = _why_not(case, access)
    return None if why is None else f"not meaningful under --access {access.name}: {why}"


def evidence_record(access: Access, *, enforced: Mapping[str, Any]) -> dict[str, Any]:
    """The setting as a run records it: its name, what it gives, and how it was enforced."""
    return {"setting": access.name, "gives": access.words(), **dict(enforced)}


__all__ = [
    "ACCESS_META",
    "ACCESS_NOTE",
    "MAX_VIEWS",
    "SETTINGS",
    "SHELLS",
    "VIEW_TOOLS",
    "Access",
    "AccessError",
    "command_words",
    "declared",
    "default_access",
    "evidence_record",
    "note_tools",
    "offered_tools",
    "parse_access",
    "refusal",
    "served_tool_names",
    "shell_masks",
    "subject_problem",
    "tool_refusal",
]
