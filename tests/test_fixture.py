"""The fixture vocabulary: Fixture, Metric, Outcome, read_array/read_scalar, Procedural/OnDisk."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from imagebench.fixtures.fixture import (
    FIXTURES_ENV,
    Attempt,
    Fixture,
    FixtureError,
    Metric,
    Outcome,
    WhyNot,
    read_array,
    read_scalar,
)
from imagebench.fixtures.specs import FixtureSpec, OnDisk, Procedural


def _fixture(**kw) -> Fixture:
    base = dict(provenance="test", data={"image": np.zeros((4, 4))}, truth={"count": 3})
    base.update(kw)
    return Fixture(**base)


# --------------------------------------------------------------------------- Fixture


def test_a_key_in_both_data_and_truth_is_refused():
    with pytest.raises(FixtureError, match=r"\['image'\].*both data and truth"):
        _fixture(truth={"image": 1})


def test_unknown_kind_is_refused():
    with pytest.raises(FixtureError, match="kind"):
        _fixture(kind="invented")


def test_label_joins_namespace_and_case():
    assert _fixture(skill_id="seg", case_id="one").label == "seg/one"


def _gc_cheat(session) -> list[str]:
    """A dishonest ``python:`` solver: find every live Fixture through gc and zero its answer."""
    import gc

    refused: list[str] = []
    for obj in gc.get_objects():
        if not isinstance(obj, Fixture) or "count" not in obj.truth:
            continue
        attempts = {
            "truth['count'] = 0": lambda fx=obj: fx.truth.__setitem__("count", 0),
            "truth.update(count=0)": lambda fx=obj: fx.truth.update(count=0),
            "truth['labels'][...] = 0": lambda fx=obj: fx.truth["labels"].__setitem__(Ellipsis, 0),
            "labels.flags.writeable = True": lambda fx=obj: setattr(fx.truth["labels"].flags, "writeable", True),
            "labels.base writeable": lambda fx=obj: setattr(fx.truth["labels"].base.flags, "writeable", True),
            "data['image'][...] = 0": lambda fx=obj: fx.data["image"].__setitem__(Ellipsis, 0),
            "tolerance['f1_shortfall'] = 9": lambda fx=obj: fx.tolerance.__setitem__("f1_shortfall", 9.0),
        }
        for what, act in attempts.items():
            try:
                act()
            except Exception:
                refused.append(what)
    session.namespace["labels"] = np.zeros_like(session.namespace["nuclei"], dtype=np.int32)
    session.namespace["refused"] = refused
    return refused


def test_a_subject_that_finds_the_fixture_through_gc_cannot_change_its_truth():
    from helpers import build_case, solve_case

    from imagebench.cases import get_case

    case = get_case("segment-nuclei/synthetic-blobs")
    fx = build_case(case)
    labels_before, count_before = np.array(fx.truth["labels"]), fx.truth["count"]
    image_before = np.array(fx.data["image"])
    seen: list[str] = []
    outcome = solve_case(case, fx, lambda session: seen.extend(_gc_cheat(session)))
    assert len(seen) >= 7 and {"truth['count'] = 0", "truth['labels'][...] = 0"} <= set(seen)
    assert fx.truth["count"] == count_before and count_before > 0
    assert np.array_equal(fx.truth["labels"], labels_before) and labels_before.any()
    assert np.array_equal(fx.data["image"], image_before) and dict(fx.tolerance)["f1_shortfall"] < 1
    assert outcome.status == "wrong-answer" and not outcome.passed


def test_truth_data_and_tolerance_are_frozen_all_the_way_down():
    fx = _fixture(
        truth={"labels": np.ones((3, 3), np.int32), "shift": [1.5, -2.0], "nested": {"a": [np.zeros(2)]}},
        tolerance={"err": 1.0},
    )
    with pytest.raises(TypeError, match="read-only"):
        fx.truth["count"] = 0
    with pytest.raises(TypeError, match="read-only"):
        fx.tolerance["err"] = 5.0
    with pytest.raises(TypeError, match="read-only"):
        fx.data.pop("image")
    with pytest.raises(ValueError, match="read-only"):
        fx.truth["labels"][0, 0] = 7
    with pytest.raises(ValueError, match="read-only"):
        fx.truth["nested"]["a"][0][0] = 1.0
    with pytest.raises(TypeError):
        fx.truth["shift"][0] = 0.0  # a list became a tuple
    with pytest.raises(ValueError, match="WRITEABLE"):
        fx.truth["labels"].flags.writeable = True  # the memory is immutable bytes: no way back
    fx.truth.__init__({"count": 0})  # re-running the constructor fills nothing
    assert fx.truth["shift"] == (1.5, -2.0) and "count" not in fx.truth
    # still a dict to every reader that asks for one, and serialisable
    assert isinstance(fx.truth, dict) and '"shift": [1.5, -2.0]' in json.dumps(fx.truth, default=lambda a: a.tolist())


def test_freezing_copies_what_the_builder_handed_over_and_survives_stamping_and_pickling():
    import pickle

    handed = np.arange(6).reshape(2, 3)
    fx = _fixture(truth={"labels": handed})
    handed[0, 0] = 99  # the builder's own array stays its own, and writeable
    assert fx.truth["labels"][0, 0] == 0
    stamped = Procedural(lambda seed: fx).build("seg", "x")
    assert stamped.truth["labels"] is fx.truth["labels"]  # already frozen: not copied again
    back = pickle.loads(pickle.dumps(stamped))
    assert np.array_equal(back.truth["labels"], fx.truth["labels"])
    with pytest.raises(ValueError, match="read-only"):
        back.truth["labels"][...] = 0
    with pytest.raises(TypeError, match="read-only"):
        back.truth["count"] = 0


def test_a_session_still_hands_the_subject_writeable_copies_of_frozen_data():
    from helpers import build_case

    from imagebench.case.session import open_session
    from imagebench.cases import get_case

    case = get_case("segment-nuclei/synthetic-blobs")
    session = open_session(case, build_case(case))
    session.namespace["nuclei"][...] = 0  # the subject's own copy


# --------------------------------------------------------------------------- Metric


def test_metric_passes_only_within_its_limit():
    assert Metric("err", 1.0, 1.0).passed
    assert Metric("err", 0.5, 1.0).verdict == "pass"
    assert not Metric("err", 1.5, 1.0).passed
    assert Metric("err", 1.5, 1.0).verdict == "fail"


@pytest.mark.parametrize("value", [None, float("nan")])
def test_an_unavailable_metric_never_passes_and_says_why(value):
    m = Metric("err", value, 1.0)
    assert not m.passed and not m.scored
    assert m.verdict == "unavailable"
    assert m.unavailable  # a reason, never empty


def test_metric_missing_keeps_the_reason():
    m = Metric.missing("err", 2.0, "truth has no landmarks", because="truth")
    assert m.value is None and m.unavailable == "truth has no landmarks" and not m.passed
    assert m.excused and not m.failed


def test_an_unavailable_metric_is_the_subjects_fault_unless_the_verifier_excuses_it():
    assert Metric.missing("err", 1.0, "bad shape").unavailable_because == "unusable"
    assert Metric("err", float("nan"), 1.0).unavailable_because == "unusable"
    assert Metric.missing("err", 1.0, WhyNot("left nothing", "absent")).unavailable_because == "absent"
    assert Metric.missing("err", 1.0, WhyNot("left nothing", "absent"), because="truth").unavailable_because == "truth"
    assert Metric("err", 0.5, 1.0, unavailable_because="truth").unavailable_because is None  # a value is no excuse
    assert type(Metric.missing("err", 1.0, WhyNot("x")).unavailable) is str  # plain on disk
    with pytest.raises(ValueError, match="unavailable_because"):
        Metric.missing("err", 1.0, "x", because="nobody")  # type: ignore[arg-type]


def test_infinite_value_is_scored_and_fails():
    m = Metric("err", math.inf, 1.0)
    assert m.scored and not m.passed


# --------------------------------------------------------------------------- Outcome


def _outcome(metrics, arrays=None, detail=None) -> Outcome:
    return Outcome(_fixture(), Attempt("nop", arrays=arrays or {}), metrics, detail=detail or {})


def test_outcome_needs_at_least_one_scored_metric_to_pass():
    assert not _outcome([]).passed
    assert not _outcome([Metric.missing("a", 1.0, "no truth", because="truth")]).passed
    assert _outcome([Metric("a", 0.1, 1.0), Metric.missing("b", 1.0, "no truth", because="truth")]).passed
    assert not _outcome([Metric("a", 0.1, 1.0), Metric("b", 3.0, 1.0)]).passed


@pytest.mark.parametrize("because", ["absent", "unusable"])
def test_a_leaving_the_subject_failed_to_give_fails_the_outcome_however_good_the_rest(because):
    out = _outcome([Metric("a", 0.1, 1.0), Metric.missing("b", 1.0, "wrong", because=because)], arrays={"x": 1})
    assert not out.passed
    assert out.status == {"absent": "no-result", "unusable": "unscorable-result"}[because]


def test_outcome_status_covers_every_ending():
    assert _outcome([Metric("a", 0.1, 1.0)], arrays={"x": 1}).status == "ok"
    assert _outcome([Metric("a", 5.0, 1.0)], arrays={"x": 1}).status == "wrong-answer"
    assert _outcome([Metric.missing("a", 1.0, "gone")]).status == "no-result"
    assert _outcome([Metric.missing("a", 1.0, "bad shape")], arrays={"x": "junk"}).status == "unscorable-result"
    blocked = _outcome([Metric("a", 0.1, 1.0)], arrays={"x": 1}, detail={"blocked": "no contract"})
    assert blocked.status == "blocked" and not blocked.passed
    # a wrong number outranks a missing leaving; an unusable leaving outranks a missing one
    wrong = [Metric("a", 5.0, 1.0), Metric.missing("b", 1.0, "gone", because="absent")]
    assert _outcome(wrong, arrays={"x": 1}).status == "wrong-answer"
    both = [Metric.missing("a", 1.0, "bad", because="unusable"), Metric.missing("b", 1.0, "gone", because="absent")]
    assert _outcome(both, arrays={"x": 1}).status == "unscorable-result"
    only_truth = [Metric.missing("a", 1.0, "no truth", because="truth")]
    assert _outcome(only_truth, arrays={"x": 1}).status == "unscorable-result"


def test_the_why_not_of_a_reading_says_whether_anything_was_left():
    notes = {"why_not": {"gone": "never written", "bad": "not an .npy"}, "unreadable": ["bad"]}
    att = Attempt("s", {"m": np.ones(3)}, notes=notes)
    assert read_array(att, "m", ndim=2)[1].because == "unusable"
    assert read_array(att, "gone")[1].because == "absent"
    assert read_array(att, "nowhere")[1].because == "absent"
    assert read_scalar(att, "bad")[1].because == "unusable"  # left, but nobody could read it
    assert read_scalar(att, "m")[1].because == "unusable"


# --------------------------------------------------------------------------- read_array / read_scalar


def test_read_array_checks_ndim_shape_and_dtype():
    att = Attempt("s", {"m": np.ones((3, 4), np.int32)})
    arr, why = read_array(att, "m", ndim=2, shape=(3, 4), dtype=np.int64)
    assert why is None and arr.dtype == np.int64
    assert read_array(att, "m", ndim=3)[1] == "'m' has 2 dimension(s), expected 3"
    assert "expected (4, 3)" in read_array(att, "m", shape=(4, 3))[1]
    assert "expected kind 'f'" in read_array(att, "m", dtype="f")[1]
    assert read_array(att, "m", dtype="iu")[1] is None


def test_read_array_refuses_unsafe_casts_and_junk():
    att = Attempt(
        "s",
        {
            "floats": np.array([1.5, 2.0]),
            "big": np.array([300, 1], np.int64),
            "text": ["a", "b"],
            "nan": np.array([1.0, np.nan]),
            "none": None,
            "ragged": [[1, 2], [3]],
        },
    )
    assert "expected int32" in read_array(att, "floats", dtype=np.int32)[1]
    assert "do not fit int8" in read_array(att, "big", dtype=np.int8)[1]
    assert "not a numeric array" in read_array(att, "text")[1]
    assert "NaN" in read_array(att, "nan")[1]
    assert read_array(att, "none") == (None, "'none' is None")
    assert "could not be read" in read_array(att, "ragged")[1]


def test_read_uses_the_subjects_own_reason_for_a_missing_name():
    att = Attempt("s", {}, notes={"why_not": {"mask": "the layer was deleted"}})
    assert read_array(att, "mask") == (None, "the layer was deleted")
    assert read_scalar(att, "other") == (None, "the subject left nothing named 'other'")
    odd = Attempt("s", {}, notes={"why_not": ["not", "a", "dict"]})
    assert read_scalar(odd, "x")[1] == "the subject left nothing named 'x'"


def test_read_scalar_kinds():
    att = Attempt("s", {"f": np.float32(2.5), "i": 4.0, "b": True, "a": np.array([7]), "s": "3", "inf": math.inf})
    assert read_scalar(att, "f") == (2.5, None)
    assert read_scalar(att, "i", kind=int) == (4, None)
    assert read_scalar(att, "b", kind=bool) == (True, None)
    assert read_scalar(att, "a") == (7.0, None)
    assert "expected a number" in read_scalar(att, "b")[1]  # a bool is not a number
    assert "expected a number" in read_scalar(att, "s")[1]  # a string is never parsed
    assert "finite" in read_scalar(att, "inf")[1]
    assert "expected an integer" in read_scalar(Attempt("s", {"x": 2.5}), "x", kind=int)[1]


class _Hostile:
    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("boom")

    def __float__(self):
        raise RuntimeError("boom")


_junk = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.complex_numbers(),
        st.text(max_size=5),
        st.binary(max_size=5),
        st.just(_Hostile()),
        st.just(object()),
        hnp.arrays(
            dtype=st.one_of(hnp.scalar_dtypes(), st.just(np.dtype(object))),
            shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
        ),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(st.text(max_size=3), children, max_size=2),
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(
    value=_junk,
    dtype=st.sampled_from([None, "f", "iu", np.int32, np.float64, np.uint8]),
    ndim=st.sampled_from([None, 0, 2]),
)
def test_read_array_never_raises(value, dtype, ndim):
    arr, why = read_array(Attempt("s", {"x": value}), "x", dtype=dtype, ndim=ndim)
    assert (arr is None) != (why is None)
    if arr is not None:
        assert isinstance(arr, np.ndarray) and arr.dtype.kind in "biufc"
        if ndim is not None:
            assert arr.ndim == ndim
    else:
        assert isinstance(why, str) and why


@settings(max_examples=150, deadline=None)
@given(value=_junk, kind=st.sampled_from([float, int, bool]))
def test_read_scalar_never_raises(value, kind):
    got, why = read_scalar(Attempt("s", {"x": value}), "x", kind=kind)
    assert (got is None) != (why is None)
    if got is not None:
        assert type(got) is kind
        if kind is float:
            assert math.isfinite(got)


# --------------------------------------------------------------------------- specs


def _builder(seed: int = 0, size: int = 4) -> Fixture:
    rng = np.random.default_rng(seed)
    return Fixture(
        provenance=f"seed {seed}",
        data={"image": rng.random((size, size))},
        truth={"mean": 0.5},
        kind="curated",  # wrong on purpose: the spec must overwrite it
        skill_id="someone-else",
        case_id="wrong",
        tolerance={"err": 99.0},
    )


def test_procedural_stamps_identity_and_tolerance_from_the_spec():
    spec = Procedural(_builder, seed=3, params={"size": 5}, tolerance={"err": 0.1})
    assert isinstance(spec, FixtureSpec)
    assert spec.available("seg", "case-a") == (True, "")
    fx = spec.build("seg", "case-a")
    assert (fx.kind, fx.skill_id, fx.case_id) == ("synthetic", "seg", "case-a")
    assert dict(fx.tolerance) == {"err": 0.1}
    assert fx.data["image"].shape == (5, 5) and fx.provenance == "seed 3"


def test_procedural_refuses_a_builder_that_returns_something_else():
    spec = Procedural(lambda seed: {"data": 1})
    with pytest.raises(FixtureError, match="expected a Fixture"):
        spec.build("seg", "x")


def test_ondisk_is_unavailable_without_a_tree_and_never_falls_back(monkeypatch):
    monkeypatch.delenv(FIXTURES_ENV, raising=False)
    spec = OnDisk(tolerance={"err": 1.0})
    ok, why = spec.available("seg", "x")
    assert not ok and FIXTURES_ENV in why
    with pytest.raises(FixtureError, match=FIXTURES_ENV):
        spec.build("seg", "x")


def test_ondisk_reads_root_from_env_and_reports_the_missing_tree(monkeypatch, tmp_path):
    monkeypatch.setenv(FIXTURES_ENV, str(tmp_path / "absent"))
    ok, why = OnDisk(tolerance={}).available("seg", "x")
    assert not ok and "does not exist" in why


def test_ondisk_builds_from_a_tree_and_stamps_its_own_tolerance(tmp_path):
    from imagebench.fixtures import tree

    folder = tmp_path / "seg" / "real"
    folder.mkdir(parents=True)
    np.save(folder / "img.npy", np.arange(6, dtype=np.uint8).reshape(2, 3))
    np.save(folder / "gt.npy", np.ones((2, 3), np.int32))
    tree.write_case_layout(tmp_path, "seg", "real", about="tiny", data={"image": "img.npy"}, truth={"labels": "gt.npy"})
    tree.write_manifest_entry(tmp_path, "seg", "real", provenance="hand made", citation="the tests")
    spec = OnDisk(tolerance={"iou": 0.5}, root=tmp_path)
    assert spec.available("seg", "real") == (True, "")
    fx = spec.build("seg", "real")
    assert (fx.kind, fx.label, dict(fx.tolerance)) == ("curated", "seg/real", {"iou": 0.5})
    assert fx.citation == "the tests" and fx.about == "tiny"
    assert np.asarray(fx.data["image"]).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert set(fx.data) == {"image"} and set(fx.truth) == {"labels"}
