"""The fixture vocabulary: what a run is given and what it has to recover.

A *fixture* is pixels (``data``) plus the held-out answer (``truth``), both read-only
(see :mod:`imagebench.frozen`). A subject works on the data and leaves an *attempt*; a
verifier turns fixture and attempt into an *outcome* made of *metrics*, each with a limit.
Every leaving a case asks for is required: a metric the subject's leavings cannot support
fails the sample, and only one that the fixture's truth cannot support is neutral.

Nothing in this module knows what drift or a nucleus is, and it imports nothing
heavier than numpy, so every layer above can depend on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

Kind = Literal["synthetic", "curated"]

#: Why a metric has no value. ``absent``: the subject left nothing under a name the case asks
#: for; ``unusable``: it left something that cannot be scored (wrong shape or type, unreadable,
#: out of range). Both fail the sample. ``truth``: this fixture's truth cannot support the
#: measurement, which is no fault of the subject's and neither passes nor fails.
Because = Literal["absent", "unusable", "truth"]
BECAUSE: tuple[str, ...] = Because.__args__  # type: ignore[attr-defined]

FIXTURES_ENV = "IMAGEBENCH_FIXTURES"


class FixtureError(ValueError):
    """A fixture is malformed or cannot be built (names the file and field when there is one)."""


# --------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True)
class Fixture:
    """Pixels a subject may see (``data``) and the answer it may not (``truth``).

    ``data``, ``truth`` and ``tolerance`` are frozen on construction (read-only mappings, arrays
    copied onto immutable memory), so neither a subject that finds the fixture nor a verifier by
    mistake can change what later samples are scored against.
    """

    provenance: str
    data: Mapping[str, Any]
    truth: Mapping[str, Any]
    tolerance: Mapping[str, float] = field(default_factory=dict)
    about: str = ""
    citation: str | None = None
    kind: Kind = "synthetic"
    skill_id: str = ""
    case_id: str = ""

    def __post_init__(self) -> None:
        from imagebench.frozen import freeze

        shared = sorted(set(self.data) & set(self.truth))
        if shared:
            raise FixtureError(
                f"fixture {self.skill_id or '?'}/{self.case_id or '?'}: key(s) {shared} appear in "
                "both data and truth; truth must never be reachable as data"
            )
        if self.kind not in ("synthetic", "curated"):
            raise FixtureError(f"fixture kind must be 'synthetic' or 'curated', got {self.kind!r}")
        for name in ("data", "truth", "tolerance"):
            object.__setattr__(self, name, freeze(getattr(self, name)))

    @property
    def label(self) -> str:
        return f"{self.skill_id}/{self.case_id}"


@dataclass
class Attempt:
    """What a subject left behind: raw leavings by name, plus notes about how they were collected."""

    subject: str
    arrays: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)


class WhyNot(str):
    """Why a leaving could not be read: a plain message that also says whether anything was left.

    ``read_array`` and ``read_scalar`` return one; :meth:`Metric.missing` takes its ``because``
    from it, so a verifier that passes the reason on needs no second argument.
    """

    because: Because

    def __new__(cls, message: str, because: Because = "unusable") -> WhyNot:
        self = super().__new__(cls, message)
        self.because = because
        return self


@dataclass(frozen=True)
class Metric:
    """One measurement with its limit. It passes when ``value <= limit``.

    ``value is None`` means the measurement is unavailable for this run; ``unavailable`` then
    says why and ``unavailable_because`` whose fault that is (see :data:`Because`). An
    unavailable metric never passes; one unavailable because of the subject also fails the
    outcome, one unavailable because of the truth leaves the outcome to its other metrics.
    When ``unavailable_because`` is not given it comes from a :class:`WhyNot` reason, else it is
    ``unusable``: a verifier has to say ``"truth"`` to be excused.
    """

    name: str
    value: float | None
    limit: float
    unit: str = ""
    unavailable: str | None = None
    unavailable_because: Because | None = None

    def __post_init__(self) -> None:
        if self.value is not None:
            v = float(self.value)
            if math.isnan(v):
                object.__setattr__(self, "value", None)
                object.__setattr__(self, "unavailable", self.unavailable or "value is NaN")
            else:
                object.__setattr__(self, "value", v)
        if self.value is None:
            because = self.unavailable_because or getattr(self.unavailable, "because", None) or "unusable"
            if because not in BECAUSE:
                raise ValueError(f"metric {self.name!r}: unavailable_because must be one of {BECAUSE}, got {because!r}")
            object.__setattr__(self, "unavailable", str(self.unavailable or "not computed"))
            object.__setattr__(self, "unavailable_because", because)
        else:
            object.__setattr__(self, "unavailable", None)
            object.__setattr__(self, "unavailable_because", None)

    @classmethod
    def missing(
        cls, name: str, limit: float, reason: str, unit: str = "", *, because: Because | None = None
    ) -> Metric:
        """An unavailable metric; ``because`` defaults to the reason's (a :class:`WhyNot`), else ``unusable``."""
        return cls(name=name, value=None, limit=limit, unit=unit, unavailable=reason, unavailable_because=because)

    @property
    def scored(self) -> bool:
        return self.value is not None

    @property
    def passed(self) -> bool:
        return self.value is not None and self.value <= self.limit

    @property
    def excused(self) -> bool:
        """Unavailable because the fixture's truth cannot support it: neither a pass nor a fail."""
        return self.value is None and self.unavailable_because == "truth"

    @property
    def failed(self) -> bool:
        """Scored outside its limit, or unavailable through the subject's leavings."""
        return not self.passed and not self.excused

    @property
    def verdict(self) -> Literal["pass", "fail", "unavailable"]:
        if self.value is None:
            return "unavailable"
        return "pass" if self.passed else "fail"


@dataclass
class Outcome:
    """A verifier's answer: metrics, free-form detail and images worth looking at.

    Every image in ``artifacts`` is meant to be compared with the others, so they are
    written with one shared contrast range.
    """

    fixture: Fixture
    attempt: Attempt
    metrics: list[Metric]
    detail: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)

    @property
    def scored(self) -> list[Metric]:
        return [m for m in self.metrics if m.scored]

    @property
    def passed(self) -> bool:
        """Something was scored and no metric failed (an excused one neither passes nor fails)."""
        return bool(self.scored) and not any(m.failed for m in self.metrics) and not self.detail.get("blocked")

    @property
    def status(self) -> str:
        """How this outcome ends, as a run status (see ``imagebench.records.Status``).

        In order: ``blocked`` when the verifier says so in ``detail["blocked"]`` (a structured
        case whose scoring contract is missing or ineligible); ``ok`` when passed;
        ``wrong-answer`` when a scored metric is outside its limit; ``no-result`` when the
        subject left nothing at all (no leaving, no final message); ``unscorable-result`` when a
        leaving it left cannot be scored; ``no-result`` when a leaving the case asks for is
        absent; else (only the truth kept anything from being scored) ``unscorable-result``.
        """
        if self.detail.get("blocked"):
            return "blocked"
        if self.passed:
            return "ok"
        if any(m.scored and not m.passed for m in self.metrics):
            return "wrong-answer"
        if not self.attempt.arrays and not self.attempt.notes.get("final_message"):
            return "no-result"
        because = {m.unavailable_because for m in self.metrics if m.value is None}
        if "unusable" in because:
            return "unscorable-result"
        if "absent" in because:
            return "no-result"
        return "unscorable-result"


# --------------------------------------------------------------------------- reading leavings

_MISSING = object()


def _lookup(attempt: Attempt, name: str) -> tuple[Any, WhyNot | None]:
    if name not in attempt.arrays:
        notes = attempt.notes if isinstance(attempt.notes, dict) else {}
        why_not = notes.get("why_not")
        why = why_not.get(name) if isinstance(why_not, dict) else None
        unreadable = notes.get("unreadable")
        # The session lists a name the subject did leave but nobody could read (an outputs file
        # that is not an array, say): that is a wrong leaving, not a missing one.
        left = isinstance(unreadable, (list, tuple, set)) and name in unreadable
        message = str(why) if why else f"the subject left nothing named {name!r}"
        return _MISSING, WhyNot(message, "unusable" if left else "absent")
    return attempt.arrays[name], None


def read_array(
    attempt: Attempt,
    name: str,
    *,
    ndim: int | None = None,
    shape: tuple[int, ...] | None = None,
    dtype: Any = None,
) -> tuple[np.ndarray | None, WhyNot | None]:
    """Read leaving ``name`` as an ndarray, checked; return ``(array, None)`` or ``(None, why)``.

    ``dtype`` may be a numpy dtype (the array is cast when the cast is safe, e.g. a label
    image of int32 read as int64) or a kind character such as ``"i"``, ``"u"``, ``"f"``, ``"b"``
    or a string of several (``"iu"``). Never raises.
    """
    import numpy as np

    try:
        value, why = _lookup(attempt, name)
        if value is _MISSING:
            return None, why
        if value is None:
            return None, WhyNot(f"{name!r} is None")
        if isinstance(value, (str, bytes, dict)):
            return None, WhyNot(f"{name!r} is a {type(value).__name__}, expected an array")
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufc":
            return None, WhyNot(f"{name!r} is not a numeric array (dtype {arr.dtype})")
        if ndim is not None and arr.ndim != ndim:
            return None, WhyNot(f"{name!r} has {arr.ndim} dimension(s), expected {ndim}")
        if shape is not None and tuple(arr.shape) != tuple(shape):
            return None, WhyNot(f"{name!r} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
        if dtype is not None:
            if isinstance(dtype, str) and all(c in "biufc" for c in dtype) and len(dtype) <= 5:
                if arr.dtype.kind not in dtype:
                    return None, WhyNot(f"{name!r} has dtype {arr.dtype}, expected kind {dtype!r}")
            else:
                want = np.dtype(dtype)
                if arr.dtype != want:
                    if not np.can_cast(arr.dtype, want, casting="same_kind"):
                        return None, WhyNot(f"{name!r} has dtype {arr.dtype}, expected {want}")
                    cast = arr.astype(want)
                    # same_kind allows int64 -> int8: refuse a cast that would wrap values around
                    if want.kind in "iu" and not np.array_equal(cast, arr):
                        return None, WhyNot(f"{name!r} has values that do not fit {want} (dtype {arr.dtype})")
                    arr = cast
        if arr.dtype.kind in "fc" and arr.size and not np.all(np.isfinite(arr)):
            return None, WhyNot(f"{name!r} contains NaN or infinite values")
        return arr, None
    except Exception as exc:  # a leaving that cannot even be converted
        return None, WhyNot(f"{name!r} could not be read as an array: {type(exc).__name__}: {exc}")


def read_scalar(
    attempt: Attempt, name: str, *, kind: type = float
) -> tuple[float | int | bool | None, WhyNot | None]:
    """Read leaving ``name`` as one number (``kind`` float, int or bool). Never raises.

    A bool is never accepted as a number, a string is never parsed, and NaN/inf are refused.
    """
    import numpy as np

    try:
        value, why = _lookup(attempt, name)
        if value is _MISSING:
            return None, why
        if isinstance(value, np.ndarray):
            if value.size != 1:
                return None, WhyNot(f"{name!r} is an array of shape {value.shape}, expected one number")
            value = value.reshape(()).item()
        elif isinstance(value, np.generic):
            value = value.item()
        if kind is bool:
            if isinstance(value, bool):
                return value, None
            return None, WhyNot(f"{name!r} is {type(value).__name__}, expected a boolean")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, WhyNot(f"{name!r} is {type(value).__name__}, expected a number")
        if kind is int:
            if isinstance(value, float):
                if not value.is_integer():
                    return None, WhyNot(f"{name!r} is {value!r}, expected an integer")
                value = int(value)
            return int(value), None
        v = float(value)
        if not math.isfinite(v):
            return None, WhyNot(f"{name!r} is {v!r}, expected a finite number")
        return v, None
    except Exception as exc:
        return None, WhyNot(f"{name!r} could not be read as a number: {type(exc).__name__}: {exc}")
