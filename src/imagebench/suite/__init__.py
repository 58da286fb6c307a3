"""Pinned suites, cohorts, seeded sampling and honest comparison of runs.

- :mod:`~imagebench.suite.model`: :class:`SuiteManifest` (``suites/<id>.json``), :class:`SuiteRef`,
  aliases and their resolution;
- :mod:`~imagebench.suite.resolve`: :func:`pin_suite`, :func:`verify_suite` (every failure, by role);
- :mod:`~imagebench.suite.sampling`: :class:`AllTasks`, :class:`FirstTasks`, :class:`SeededSample`,
  :class:`Cohort`, :class:`Assignment`, :func:`assign`, :func:`verify_assignment`,
  :func:`assignment_mismatches`;
- :mod:`~imagebench.suite.record`: what a suite run records in ``run.json``;
- :mod:`~imagebench.suite.compare`: conditions C1-C4 and the pairing of replicates, over
  :mod:`~imagebench.suite.statistics` (McNemar's exact test, paired bootstrap) and the result's
  models in :mod:`~imagebench.suite.comparison`;

Case fingerprints live in :mod:`imagebench.runs.fingerprint`. See ``docs/suites.md``.
Names load on first use so that ``imagebench --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)


if TYPE_CHECKING:  # pragma: no cover
    from imagebench.suite.compare import compare_runs
    from imagebench.suite.comparison import Comparison
    from imagebench.suite.model import (
        AliasFile,
        SuiteError,
        SuiteManifest,
        SuiteMember,
        SuiteRef,
        load_aliases,
        load_suite,
        resolve_revision,
        structural_problems,
        suite_fingerprint,
        write_suite,
    )
    from imagebench.suite.record import Conditions, SuiteRunInfo
    from imagebench.suite.resolve import (
        CaseSource,
        Problem,
        case_source,
        pin_suite,
        verify_suite,
    )
    from imagebench.suite.sampling import (
        AllTasks,
        Assignment,
        AssignmentError,
        Cohort,
        FirstTasks,
        SeededSample,
        assign,
        assignment_mismatches,
        benchmark_cohort,
        parse_policy,
        verify_assignment,
    )
    from imagebench.suite.statistics import mcnemar_exact, paired_bootstrap
