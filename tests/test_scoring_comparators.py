"""The seventeen comparators: documented canonical forms, fail-closed gold/config checks, properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from imagebench.scoring import registry
from imagebench.scoring.comparators import (
    CANONICAL_FORMS,
    COMPARATORS,
    EXAMPLES,
    PREPARERS,
    REGISTRY,
    ContractError,
    Example,
    FieldResult,
    canonical_asset_id,
    canonical_atom_id,
    canonical_enum,
    canonical_space_group,
    canonical_string,
    exemplar_answer,
    pack_region,
    unpack_region,
)

SPEC_NAMES = {
    "exact", "canonical_string_equal", "canonical_enum_equal", "cited_clause_equal", "boolean_equal",
    "integer_equal", "abs_tolerance", "vector_abs_tolerance", "circular_tolerance", "canonical_atom_id_equal",
    "canonical_atom_identity_equal", "canonical_asset_id_equal", "canonical_residue_equal",
    "canonical_space_group_equal", "canonical_set_equal", "ordered_string_vector_equal", "voxel_member_of_set",
}  # fmt: skip


def m(name: str, predicted, gold, config=None) -> bool:
    result = COMPARATORS[name](predicted, gold, config or {})
    assert isinstance(result, FieldResult) and isinstance(result.reason, str) and result.reason
    return result.matched


def test_registry_is_the_seventeen() -> None:
    assert set(REGISTRY) == set(COMPARATORS) == SPEC_NAMES
    assert set(PREPARERS) == SPEC_NAMES
    assert set(EXAMPLES) == SPEC_NAMES
    for name, func in COMPARATORS.items():
        assert func.__doc__ and len(func.__doc__) > 40, f"{name} documents its canonical form"


def test_one_entry_holds_a_comparator_and_what_belongs_to_it() -> None:
    for name, entry in REGISTRY.items():
        assert entry.name == name == entry.compare.__name__
        assert COMPARATORS[name] is entry.compare and PREPARERS[name] is entry.prepare
        assert EXAMPLES[name] is entry.example and isinstance(entry.example, Example)
        assert entry.compare.__module__.startswith("imagebench.scoring.comparators.")
    assert CANONICAL_FORMS["canonical_string_equal"] is canonical_string
    assert CANONICAL_FORMS["canonical_space_group_equal"] is canonical_space_group
    assert "exact" not in CANONICAL_FORMS and "voxel_member_of_set" not in CANONICAL_FORMS
    with pytest.raises(KeyError):
        CANONICAL_FORMS["integer_equal"]


def test_the_views_are_read_only_and_live(monkeypatch) -> None:
    with pytest.raises(TypeError):
        COMPARATORS["integer_equal"] = COMPARATORS["exact"]  # type: ignore[index]

    def lenient(predicted, gold, config=None):
        return FieldResult(True, "matched")

    entry = REGISTRY["integer_equal"]
    monkeypatch.setitem(REGISTRY, "integer_equal", registry.ComparatorEntry(**{**entry.__dict__, "compare": lenient}))
    assert COMPARATORS["integer_equal"] is lenient and m("integer_equal", 999, 5)
    monkeypatch.undo()
    assert not m("integer_equal", 999, 5)


def test_a_name_registers_once_and_with_an_example() -> None:
    example = Example(1, {}, 1, 2)
    with pytest.raises(ValueError, match="registered twice"):

        @registry.comparator(prepare=PREPARERS["exact"], example=example)
        def exact(predicted, gold, config=None):  # noqa: ARG001
            return FieldResult(True, "matched")

    with pytest.raises(TypeError, match="Example"):
        registry.comparator(prepare=PREPARERS["exact"], example=(1, {}, 1, 2))  # type: ignore[arg-type]
    assert REGISTRY["exact"].compare.__module__ == "imagebench.scoring.comparators.typed"


@pytest.mark.parametrize("name", sorted(SPEC_NAMES))
def test_worked_examples(name: str) -> None:
    gold, config, good, bad = EXAMPLES[name]
    assert m(name, exemplar_answer(name, gold), gold, config)
    assert m(name, good, gold, config)
    assert not m(name, bad, gold, config)


# --------------------------------------------------------------------------- type strictness


def test_exact_is_type_strict() -> None:
    assert m("exact", [1, {"a": None}], [1, {"a": None}])
    assert not m("exact", 3.0, 3)
    assert not m("exact", "3", 3)
    assert not m("exact", True, 1)
    assert not m("exact", [1, 2], [2, 1])
    assert m("exact", -0.0, 0.0)


def test_integer_equal() -> None:
    assert m("integer_equal", 3, 3)
    assert m("integer_equal", np.int64(3), 3)
    assert m("integer_equal", 3, np.int32(3))  # a truth read from a numpy array
    for wrong in ("3", 3.0, True, None, [3], 4):
        assert not m("integer_equal", wrong, 3)
    assert not m("integer_equal", False, 0)


def test_boolean_equal() -> None:
    assert m("boolean_equal", True, True)
    assert m("boolean_equal", " YES ", True)
    assert m("boolean_equal", "false", False)
    assert not m("boolean_equal", 1, True)
    assert not m("boolean_equal", "true", False)
    assert not m("boolean_equal", "yes", True, {"strict": True})
    assert not m("boolean_equal", "maybe", True)


# --------------------------------------------------------------------------- numbers


def test_abs_tolerance_boundary_is_inclusive_and_decimal() -> None:
    assert m("abs_tolerance", 1.6, 1.5, {"tolerance": 0.1})
    assert m("abs_tolerance", 1.4, 1.5, {"tolerance": 0.1})
    assert not m("abs_tolerance", 1.6000001, 1.5, {"tolerance": 0.1})
    assert m("abs_tolerance", 2, 2.0, {"tolerance": 0})
    assert not m("abs_tolerance", True, 1, {"tolerance": 1})
    assert not m("abs_tolerance", "1.5", 1.5, {"tolerance": 1})


def test_vector_abs_tolerance_shape_order_and_per_component() -> None:
    tol = {"tolerance": [0.5, 0.1]}
    assert m("vector_abs_tolerance", [1.4, 2.05], [1.0, 2.0], tol)
    assert not m("vector_abs_tolerance", [1.0, 2.2], [1.0, 2.0], tol)
    assert not m("vector_abs_tolerance", [2.0, 1.0], [1.0, 2.0], {"tolerance": 0.5})  # order kept
    assert not m("vector_abs_tolerance", [1.0, 2.0, 0.0], [1.0, 2.0], {"tolerance": 1})
    assert not m("vector_abs_tolerance", [[1.0, 2.0]], [1.0, 2.0], {"tolerance": 1})
    assert not m("vector_abs_tolerance", [1.0, "2"], [1.0, 2.0], {"tolerance": 1})
    nested_gold = {"a": [[0, 1], [2, 3]], "b": 5}
    nested_tol = {"tolerance": {"a": [0.1, [0.1, 1.0]], "b": 0}}
    assert m("vector_abs_tolerance", {"a": [[0.05, 1], [2, 3.9]], "b": 5}, nested_gold, nested_tol)
    assert not m("vector_abs_tolerance", {"a": [[0.05, 1], [2, 3.9]], "b": 5.5}, nested_gold, nested_tol)
    assert not m("vector_abs_tolerance", {"a": [[0, 1], [2, 3]]}, nested_gold, nested_tol)


def test_circular_tolerance() -> None:
    assert m("circular_tolerance", 359, 1, {"tolerance": 2})
    assert m("circular_tolerance", -1, 359, {"tolerance": 0})
    assert m("circular_tolerance", 179, 1, {"tolerance": 2, "modulus": 180})
    assert not m("circular_tolerance", 179, 1, {"tolerance": 2})  # default modulus 360
    assert m("circular_tolerance", 721, 1, {"tolerance": 0})
    assert not m("circular_tolerance", 90, 0, {"tolerance": 44, "modulus": 180})


# --------------------------------------------------------------------------- canonical forms


def test_canonical_string_and_enum() -> None:
    assert canonical_string("  Hello\t  World ") == "hello world"
    assert canonical_string("ＡＢＣ") == "abc"  # NFKC folds full-width letters
    for spelling in ("Cell-Cycle", " cell  cycle", "CELL__CYCLE"):
        assert canonical_enum(spelling) == "cell_cycle"
    assert m("canonical_string_equal", "Straße", "STRASSE")
    assert not m("canonical_string_equal", "cell-cycle", "cell cycle")
    assert m("canonical_enum_equal", "cell-cycle", "cell cycle")
    assert not m("canonical_enum_equal", "mitosis", "cell_cycle", {"choices": ["cell_cycle", "apoptosis"]})


def test_cited_clause() -> None:
    gold = {"standard": "ISO/IEC 17025:2017", "clause": "7.2"}
    assert m("cited_clause_equal", ["iso iec 17025 2017", "§7.2.1"], gold)
    assert m("cited_clause_equal", "ISO/IEC 17025:2017 § clause 7.2", gold)
    assert m("cited_clause_equal", ["ISO/IEC 17025:2017", "7.2(a)"], gold)
    assert m("cited_clause_equal", ["ISO/IEC 17025:2017", "07.02"], gold)
    assert not m("cited_clause_equal", ["ISO/IEC 17025:2017", "7"], gold)  # less specific than the gold
    assert not m("cited_clause_equal", ["ISO/IEC 17025:2017", "7.20"], gold)
    assert not m("cited_clause_equal", ["ISO 9001:2015", "7.2"], gold)
    assert not m("cited_clause_equal", "ISO 9001 7.2", gold)  # a string needs its §


def test_atom_residue_asset_space_group() -> None:
    assert canonical_atom_id(17) == canonical_atom_id("17") == canonical_atom_id("#17") == "#17"
    assert canonical_atom_id("c1*") == "C1'"
    assert not m("canonical_atom_id_equal", 17, "N17")
    assert m("canonical_residue_equal", "A:Gly12", "A/GLY-12")
    assert m("canonical_residue_equal", "G12", {"name": "GLY", "number": 12})
    assert not m("canonical_residue_equal", "G12", "A:GLY12")  # chain on one side only
    assert not m("canonical_residue_equal", "GLY12A", "GLY12")  # insertion code
    assert m("canonical_residue_equal", "A12", "ALA12")
    assert not m("canonical_residue_equal", "A12", "ALA12", {"alphabet": "none"})
    negative = {"chain": "B", "name": "LYS", "number": -3}
    assert m("canonical_residue_equal", negative, {"chain": "B", "name": "K", "number": -3})
    assert m("canonical_atom_identity_equal", "A:K57:NZ", {"chain": "A", "residue": "LYS57", "atom": "nz"})
    assert not m("canonical_atom_identity_equal", "NZ", "A:K57:NZ")
    assert canonical_asset_id(".\\Volumes\\\\cell.TIF/") == "volumes/cell.tif"
    assert canonical_space_group("P 21 21 21") == canonical_space_group("p2_12_12_1") == 19
    assert canonical_space_group("P2(1)2(1)2(1)") == 19
    assert canonical_space_group("P 1 21 1") == 4
    assert canonical_space_group("H3") == canonical_space_group("R3") == 146
    assert canonical_space_group("P 1bar") == canonical_space_group("P-1") == "P-1"
    assert m("canonical_space_group_equal", "152", "P 31 2 1")
    assert not m("canonical_space_group_equal", "P 31 2 1", "P 32 2 1")
    result = COMPARATORS["canonical_space_group_equal"](2, "P-1", {})
    assert not result.matched and "cannot be related" in result.reason


def test_sets_and_ordered_vectors() -> None:
    assert m("canonical_set_equal", [3, 1, 2], [1, 2, 3])
    assert not m("canonical_set_equal", [1, 2], [1, 1, 2])  # multiplicity counts
    assert not m("canonical_set_equal", [1.0], [1])  # exact elements keep their type
    assert m("canonical_set_equal", ["A:G12", "B:k5"], ["B:LYS5", "A:GLY12"], {"element": "residue"})
    assert m("canonical_set_equal", [19, "P 31 2 1"], ["P3121", "P212121"], {"element": "space_group"})
    assert m("ordered_string_vector_equal", ["A", "b"], ["a", "B"])
    assert not m("ordered_string_vector_equal", ["a", "b"], ["a", "B"], {"canonical": "exact"})
    assert not m("ordered_string_vector_equal", ["b", "a"], ["a", "b"])
    assert not m("ordered_string_vector_equal", ["a"], ["a", "b"])


def test_voxel_member_of_set() -> None:
    mask = np.zeros((4, 5, 6), bool)
    mask[1:3, 2:4, 3:5] = True
    region = pack_region(mask)
    assert unpack_region(region).tolist() == mask.tolist()
    assert m("voxel_member_of_set", [1, 2, 3], region)
    assert not m("voxel_member_of_set", [0, 0, 0], region)
    assert not m("voxel_member_of_set", [-3, 2, 3], region)  # no wrap-around
    assert not m("voxel_member_of_set", [1, 2], region)
    assert not m("voxel_member_of_set", [1.0, 2.0, 3.0], region)
    assert m("voxel_member_of_set", [1.4, 2.0, 3.2], region, {"round": True})
    assert not m("voxel_member_of_set", [True, 2, 3], region)
    # packed bits may also come as a uint8 array or byte values (a truth kept in numpy)
    as_array = {"shape": list(mask.shape), "packed": np.packbits(mask.ravel())}
    assert m("voxel_member_of_set", [2, 3, 4], as_array)
    assert m("voxel_member_of_set", [2, 3, 4], {"shape": mask.shape, "packed": np.packbits(mask.ravel()).tolist()})


# --------------------------------------------------------------------------- fail closed


@pytest.mark.parametrize(
    "name, gold, config",
    [
        ("exact", {1, 2}, {}),
        ("exact", 1, {"tolerance": 1}),
        ("canonical_string_equal", 3, {}),
        ("canonical_string_equal", "x", {"accepted": "y"}),
        ("canonical_enum_equal", "x", {"choices": ["a", "b"]}),
        ("canonical_enum_equal", "x", {"choices": []}),
        ("cited_clause_equal", "no section sign", {}),
        ("boolean_equal", "true", {}),
        ("boolean_equal", True, {"strict": "yes"}),
        ("integer_equal", 3.0, {}),
        ("integer_equal", True, {}),
        ("abs_tolerance", 1.0, {}),
        ("abs_tolerance", 1.0, {"tolerance": -1}),
        ("abs_tolerance", 1.0, {"tolerence": 0.1}),
        ("abs_tolerance", float("nan"), {"tolerance": 1}),
        ("abs_tolerance", "1", {"tolerance": 1}),
        ("vector_abs_tolerance", [1.0, 2.0], {"tolerance": [0.1]}),
        ("vector_abs_tolerance", [], {"tolerance": 0.1}),
        ("vector_abs_tolerance", [1.0, "x"], {"tolerance": 0.1}),
        ("vector_abs_tolerance", {"a": 1}, {"tolerance": {"b": 1}}),
        ("circular_tolerance", 10, {"tolerance": 180}),
        ("circular_tolerance", 10, {"tolerance": 90, "modulus": 180}),
        ("circular_tolerance", 10, {"tolerance": 1, "modulus": 0}),
        ("canonical_atom_id_equal", -1, {}),
        ("canonical_atom_id_equal", "", {}),
        ("canonical_atom_identity_equal", {"chain": "A"}, {}),
        ("canonical_asset_id_equal", 5, {}),
        ("canonical_residue_equal", "GLY", {}),
        ("canonical_residue_equal", "A:GLY12", {"alphabet": "dna"}),
        ("canonical_space_group_equal", 231, {}),
        ("canonical_space_group_equal", "", {}),
        ("canonical_set_equal", "abc", {}),
        ("canonical_set_equal", [1], {"element": "fuzzy"}),
        ("ordered_string_vector_equal", ["a", 1], {}),
        ("voxel_member_of_set", {"shape": [2, 2], "packed": "!!"}, {}),
        ("voxel_member_of_set", {"shape": [2, 2], "packed": [0, 0]}, {}),
        ("voxel_member_of_set", pack_region(np.zeros((3, 3), bool)), {}),
        ("voxel_member_of_set", [1, 2, 3], {}),
        ("voxel_member_of_set", pack_region(np.ones((2, 2), bool)), {"tolerance": 1}),
    ],
)
@pytest.mark.parametrize("predicted", [None, 0, "x", [1, 2, 3], {"a": 1}])
def test_malformed_gold_or_config_raises_whatever_the_prediction(name: str, gold, config, predicted) -> None:
    with pytest.raises(ContractError, match=name):
        COMPARATORS[name](predicted, gold, config)
    with pytest.raises(ContractError):
        PREPARERS[name](gold, config)


def test_config_must_be_an_object() -> None:
    with pytest.raises(ContractError, match="config must be an object"):
        COMPARATORS["integer_equal"](1, 1, ["not", "a", "mapping"])


# --------------------------------------------------------------------------- properties

texts = st.text(max_size=24)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
ints = st.integers(min_value=-(10**9), max_value=10**9)
json_leaf = st.none() | st.booleans() | ints | finite | texts
json_value = st.recursive(
    json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=12
)
PROPS = settings(max_examples=60, deadline=None)


def _symmetric(name: str, a, b, config=None) -> None:
    assert m(name, a, b, config) == m(name, b, a, config)


@PROPS
@given(json_value, json_value)
def test_exact_reflexive_and_symmetric(a, b) -> None:
    assert m("exact", a, a)
    _symmetric("exact", a, b)


@PROPS
@given(texts, texts)
def test_string_comparators(a: str, b: str) -> None:
    for name, canon in (("canonical_string_equal", canonical_string), ("canonical_enum_equal", canonical_enum)):
        assert m(name, a, a)
        _symmetric(name, a, b)
        assert canon(canon(a)) == canon(a)  # the canonical form is a fixed point
        assert m(name, canon(a), a)
    assert canonical_asset_id(canonical_asset_id(a)) == canonical_asset_id(a)
    if canonical_asset_id(a) and canonical_asset_id(b):
        _symmetric("canonical_asset_id_equal", a, b)


@PROPS
@given(st.booleans(), st.booleans())
def test_boolean_symmetric(a: bool, b: bool) -> None:
    assert m("boolean_equal", a, a)
    _symmetric("boolean_equal", a, b)


@PROPS
@given(ints, ints)
def test_integer_symmetric(a: int, b: int) -> None:
    assert m("integer_equal", a, a)
    _symmetric("integer_equal", a, b)


@PROPS
@given(finite | ints, finite | ints, st.floats(min_value=0, max_value=1e3, allow_nan=False))
def test_abs_tolerance_symmetric(a, b, tol: float) -> None:
    assert m("abs_tolerance", a, a, {"tolerance": 0})
    _symmetric("abs_tolerance", a, b, {"tolerance": tol})


@PROPS
@given(st.lists(finite, min_size=1, max_size=4), st.data())
def test_vector_symmetric(a: list, data) -> None:
    b = data.draw(st.lists(finite, min_size=len(a), max_size=len(a)))
    tol = data.draw(st.floats(min_value=0, max_value=10, allow_nan=False))
    assert m("vector_abs_tolerance", a, a, {"tolerance": 0})
    _symmetric("vector_abs_tolerance", a, b, {"tolerance": tol})


@PROPS
@given(finite, finite, st.sampled_from([360, 180, 2 * 3.14159]), st.floats(min_value=0, max_value=1, allow_nan=False))
def test_circular_symmetric_and_periodic(a: float, b: float, modulus: float, frac: float) -> None:
    config = {"tolerance": frac * modulus * 0.49, "modulus": modulus}
    _symmetric("circular_tolerance", a, b, config)
    assert m("circular_tolerance", a, a, {"tolerance": 0, "modulus": modulus})
    assert m("circular_tolerance", a + 3 * modulus, a, {"tolerance": 1e-6, "modulus": modulus})


atom_names = st.from_regex(r"[A-Za-z][A-Za-z0-9'*]{0,3}", fullmatch=True)
residues = st.builds(
    lambda chain, name, num, icode: f"{chain}{':' if chain else ''}{name}{num}{icode}",
    st.sampled_from(["", "A", "b"]),
    st.sampled_from(["G", "GLY", "Lys", "K", "DA", "MSE"]),
    st.integers(0, 9999),
    st.sampled_from(["", "A"]),
)
space_groups = st.sampled_from(
    ["P 21 21 21", "P212121", 19, "19", "P 31 2 1", "C 2", "C 1 2 1", "P-1", "I 41/a", "R3", "H3"]
)


@PROPS
@given(atom_names | st.integers(0, 10**6), atom_names | st.integers(0, 10**6))
def test_atom_ids(a, b) -> None:
    assert m("canonical_atom_id_equal", a, a)
    _symmetric("canonical_atom_id_equal", a, b)
    assert canonical_atom_id(canonical_atom_id(a)) == canonical_atom_id(a)


@PROPS
@given(residues, residues, atom_names)
def test_residues_and_atom_identities(a: str, b: str, atom: str) -> None:
    assert m("canonical_residue_equal", a, a)
    _symmetric("canonical_residue_equal", a, b)
    qa, qb = f"{a}:{atom}", f"{b}:{atom}"
    assume(qa.count(":") <= 2 and qb.count(":") <= 2)
    assert m("canonical_atom_identity_equal", qa, qa)
    _symmetric("canonical_atom_identity_equal", qa, qb)


@PROPS
@given(space_groups, space_groups)
def test_space_groups(a, b) -> None:
    assert m("canonical_space_group_equal", a, a)
    _symmetric("canonical_space_group_equal", a, b)
    c = canonical_space_group(a)
    assert canonical_space_group(c) == c


@PROPS
@given(st.lists(json_value, max_size=5), st.randoms())
def test_set_is_a_multiset(items: list, rnd) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert m("canonical_set_equal", shuffled, items)
    _symmetric("canonical_set_equal", shuffled, items)
    assert not m("canonical_set_equal", [*items, items[0] if items else 1], items)


@PROPS
@given(st.lists(texts, max_size=4), st.lists(texts, max_size=4))
def test_ordered_vectors(a: list, b: list) -> None:
    assert m("ordered_string_vector_equal", a, a)
    _symmetric("ordered_string_vector_equal", a, b)


@PROPS
@given(st.lists(st.booleans(), min_size=1, max_size=40), st.integers(0, 39))
def test_voxel_membership_is_the_mask(bits: list, i: int) -> None:
    mask = np.array(bits, bool)
    assume(mask.any())
    region = pack_region(mask)
    assert np.array_equal(unpack_region(region), mask)
    inside = i < mask.size and bool(mask[i])
    assert m("voxel_member_of_set", [i], region) == inside


def test_canonical_forms_are_exposed_for_the_canonical_comparators() -> None:
    assert set(CANONICAL_FORMS) <= set(COMPARATORS)
    assert {n for n in COMPARATORS if n.startswith("canonical_") and n != "canonical_set_equal"} <= set(CANONICAL_FORMS)


def test_reasons_never_state_the_gold() -> None:
    import json

    for name, (gold, config, _good, bad) in EXAMPLES.items():
        reason = COMPARATORS[name](bad, gold, config).reason
        assert json.dumps(gold) not in reason, name
    reason = COMPARATORS["integer_equal"](3, 13, {}).reason
    assert "13" not in reason and "10" not in reason
