"""What confines a subject that runs in a child process (docs/integrity.md).

- :mod:`.policy`: the bubblewrap sandbox (``SandboxPolicy``, what is bound and masked, the plane bridge);
- :mod:`.limits`: the limits a confined subject runs under and how each is held, the uid it drops to;
- :mod:`.workspace`: the one place the harness reads or writes what a subject touched;
- :mod:`.process`: running one command: its workspace, its process tree, its output, its time;
- :mod:`.seccomp`: the filter that keeps a subject from making user namespaces;
- :mod:`.isolate`: a ``python:`` function run in a sandboxed child.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)

if TYPE_CHECKING:  # pragma: no cover
    from imagebench.sandbox.limits import Limits
    from imagebench.sandbox.policy import (
        WORKSPACE,
        SandboxKind,
        SandboxPolicy,
        SandboxUnavailable,
        check_policy,
        mount_args,
        shown_tree,
        unavailable_reason,
    )
    from imagebench.sandbox.workspace import Refused, Workspace
