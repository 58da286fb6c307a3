"""What a task contract may say: its models and the contracts this release grades.

These are the pieces both the scorer (:mod:`~imagebench.scoring.contract`) and the scorer
manifest (:mod:`~imagebench.scoring.manifest`, which pins the models' source as the contract
schema hash) need; they live here so that neither has to import the other for them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CONTRACT_SCHEMA_VERSION = 1

# The contracts this release grades, and what each allows.
CONTRACTS: dict[str, str] = {
    "deterministic_structured_v2_1": "a structured answer graded field by field with a declared rubric",
    "structured_deterministic_rubric_v1": "the generic form of the same field-by-field rubric",
    "extent_voxel_tolerance_v1": "a volumetric answer judged by membership of a voxel in a packed region",
}
VOXEL_CONTRACT = "extent_voxel_tolerance_v1"
VOXEL_COMPARATOR = "voxel_member_of_set"
# Contracts that name a judgement this release never makes automatically: always blocked.
NEVER_GRADED: dict[str, str] = {
    "llm_judge": "a language-model judge",
    "prose_judge": "a judgement of free prose",
    "mask_dice": "a mask overlap (Dice) score",
}
SCORER_CONFIG_KEYS = {"extra_fields": ("ignore", "mismatch")}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FieldRule(_Model):
    """How one answer field is judged: a comparator from the registry and its config."""

    comparator: str
    config: dict[str, Any] = Field(default_factory=dict)


class ScorerSpec(_Model):
    """The scoring contract by name, and its contract-level config (``extra_fields``)."""

    contract: str
    config: dict[str, Any] = Field(default_factory=dict)


class TaskContract(_Model):
    """What a structured answer must hold and how it is graded (``schema_version`` 1).

    ``ground_truth[field]`` is the literal expected value, or ``{"from_truth": key}`` (optionally
    with ``"path": [keys or indices]`` into that truth value), resolved from the fixture's truth
    when the answer is scored; a case's contract uses references only, so the case itself
    carries no answer. ``evaluation_eligible`` must be exactly ``true``; anything else blocks.
    """

    schema_version: Literal[1] = CONTRACT_SCHEMA_VERSION
    task_id: str = ""
    answer_schema: dict[str, FieldRule]
    ground_truth: dict[str, Any]
    scorer: ScorerSpec
    evaluation_eligible: Any = None

    def public_fields(self) -> dict[str, str]:
        """Field name -> comparator name: what may be shown to a subject (no gold, no config)."""
        return {name: rule.comparator for name, rule in self.answer_schema.items()}

