"""Skill bundles: cases authored as files, their classes, claims and coverage.

A bundle is one skill's folder of authored cases (``evals/fixtures/<case>/``) and claims
(``evals.json`` or the legacy ``evals/risk-map.md``). :func:`load_bundle` turns it into
:class:`imagebench.case.model.Case` objects that run exactly like the built-in ones
(``imagebench run --bundle DIR``); :func:`coverage_table` joins its claims with graded runs.
See ``docs/bundles.md``.

Names load on first use so that ``imagebench --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)


if TYPE_CHECKING:  # pragma: no cover
    from imagebench.bundle.casefile import CaseFile, CaseFolder, scaffold_case
    from imagebench.bundle.claims import (
        Claim,
        Claims,
        ProofSpec,
        read_claims,
        risk_band,
    )
    from imagebench.bundle.coverage import Row, coverage_report, coverage_table
    from imagebench.bundle.grading import TRACE_NAME, skill_activated
    from imagebench.bundle.load import (
        Bundle,
        BundleError,
        bundle_cases,
        load_bundle,
        scan_bundle,
    )
