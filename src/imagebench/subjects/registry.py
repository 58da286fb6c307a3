"""The registry of subject kinds: parsing a spec, and asking any subject what its kind knows.

:func:`subject_kind` registers a :class:`~imagebench.subjects.base.SubjectKind` (as inspect_ai
registers a sandbox environment); the built-in kinds register when their modules load, in the
order :data:`BUILTIN_KINDS` lists them, and a kind defined anywhere else (a test's toy kind, a
plugin) registers when its module is imported. :func:`parse_subject` asks each kind in turn
whether a spec is its form. The functions below ask a subject object; none reads a spec's prefix.
"""

from __future__ import annotations

import hashlib
import importlib
from typing import TYPE_CHECKING, Any, TypeVar

from imagebench.subjects.base import AgentOptions, Confinement, SubjectError, SubjectKind, check_subject_name

if TYPE_CHECKING:
    from imagebench.sandbox.policy import SandboxPolicy
    from imagebench.subjects.base import Subject

#: the modules of the built-in kinds, in the order a spec is tried against them
BUILTIN_KINDS = (
    "reference", "nop", "baseline", "python", "command",
    "agents.claude", "agents.codex", "agents.gemini", "agents.generic",
)  # fmt: skip
# The command-line flag that sets each parse_subject option.
_FLAG_NAMES = {"isolate": "--isolate", "mcp": "--subject-mcp", "agent": "--retries/--subject-home"}
_KINDS: list[type[SubjectKind]] = []
_loaded = False
K = TypeVar("K", bound=type[SubjectKind])


def subject_kind(cls: K) -> K:
    """Register ``cls`` as a subject kind (a class decorator); registering twice is once."""
    if cls not in _KINDS:
        _KINDS.append(cls)
    return cls


def kinds() -> tuple[type[SubjectKind], ...]:
    """Every registered kind, the built-in ones first."""
    global _loaded
    if not _loaded:
        for name in BUILTIN_KINDS:
            importlib.import_module(f"imagebench.subjects.{name}")
        _loaded = True
    order = {f"imagebench.subjects.{name}": i for i, name in enumerate(BUILTIN_KINDS)}
    builtin = sorted((k for k in _KINDS if k.__module__ in order), key=lambda k: order[k.__module__])
    return (*builtin, *(k for k in _KINDS if k not in builtin))


def subject_forms() -> tuple[tuple[str, str], ...]:
    """Every kind's spec forms with what each does (``imagebench run --help`` lists them)."""
    return tuple(form for kind in kinds() for form in kind.forms)


def valid_forms() -> str:
    forms = subject_forms()
    width = max(len(form) for form, _ in forms)
    return "\n".join(f"  {form.ljust(width)}  {about}" for form, about in forms)


def kind_of_spec(spec: str) -> type[SubjectKind] | None:
    return next((k for k in kinds() if k.matches(spec.strip())), None)


def parse_subject(
    spec: str,
    *,
    sandbox: SandboxPolicy | None = None,
    isolate: bool = False,
    mcp: bool = False,
    name: str | None = None,
    agent: AgentOptions | None = None,
) -> Subject:
    """Turn a command-line spec into a subject; an invalid spec raises SubjectError listing the valid forms.

    ``sandbox`` is how a ``command:`` subject (or an isolated ``python:`` one) is confined
    (default: :class:`SandboxPolicy()`, a bubblewrap sandbox without network); a command is
    refused here, saying how to install bubblewrap, when that sandbox cannot start on this
    machine. ``isolate`` runs a ``python:`` subject's function in a sandboxed child process.
    ``mcp`` serves a ``command:`` subject the case's tools over MCP while it works (``--subject-mcp``).
    ``name`` is its display name (``--subject-name``: the run's subject folder and ``run.json``'s
    subject; :func:`~imagebench.subjects.base.check_subject_name`), instead of its kind's own.
    ``agent`` is what an agent CLI subject gets beyond its sandbox (``--retries``, ``--subject-home``).
    """
    spec = spec.strip()
    kind = kind_of_spec(spec)
    for option, given in (("isolate", isolate), ("mcp", mcp), ("agent", bool(agent))):
        if given and (kind is None or option not in kind.flags):
            takers = " or ".join(k.prefix for k in kinds() if option in k.flags)
            raise SubjectError(f"subject {spec!r}: {_FLAG_NAMES[option]} applies to {takers} subjects only")
    if kind is None:
        raise SubjectError(f"unknown subject {spec!r}; valid subjects:\n{valid_forms()}")
    if name is not None:
        check_subject_name(name)  # before the kind parses: a bad name is refused without importing anything
    if "agent" in kind.flags:
        subject = kind.parse(spec, sandbox=sandbox, isolate=isolate, mcp=mcp, agent=agent or AgentOptions())  # type: ignore[call-arg]
    else:
        subject = kind.parse(spec, sandbox=sandbox, isolate=isolate, mcp=mcp)
    return subject.named(name) if name is not None else subject


# --------------------------------------------------------------------------- asking a subject


def spec_of(subject: object) -> str:
    """The spec string that rebuilds ``subject``; SubjectError for one no spec describes."""
    if isinstance(subject, SubjectKind):
        return subject.spec()
    name = getattr(subject, "name", type(subject).__name__)
    raise SubjectError(f"subject {name!r} ({type(subject).__name__}) has no spec string")


def kind_module(subject: object) -> str | None:
    """The module whose import registers ``subject``'s kind (a worker imports it before parsing)."""
    return type(subject).__module__ if isinstance(subject, SubjectKind) else None


def subject_options(subject: object) -> dict[str, Any]:
    """The keyword arguments of :func:`parse_subject` that, with the subject's spec string,
    rebuild ``subject`` as confined and as named as it is (a dask worker, ``--resume``)."""
    if not isinstance(subject, SubjectKind):
        return {}
    options = subject.options()
    return {**options, "name": subject.given_name} if subject.given_name is not None else options


def runs_out_of_process(subject: object) -> bool:
    """Whether ``subject`` works its unit in a child process (a command, an isolated function):
    ``--workers`` then drives units from threads rather than worker processes."""
    return bool(getattr(subject, "out_of_process", False))


def confinement_of(subject: object) -> Confinement:
    """How ``subject`` is confined, as a run records it: ``bubblewrap``, ``none`` (a command run
    with --no-sandbox, an agent served unconfined) or ``in-process`` (trusted code)."""
    kind = getattr(subject, "sandbox_kind", None)
    return kind if kind in ("bubblewrap", "none") else "in-process"


def limits_of(subject: object) -> dict[str, int | None] | None:
    """What a confined ``subject`` may use, as a run records it (None: not confined)."""
    return subject.limits if isinstance(subject, SubjectKind) else None


def env_pass_of(subject: object) -> tuple[str, ...]:
    return subject.env_pass if isinstance(subject, SubjectKind) else ()


def is_trusted(subject: object) -> bool:
    """Whether ``subject`` is trusted code (:attr:`SubjectKind.trusted`). Any other object is
    trusted when it runs in the harness's own process (a seal could not keep a secret from it)."""
    if isinstance(subject, SubjectKind):
        return bool(subject.trusted)
    return confinement_of(subject) == "in-process"


def execution_of(subject: object) -> dict[str, Any]:
    """The conditions ``subject`` ran under, as a run records them and ``compare`` checks them:
    how it was confined (``sandbox``), whether it had the network, its limits, the names of the host
    variables passed to it, whether it was an isolated function or reached through MCP, and the
    tool environment it ran in (``--subject-env``), and its access setting with how it was enforced."""
    options = subject_options(subject)
    policy = options.get("sandbox")
    return {
        "sandbox": confinement_of(subject),
        "network": bool(policy.network) if policy is not None else None,
        "limits": limits_of(subject),
        "env_pass": sorted(env_pass_of(subject)),
        "isolate": bool(options.get("isolate")),
        "mcp": bool(options.get("mcp")) or getattr(subject, "mcp", None) is True or _served(subject),
        "tool_env": _tool_env(policy.env_prefix if policy is not None else None),
        "access": access_of(subject),
    }


def access_of(subject: object, *, mounts: bool = False) -> dict[str, Any] | None:
    """The access setting ``subject`` works under and how it is enforced
    (:func:`imagebench.subjects.access.enforcement`); None for a subject without a sandbox policy
    (in process, it sees the arrays: what ``files+code`` gives)."""
    from imagebench.subjects.access import enforcement

    options = subject_options(subject)
    if getattr(subject, "prefix", "") != "command:" and not hasattr(subject, "access"):
        return None
    return enforcement(options.get("sandbox"), mcp=bool(options.get("mcp")), mounts=mounts)


def _served(subject: object) -> bool:
    return getattr(subject, "prefix", "") == "mcp"


def _tool_env(prefix: Any) -> str | None:
    """The tool environment a command ran in (``--subject-env``), by its folder's name and the
    digest of its ``pyvenv.cfg`` (its Python); None: the harness's own interpreter."""
    if prefix is None:
        return None
    import hashlib
    from pathlib import Path

    cfg = Path(prefix) / "pyvenv.cfg"
    try:
        tag = hashlib.sha256(cfg.read_bytes()).hexdigest()[:16]
    except OSError:
        tag = "no pyvenv.cfg"
    return f"{Path(prefix).name} ({tag})"


def options_record(subject: object) -> dict[str, Any]:
    """:func:`subject_options` as JSON, for ``run.json``."""
    options = subject_options(subject)
    out: dict[str, Any] = {}
    if "sandbox" in options:
        out = {"sandbox": options["sandbox"].to_record(), "isolate": bool(options.get("isolate"))}
    if options.get("mcp"):
        out["mcp"] = True
    if options.get("agent"):
        out["agent"] = options["agent"].to_record()
    if options.get("name") is not None:
        out["name"] = options["name"]
    return out


def options_from_record(raw: object) -> dict[str, Any]:
    """What :func:`options_record` wrote, as keyword arguments; ValueError naming the bad field."""
    from imagebench.sandbox.policy import SandboxPolicy

    if raw in (None, {}):
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"expected an object with 'sandbox' and 'isolate', got {type(raw).__name__}")
    named: dict[str, Any] = {}
    if "name" in raw:
        try:
            named["name"] = check_subject_name(raw["name"])
        except SubjectError as exc:
            raise ValueError(f"field 'name': {exc}") from None
        if set(raw) == {"name"}:
            return named  # a named subject of a kind without confinement (reference, nop, in-process python)
    try:
        policy = SandboxPolicy.from_record(raw.get("sandbox"))
    except ValueError as exc:
        raise ValueError(f"field 'sandbox': {exc}") from None
    isolate = raw.get("isolate", False)
    if not isinstance(isolate, bool):
        raise ValueError(f"field 'isolate' is {isolate!r}, expected true or false")
    mcp = raw.get("mcp", False)
    if not isinstance(mcp, bool):
        raise ValueError(f"field 'mcp' is {mcp!r}, expected true or false")
    out: dict[str, Any] = {"sandbox": policy}
    if raw.get("agent") is not None:
        try:
            out["agent"] = AgentOptions.from_record(raw["agent"])
        except ValueError as exc:
            raise ValueError(f"field 'agent': {exc}") from None
    if isolate:
        out["isolate"] = True
    if mcp:
        out["mcp"] = True
    return {**out, **named}


def describe(subject: object) -> dict[str, Any]:
    """A subject as a receipt records it: never a command's arguments, environment or paths.
    Accepts a spec string or a subject object."""
    if isinstance(subject, str):
        spec = subject.strip()
        kind = kind_of_spec(spec)
        if kind is None:
            return {"form": "other", "spec_sha256": hashlib.sha256(spec.encode("utf-8")).hexdigest()}
        return kind.describe_spec(spec)
    if isinstance(subject, SubjectKind):
        return subject.describe()
    name = getattr(subject, "name", None)
    if isinstance(name, str):
        return {"form": "other", "name": name}
    raise SubjectError(f"cannot describe subject {type(subject).__name__}: give its spec string")
