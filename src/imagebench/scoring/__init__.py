"""Structured answers and fail-closed scoring.

- :mod:`~imagebench.scoring.answer`: :func:`parse_answer` (one JSON object, or a final
  ``IMAGEBENCH_FINAL_JSON:`` line; nothing read out of prose);
- :mod:`~imagebench.scoring.comparators`: the seventeen comparators and :data:`REGISTRY`, filled
  by the :func:`~imagebench.scoring.registry.comparator` decorator (:data:`COMPARATORS`,
  :data:`EXAMPLES`, ... are views of it); their canonical forms are in
  :mod:`~imagebench.scoring.canonical`;
- :mod:`~imagebench.scoring.contract`: :class:`TaskContract` (its models in
  :mod:`~imagebench.scoring.contract_schema`), :func:`score_answer`, :func:`score_pinned` (only
  with the scorer the manifest pins) and :func:`structured_verifier` (the bridge to the runner);
- :mod:`~imagebench.scoring.aggregates`: :func:`pass_at_k`, :func:`pass_hat_k`, :func:`aggregate`;
- :mod:`~imagebench.scoring.manifest`: ``scorer_manifest.json`` and its checks;
- :mod:`~imagebench.scoring.selftest`: :func:`run_selftest`, ground truth fed back (never a result);

Names load on first use, so ``imagebench --help`` does not import pydantic or numpy here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)


if TYPE_CHECKING:  # pragma: no cover
    from imagebench.scoring.aggregates import (
        Aggregate,
        aggregate,
        bootstrap_ci,
        cluster_standard_error,
        mean_at_k,
        pass_at_k,
        pass_hat_k,
    )
    from imagebench.scoring.answer import MARKER, final_json_message, parse_answer
    from imagebench.scoring.comparators import (
        CANONICAL_FORMS,
        COMPARATORS,
        EXAMPLES,
        REGISTRY,
        ContractError,
        Example,
        FieldResult,
        exemplar_answer,
        pack_region,
        unpack_region,
    )
    from imagebench.scoring.contract import (
        CONTRACTS,
        AnswerScore,
        Blocked,
        FieldRule,
        ScorerSpec,
        TaskContract,
        exemplar,
        load_contract,
        score_answer,
        score_pinned,
        scorer_problem,
        structured_verifier,
    )
    from imagebench.scoring.manifest import (
        ScorerManifest,
        ScorerManifestError,
        check_scorer_manifest,
        current_manifest,
        packaged_manifest_path,
        write_scorer_manifest,
    )
    from imagebench.scoring.registry import comparator
    from imagebench.scoring.selftest import SelftestCheck, run_selftest
