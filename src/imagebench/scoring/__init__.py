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

from imagebench._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "MARKER": "answer",
    "parse_answer": "answer",
    "final_json_message": "answer",
    "COMPARATORS": "comparators",
    "CANONICAL_FORMS": "comparators",
    "EXAMPLES": "comparators",
    "ContractError": "comparators",
    "Example": "comparators",
    "REGISTRY": "comparators",
    "exemplar_answer": "comparators",
    "comparator": "registry",
    "FieldResult": "comparators",
    "pack_region": "comparators",
    "unpack_region": "comparators",
    "CONTRACTS": "contract",
    "AnswerScore": "contract",
    "Blocked": "contract",
    "FieldRule": "contract",
    "ScorerSpec": "contract",
    "TaskContract": "contract",
    "load_contract": "contract",
    "score_answer": "contract",
    "structured_verifier": "contract",
    "score_pinned": "contract",
    "scorer_problem": "contract",
    "run_selftest": "selftest",
    "SelftestCheck": "selftest",
    "exemplar": "contract",
    "Aggregate": "aggregates",
    "aggregate": "aggregates",
    "pass_at_k": "aggregates",
    "pass_hat_k": "aggregates",
    "mean_at_k": "aggregates",
    "bootstrap_ci": "aggregates",
    "cluster_standard_error": "aggregates",
    "ScorerManifest": "manifest",
    "ScorerManifestError": "manifest",
    "write_scorer_manifest": "manifest",
    "check_scorer_manifest": "manifest",
    "current_manifest": "manifest",
    "packaged_manifest_path": "manifest",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


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
