"""Who works a case: the subjects a run can put in front of a fixture.

:func:`parse_subject` turns a command-line spec into a subject; each spec form is a *kind*, one
class in one module, that owns its grammar, its spec string, its confinement, its run record
and its receipt entry (:class:`~imagebench.subjects.base.SubjectKind`; registered with
:func:`~imagebench.subjects.registry.subject_kind`):

- ``reference`` (:mod:`.reference`): the case's own reference solution;
- ``nop`` (:mod:`.nop`): does nothing (the floor: it never passes);
- ``baseline`` (:mod:`.baseline`): the case's naive baseline, which must fail;
- ``python:package.module:function`` (:mod:`.python`): ``function(session)`` in this process,
  or (``--isolate``) in a sandboxed child that the harness never imports it in;
- ``command:<shell command>`` (:mod:`.command`): the command run with bash in a fresh workspace,
  inside a bubblewrap sandbox unless its :class:`~imagebench.sandbox.policy.SandboxPolicy` says
  otherwise; ``--subject-mcp`` serves it the case's tools over MCP.

:mod:`.registry` parses and asks a subject what its kind knows; :mod:`.identity` digests the code a
subject runs (what a run records of it, and what a resume checks); :mod:`.running` runs one turn
under its time limit; :mod:`.files` copies a bundle case's files for an in-process subject.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)

if TYPE_CHECKING:  # pragma: no cover
    from imagebench.sandbox.policy import unavailable_reason
    from imagebench.subjects.base import (
        RESERVED_NAMES,
        AgentOptions,
        Confinement,
        Subject,
        SubjectBudgetExceeded,
        SubjectError,
        SubjectHarnessError,
        SubjectInfraError,
        SubjectKind,
        SubjectResourceLimit,
        SubjectTimeout,
        UnitContext,
        check_subject_name,
    )
    from imagebench.subjects.baseline import BaselineSubject
    from imagebench.subjects.command import (
        ANSWER_LEAVING,
        BASE_ENV,
        WORKSPACE_ENV,
        CommandSubject,
        final_message,
    )
    from imagebench.subjects.files import readonly_files, remove_readonly_files
    from imagebench.subjects.identity import (
        MAX_TREE_BYTES,
        MAX_TREE_FILES,
        code_tree,
        identity_change,
        identity_of,
    )
    from imagebench.subjects.nop import NopSubject
    from imagebench.subjects.python import IsolatedRaised, PythonSubject
    from imagebench.subjects.reference import ReferenceSubject
    from imagebench.subjects.registry import (
        confinement_of,
        describe,
        env_pass_of,
        execution_of,
        is_trusted,
        kind_module,
        kinds,
        limits_of,
        options_from_record,
        options_record,
        parse_subject,
        runs_out_of_process,
        spec_of,
        subject_forms,
        subject_kind,
        subject_options,
        valid_forms,
    )
    from imagebench.subjects.running import SubjectRun, bind_subject, run_subject
