"""The seventeen field comparators: pure functions ``(predicted, gold, config) -> FieldResult``.

Each comparator first checks its ``gold`` value and ``config`` (and raises
:class:`ContractError` when either is malformed, whatever the prediction is: a broken contract
is blocked, never scored), then compares. A prediction of the wrong type or form is simply a
mismatch, with the reason. A reason never states a gold value (summaries of earlier samples
sit beside later ones); a tolerance comparator states how far off the prediction was.
Canonical forms are documented on each function and in ``docs/scoring.md`` and exposed in
:data:`CANONICAL_FORMS`; the string forms (string, enum, asset id, atom id, space group) are
fixed points of themselves, the others (citation, residue, qualified atom) are comparison keys.

Numbers are compared exactly, as the decimals they were written as (a float through its
shortest round-trip ``repr``), so a tolerance boundary means what it says:
``|predicted - gold| <= tolerance`` includes equality, and 1.6 is within 0.1 of 1.5.

:data:`COMPARATORS` is the public registry; :data:`PREPARERS` holds each comparator's own check
of gold and config (what the scorer runs on a contract before it looks at any answer).
"""

from __future__ import annotations

import base64
import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np


class ContractError(ValueError):
    """A field's gold value or comparator config is malformed: the answer is blocked, not scored."""


@dataclass(frozen=True)
class FieldResult:
    """Whether one field matched, and why (or why not)."""

    matched: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"matched": self.matched, "reason": self.reason}


Comparator = Callable[[Any, Any, Mapping[str, Any] | None], FieldResult]

_MATCH = "matched"


def _ok(reason: str = _MATCH) -> FieldResult:
    return FieldResult(True, reason)


def _no(reason: str) -> FieldResult:
    return FieldResult(False, reason)


# --------------------------------------------------------------------------- shared helpers


def _plain(value: Any) -> Any:
    """numpy scalars/arrays and tuples to plain Python (lists, ints, floats, bools); else unchanged."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_number(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value)
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _config(
    name: str,
    config: Mapping[str, Any] | None,
    allowed: Mapping[str, Callable[[Any], bool]],
    *,
    required: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Check a comparator config: known keys only, each passing its check, required keys present."""
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ContractError(f"{name}: config must be an object, got {_kind(config)}")
    cfg = {str(k): _plain(v) for k, v in config.items()}
    unknown = sorted(set(cfg) - set(allowed))
    if unknown:
        valid = ", ".join(sorted(allowed)) or "none"
        raise ContractError(f"{name}: unknown config key(s) {unknown}; valid keys: {valid}")
    for key in required:
        if key not in cfg:
            raise ContractError(f"{name}: config needs {key!r}")
    for key, value in cfg.items():
        if not allowed[key](value):
            raise ContractError(f"{name}: config {key!r} has an invalid value {_short(value)}")
    return cfg


def _is_tolerance(value: Any) -> bool:
    return _is_number(value) and value >= 0


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _frac(value: int | float) -> Fraction:
    """The exact value of a JSON number as written: a float is read through its shortest
    round-trip decimal (``repr``), so ``1.6 - 1.5`` is exactly ``0.1``."""
    if isinstance(value, float):
        return Fraction(repr(value))
    return Fraction(value)


# --------------------------------------------------------------------------- canonical forms


def _fixpoint(func: Callable[[str], str], text: str) -> str:
    for _ in range(4):
        nxt = func(text)
        if nxt == text:
            return nxt
        text = nxt
    return text


def _nfkc_fold(text: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def canonical_string(text: str) -> str:
    """Canonical string: Unicode NFKC, case-folded, whitespace runs collapsed to one space, trimmed."""
    return _fixpoint(lambda t: " ".join(_nfkc_fold(t).split()), text)


_ENUM_SEP = re.compile(r"[\s_\-\u2010-\u2015]+")


def canonical_enum(text: str) -> str:
    """Canonical enumeration value: as :func:`canonical_string`, and runs of spaces, hyphens and
    underscores become one ``_`` (``"Cell-Cycle"``, ``"cell cycle"`` and ``"CELL_CYCLE"`` agree)."""
    return _fixpoint(lambda t: _ENUM_SEP.sub("_", canonical_string(t)).strip("_"), text)


def canonical_asset_id(text: str) -> str:
    """Canonical asset identifier: NFKC, trimmed, case-folded, ``\\`` read as ``/``, repeated
    slashes collapsed, leading ``./`` and trailing ``/`` removed (``"./Volumes//A.tif"`` is
    ``"volumes/a.tif"``)."""

    def step(t: str) -> str:
        t = _nfkc_fold(t).strip().replace("\\", "/")
        t = re.sub(r"/{2,}", "/", t)
        while t.startswith("./"):
            t = t[2:]
        return t.rstrip("/") if t != "/" else t

    return _fixpoint(step, text)


def canonical_atom_id(value: Any) -> str:
    """Canonical atom id: a serial number (an int >= 0 or a string of digits) is ``"#<n>"``; a
    name is NFKC, upper-case, without whitespace, with ``*`` read as a prime (``"C1*"`` is
    ``"C1'"``) and ``"`` as two primes. Raises ValueError for anything else."""
    value = _plain(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"atom serial {value} is negative")
        return f"#{value}"
    if not isinstance(value, str):
        raise ValueError(f"an atom id is a name or a serial number, got {_kind(value)}")
    text = "".join(unicodedata.normalize("NFKC", value).split())
    if not text:
        raise ValueError("the atom id is empty")
    if text.startswith("#") and text[1:].isdigit() and text[1:].isascii():
        return f"#{int(text[1:])}"
    if text.isdigit() and text.isascii():
        return f"#{int(text)}"
    text = _fixpoint(lambda t: unicodedata.normalize("NFKC", t.upper()), text)
    return text.replace("*", "'").replace('"', "''")


_ONE_LETTER = {
    "A": "ALA", "R": "ARG", "N": "ASN", "D": "ASP", "C": "CYS", "Q": "GLN", "E": "GLU",
    "G": "GLY", "H": "HIS", "I": "ILE", "L": "LEU", "K": "LYS", "M": "MET", "F": "PHE",
    "P": "PRO", "S": "SER", "T": "THR", "W": "TRP", "Y": "TYR", "V": "VAL",
}  # fmt: skip
_RESIDUE = re.compile(
    r"^(?:(?P<chain>[A-Za-z0-9]{1,4})\s*[:/]\s*)?(?P<name>[A-Za-z]{1,3})?[\s_\-]*(?P<num>\d+)(?P<icode>[A-Za-z]?)$"
)
_CHAIN = re.compile(r"^[A-Za-z0-9]{0,4}$")
_RES_NAME = re.compile(r"^[A-Za-z0-9]{0,5}$")
_ICODE = re.compile(r"^[A-Za-z]?$")


def _residue_parts(value: Any, alphabet: str) -> tuple[str, str, int, str]:
    value = _plain(value)
    if isinstance(value, dict):
        unknown = set(value) - {"chain", "name", "number", "icode"}
        if unknown:
            raise ValueError(f"a residue object has only chain/name/number/icode, got {sorted(unknown)}")
        number = value.get("number")
        if not isinstance(number, int) or isinstance(number, bool):
            raise ValueError("a residue object needs an integer 'number'")
        chain, name, icode = value.get("chain", ""), value.get("name", ""), value.get("icode", "")
        if not all(isinstance(x, str) for x in (chain, name, icode)):
            raise ValueError("a residue's chain, name and icode are strings")
        chain, name, icode = chain.strip(), name.strip(), icode.strip()
        if not (_CHAIN.match(chain) and _RES_NAME.match(name) and _ICODE.match(icode)):
            raise ValueError(
                "a residue's chain is up to 4 letters/digits, its name up to 5, its insertion code one letter"
            )
    elif isinstance(value, str):
        m = _RESIDUE.match(unicodedata.normalize("NFKC", value).strip())
        if not m or not m.group("num").isascii():
            raise ValueError(f"{_short(value)} is not a residue id such as 'A:GLY12' or 'G12'")
        chain, name, icode = m.group("chain") or "", m.group("name") or "", m.group("icode") or ""
        number = int(m.group("num"))
    else:
        raise ValueError(f"a residue id is a string or an object, got {_kind(value)}")
    name = name.upper()
    if alphabet == "protein" and len(name) == 1:
        name = _ONE_LETTER.get(name, name)
    return chain, name, number, icode.upper()


def canonical_residue(value: Any, alphabet: str = "protein") -> str:
    """Canonical residue key ``"<chain>/<NAME>/<number><icode>"`` (chain empty when not given).

    Accepted: a string such as ``"A:Gly12"``, ``"GLY 12"``, ``"G12"``, ``"A/LYS-57B"`` (hyphen,
    underscore and whitespace separate name and number, so a string never holds a negative
    number; the letter after the number is an insertion code), or an object
    ``{"chain", "name", "number", "icode"}`` (``number`` required, may be negative). Names are
    upper-cased; with ``alphabet="protein"`` a one-letter amino-acid code becomes its
    three-letter name. Chains keep their case. Raises ValueError for anything else.
    """
    chain, name, number, icode = _residue_parts(value, alphabet)
    return f"{chain}/{name}/{number}{icode}"


def canonical_atom_identity(value: Any, alphabet: str = "protein") -> str:
    """Canonical qualified atom key ``"<chain>|<NAME>/<number><icode>|<atom>"`` (chain and residue
    empty where not given; the atom in :func:`canonical_atom_id` form).

    Accepted: a bare atom id, a string ``"A:GLY12:CA"`` or ``"GLY12/CA"`` (the last part is the
    atom, the one before it the residue, a first part of three the chain), or an object
    ``{"chain", "residue", "atom"}`` (``atom`` required; a residue object may carry the chain
    instead, and when both name one they must agree). Raises ValueError for anything else.
    """
    value = _plain(value)
    chain, residue = "", ""
    if isinstance(value, dict):
        unknown = set(value) - {"chain", "residue", "atom"}
        if unknown or "atom" not in value:
            raise ValueError("an atom object has 'atom' and optionally 'chain' and 'residue'")
        chain_v = value.get("chain", "")
        if not isinstance(chain_v, str) or not _CHAIN.match(chain_v.strip()):
            raise ValueError("an atom's chain is a string of up to 4 letters/digits")
        chain = chain_v.strip()
        if value.get("residue") not in (None, ""):
            r_chain, name, number, icode = _residue_parts(value["residue"], alphabet)
            if r_chain and chain and r_chain != chain:
                raise ValueError(f"the atom names chain {chain!r} and its residue chain {r_chain!r}")
            chain = chain or r_chain
            residue = f"{name}/{number}{icode}"
        atom = canonical_atom_id(value["atom"])
    elif isinstance(value, str) and re.search(r"[:/]", value):
        parts = [p.strip() for p in re.split(r"[:/]", unicodedata.normalize("NFKC", value))]
        if len(parts) > 3 or any(not p for p in parts):
            raise ValueError(f"{_short(value)} is not 'chain:residue:atom', 'residue:atom' or an atom id")
        atom = canonical_atom_id(parts[-1])
        _, name, number, icode = _residue_parts(parts[-2], alphabet)
        residue = f"{name}/{number}{icode}"
        if len(parts) == 3:
            chain = parts[0]
            if not _CHAIN.match(chain):
                raise ValueError(f"chain {chain!r} is not up to 4 letters/digits")
    else:
        atom = canonical_atom_id(value)
    return f"{chain}|{residue}|{atom}"


# The 65 space groups that admit chiral molecules (the ones macromolecular crystals take),
# by their short Hermann-Mauguin symbols, plus common alternative spellings of the same group.
_SPACE_GROUPS: dict[str, int] = {
    "P1": 1, "P2": 3, "P21": 4, "C2": 5, "P222": 16, "P2221": 17, "P21212": 18, "P212121": 19,
    "C2221": 20, "C222": 21, "F222": 22, "I222": 23, "I212121": 24, "P4": 75, "P41": 76, "P42": 77,
    "P43": 78, "I4": 79, "I41": 80, "P422": 89, "P4212": 90, "P4122": 91, "P41212": 92, "P4222": 93,
    "P42212": 94, "P4322": 95, "P43212": 96, "I422": 97, "I4122": 98, "P3": 143, "P31": 144,
    "P32": 145, "R3": 146, "P312": 149, "P321": 150, "P3112": 151, "P3121": 152, "P3212": 153,
    "P3221": 154, "R32": 155, "P6": 168, "P61": 169, "P65": 170, "P62": 171, "P64": 172, "P63": 173,
    "P622": 177, "P6122": 178, "P6522": 179, "P6222": 180, "P6422": 181, "P6322": 182, "P23": 195,
    "F23": 196, "I23": 197, "P213": 198, "I213": 199, "P432": 207, "P4232": 208, "F432": 209,
    "F4132": 210, "I432": 211, "P4332": 212, "P4132": 213, "I4132": 214,
    # full monoclinic symbols (unique axis b) and the hexagonal setting of the rhombohedral groups
    "P121": 3, "P1211": 4, "C121": 5, "I121": 5, "H3": 146, "H32": 155,
}  # fmt: skip


def _space_group_symbol(text: str) -> str:
    t = unicodedata.normalize("NFKD", text)
    t = re.sub(r"(\d)[\u0304\u0305]", r"-\1", t)  # a digit with an overbar: 1̄ -> -1
    t = unicodedata.normalize("NFKC", t)
    t = re.sub(r"(\d)bar", r"-\1", t, flags=re.IGNORECASE)
    t = re.sub(r"[\s_(){}\[\]]", "", t)
    if not t:
        return t
    return t[0].upper() + t[1:].lower()


def canonical_space_group(value: Any) -> int | str:
    """Canonical space group: its International Tables number when it is known, else the symbol.

    A number (an int or a string of digits, 1-230) is itself. A Hermann-Mauguin symbol loses
    whitespace, underscores and brackets (``"P 21 21 21"``, ``"P2_12_12_1"`` and
    ``"P2(1)2(1)2(1)"`` are all ``"P212121"``), an overbar or ``bar`` suffix becomes a leading
    ``-``, the lattice letter is upper-case and the rest lower-case; a symbol in the table of the
    65 Sohncke groups (plus full monoclinic symbols and ``H3``/``H32``) becomes its number.
    Raises ValueError for anything else.
    """
    value = _plain(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= 230:
            raise ValueError(f"space-group number {value} is outside 1-230")
        return value
    if not isinstance(value, str):
        raise ValueError(f"a space group is a symbol or a number, got {_kind(value)}")
    text = value.strip()
    if text.isdigit() and text.isascii():
        return canonical_space_group(int(text))
    symbol = _space_group_symbol(text)
    if not symbol or not symbol[0].isalpha() or not symbol.isascii():
        raise ValueError(f"{_short(value)} is not a Hermann-Mauguin symbol")
    return _SPACE_GROUPS.get(symbol, symbol)


_CLAUSE_PREFIX = re.compile(r"^(?:§+|clause|section|sec\.?|article|art\.?|para(?:graph)?\.?)\s*", re.IGNORECASE)


def canonical_citation(value: Any) -> tuple[str, tuple[str, ...]]:
    """Canonical (standard, clause) pair.

    Accepted: a list ``[standard, clause]``, an object ``{"standard", "clause"}``, or a string
    ``"<standard> § <clause>"`` (exactly one ``§`` separates them). The standard keeps only its
    letters and digits, case-folded (``"ISO/IEC 17025:2017"`` is ``"isoiec170252017"``). The
    clause loses a leading ``§``/``clause``/``section``/``article``; ``(a)`` reads as ``.a``; it is
    split on dots, each part trimmed and case-folded, numbers without leading zeros. Raises
    ValueError for anything else.
    """
    value = _plain(value)
    if isinstance(value, dict):
        if set(value) != {"standard", "clause"}:
            raise ValueError("a citation object has exactly 'standard' and 'clause'")
        standard, clause = value["standard"], value["clause"]
    elif isinstance(value, list):
        if len(value) != 2:
            raise ValueError("a citation list is [standard, clause]")
        standard, clause = value
    elif isinstance(value, str):
        if value.count("§") != 1:
            raise ValueError("a citation string is '<standard> § <clause>' with exactly one §")
        standard, clause = value.split("§")
    else:
        raise ValueError(f"a citation is a [standard, clause] pair, got {_kind(value)}")
    if not isinstance(standard, str) or not isinstance(clause, str):
        raise ValueError("a citation's standard and clause are strings")
    std = "".join(c for c in _nfkc_fold(standard) if c.isalnum())
    text = _nfkc_fold(clause).strip()
    text = _CLAUSE_PREFIX.sub("", text).strip()
    text = text.replace("(", ".").replace(")", "")
    parts = []
    for part in text.split("."):
        part = "".join(part.split())
        if not part:
            continue
        parts.append(str(int(part)) if part.isdigit() and part.isascii() else part)
    if not std:
        raise ValueError("the citation names no standard")
    if not parts:
        raise ValueError("the citation names no clause")
    return std, tuple(parts)


def _exact_key(value: Any) -> str:
    """A type-preserving key: 1, 1.0, True and "1" all differ; -0.0 equals 0.0."""

    def norm(v: Any) -> Any:
        if isinstance(v, float) and v == 0.0:
            return 0.0
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    return json.dumps(norm(_plain(value)), sort_keys=True, ensure_ascii=True, allow_nan=True)


def _strict_equal(a: Any, b: Any) -> bool:
    """Same JSON type and equal, recursively (a bool is never a number, an int never a float)."""
    if _kind(a) != _kind(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return set(a) == set(b) and all(_strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
        return False
    return bool(a == b)


# --------------------------------------------------------------------------- the comparators


def _prep_exact(gold: Any, config: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]]:
    cfg = _config("exact", config, {})
    gold = _plain(gold)
    if not _is_json(gold):
        raise ContractError(f"exact: gold {_short(gold)} is not plain JSON")
    return gold, cfg


def _is_json(value: Any, depth: int = 0) -> bool:
    if depth > 64:
        return False
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in value.items())
    return False


def exact(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Same JSON type and equal, recursively: ``3`` is not ``3.0``, not ``"3"`` and not ``true``.

    Canonical form: the value itself. Config: none.
    """
    gold, _ = _prep_exact(gold, config)
    predicted = _plain(predicted)
    if _strict_equal(predicted, gold):
        return _ok()
    if _kind(predicted) != _kind(gold):
        return _no(f"expected a {_kind(gold)}, got a {_kind(predicted)}")
    return _no(f"{_short(predicted)} differs from the expected value")


def _prep_string(
    name: str,
    gold: Any,
    config: Mapping[str, Any] | None,
    extra: Mapping[str, Callable[[Any], bool]] | None = None,
) -> tuple[str, dict[str, Any]]:
    allowed: dict[str, Callable[[Any], bool]] = {"accepted": _is_str_list}
    allowed.update(extra or {})
    cfg = _config(name, config, allowed)
    gold = _plain(gold)
    if not isinstance(gold, str):
        raise ContractError(f"{name}: gold must be a string, got {_kind(gold)}")
    return gold, cfg


def canonical_string_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_string` form, or equal to one of the declared accepted spellings.

    Config: ``accepted`` (list of strings; each also counts as the gold, in canonical form).
    """
    gold, cfg = _prep_string("canonical_string_equal", gold, config)
    if not isinstance(predicted, str):
        return _no(f"expected a string, got a {_kind(predicted)}")
    want = {canonical_string(gold), *(canonical_string(a) for a in cfg.get("accepted", []))}
    got = canonical_string(predicted)
    if got in want:
        return _ok(f"matched as {got!r}")
    return _no(f"{got!r} (canonical) is not the expected string")


def _prep_enum(gold: Any, config: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    gold, cfg = _prep_string("canonical_enum_equal", gold, config, {"choices": _is_str_list})
    if "choices" in cfg:
        choices = {canonical_enum(c) for c in cfg["choices"]}
        if not choices:
            raise ContractError("canonical_enum_equal: 'choices' is empty")
        if canonical_enum(gold) not in choices:
            raise ContractError(f"canonical_enum_equal: gold {gold!r} is not one of the declared choices")
    return gold, cfg


def canonical_enum_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_enum` form (or to an accepted spelling) and, when ``choices`` are
    declared, one of them.

    Config: ``accepted`` (list of strings), ``choices`` (list of strings: the enumeration; the
    gold must be one of them, and a prediction outside them is reported as such).
    """
    gold, cfg = _prep_enum(gold, config)
    if not isinstance(predicted, str):
        return _no(f"expected a string, got a {_kind(predicted)}")
    got = canonical_enum(predicted)
    if "choices" in cfg and got not in {canonical_enum(c) for c in cfg["choices"]} | {
        canonical_enum(a) for a in cfg.get("accepted", [])
    }:
        return _no(f"{got!r} (canonical) is not one of the declared choices")
    if got in {canonical_enum(gold), *(canonical_enum(a) for a in cfg.get("accepted", []))}:
        return _ok(f"matched as {got!r}")
    return _no(f"{got!r} (canonical) is not the expected value")


def _prep_citation(gold: Any, config: Mapping[str, Any] | None) -> tuple[tuple[str, tuple[str, ...]], dict[str, Any]]:
    cfg = _config("cited_clause_equal", config, {})
    try:
        return canonical_citation(gold), cfg
    except ValueError as exc:
        raise ContractError(f"cited_clause_equal: gold: {exc}") from None


def cited_clause_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Both cite the same standard and clause (:func:`canonical_citation`). A gold clause without a
    sub-clause does not constrain one: gold ``7.1`` accepts ``7.1`` and ``7.1.2``, never ``7``.

    Config: none.
    """
    (g_std, g_clause), _ = _prep_citation(gold, config)
    try:
        p_std, p_clause = canonical_citation(predicted)
    except ValueError as exc:
        return _no(f"not a citation: {exc}")
    if p_std != g_std:
        return _no(f"cites standard {p_std!r}, expected another")
    if p_clause[: len(g_clause)] != g_clause:
        return _no(f"cites clause {'.'.join(p_clause)!r}, which is not the expected clause or inside it")
    return _ok(f"cites {p_std} § {'.'.join(p_clause)}")


_TRUE = frozenset({"true", "yes"})
_FALSE = frozenset({"false", "no"})


def resolve_boolean(value: Any, *, strict: bool = False) -> bool:
    """A JSON boolean; unless ``strict``, also the strings true/false/yes/no (any case, trimmed).
    Numbers never resolve (``1`` is not ``true``). Raises ValueError otherwise."""
    value = _plain(value)
    if isinstance(value, bool):
        return value
    if not strict and isinstance(value, str):
        text = value.strip().casefold()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError(f"{_short(value)} is not a boolean")


def _prep_boolean(gold: Any, config: Mapping[str, Any] | None) -> tuple[bool, dict[str, Any]]:
    cfg = _config("boolean_equal", config, {"strict": _is_bool})
    gold = _plain(gold)
    if not isinstance(gold, bool):
        raise ContractError(f"boolean_equal: gold must be a JSON boolean, got {_kind(gold)}")
    return gold, cfg


def boolean_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Both resolve to the same boolean (:func:`resolve_boolean`).

    Config: ``strict`` (bool, default false: also read the strings true/false/yes/no).
    """
    gold, cfg = _prep_boolean(gold, config)
    try:
        got = resolve_boolean(predicted, strict=cfg.get("strict", False))
    except ValueError as exc:
        return _no(str(exc))
    return _ok() if got == gold else _no(f"answered {str(got).lower()}")


def _prep_integer(gold: Any, config: Mapping[str, Any] | None) -> tuple[int, dict[str, Any]]:
    cfg = _config("integer_equal", config, {})
    gold = _plain(gold)
    if not isinstance(gold, int) or isinstance(gold, bool):
        raise ContractError(f"integer_equal: gold must be an integer, got {_kind(gold)}")
    return gold, cfg


def integer_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Both are integers of equal value. A float (even ``3.0``), a string (``"3"``) or a boolean
    is never an integer. Config: none."""
    gold, _ = _prep_integer(gold, config)
    predicted = _plain(predicted)
    if not isinstance(predicted, int) or isinstance(predicted, bool):
        return _no(f"expected an integer, got a {_kind(predicted)}")
    return _ok() if predicted == gold else _no(f"answered {predicted}, which is not the expected integer")


def _prep_abs(gold: Any, config: Mapping[str, Any] | None) -> tuple[int | float, dict[str, Any]]:
    cfg = _config("abs_tolerance", config, {"tolerance": _is_tolerance}, required=("tolerance",))
    gold = _plain(gold)
    if not _is_number(gold):
        raise ContractError(f"abs_tolerance: gold must be a finite number, got {_short(gold)}")
    return gold, cfg


def abs_tolerance(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """A finite number (int or float, never a boolean or string) with ``|predicted - gold| <= tolerance``.

    Config: ``tolerance`` (required, a number >= 0, in the field's unit).
    """
    gold, cfg = _prep_abs(gold, config)
    predicted = _plain(predicted)
    if not _is_number(predicted):
        return _no(f"expected a finite number, got {_short(predicted)}")
    diff = abs(_frac(predicted) - _frac(gold))
    if diff <= _frac(cfg["tolerance"]):
        return _ok(f"off by {float(diff):.10g} (tolerance {cfg['tolerance']:g})")
    return _no(f"off by {float(diff):.10g}, tolerance {cfg['tolerance']:g}")


def _same_shape_numbers(gold: Any, tol: Any, path: str) -> None:
    """Check a gold vector (numbers nested in lists/objects) and, if structured, its tolerance."""
    if isinstance(gold, list):
        if not gold:
            raise ContractError(f"vector_abs_tolerance: gold{path} is an empty list")
        if isinstance(tol, list):
            if len(tol) != len(gold):
                raise ContractError(f"vector_abs_tolerance: tolerance{path} has {len(tol)} entries, gold {len(gold)}")
            for i, (g, t) in enumerate(zip(gold, tol, strict=True)):
                _same_shape_numbers(g, t, f"{path}[{i}]")
        elif _is_tolerance(tol):
            for i, g in enumerate(gold):
                _same_shape_numbers(g, tol, f"{path}[{i}]")
        else:
            raise ContractError(f"vector_abs_tolerance: tolerance{path} must be a number >= 0 or a list like the gold")
    elif isinstance(gold, dict):
        if not gold:
            raise ContractError(f"vector_abs_tolerance: gold{path} is an empty object")
        if isinstance(tol, dict):
            if set(tol) != set(gold):
                raise ContractError(f"vector_abs_tolerance: tolerance{path} names other keys than the gold")
            for k in gold:
                _same_shape_numbers(gold[k], tol[k], f"{path}[{k!r}]")
        elif _is_tolerance(tol):
            for k in gold:
                _same_shape_numbers(gold[k], tol, f"{path}[{k!r}]")
        else:
            raise ContractError(
                f"vector_abs_tolerance: tolerance{path} must be a number >= 0 or an object like the gold"
            )
    elif _is_number(gold):
        if not _is_tolerance(tol):
            raise ContractError(f"vector_abs_tolerance: tolerance{path} must be a number >= 0")
    else:
        raise ContractError(f"vector_abs_tolerance: gold{path} is a {_kind(gold)}, expected a number or a vector")


def _prep_vector(gold: Any, config: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]]:
    cfg = _config(
        "vector_abs_tolerance",
        config,
        {"tolerance": lambda v: _is_tolerance(v) or isinstance(v, (list, dict))},
        required=("tolerance",),
    )
    gold = _plain(gold)
    _same_shape_numbers(gold, cfg["tolerance"], "")
    return gold, cfg


def vector_abs_tolerance(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Leaf by leaf, at any nesting of lists and objects: every leaf a finite number within its
    tolerance of the gold leaf at the same place. The shape must match exactly (same list
    lengths, same object keys); order is kept, so ``[dy, dx]`` is not ``[dx, dy]``.

    Config: ``tolerance`` (required): one number for every component, or a structure shaped
    like the gold with a tolerance per component (a list may also hold one number for a whole
    sub-list).
    """
    gold, cfg = _prep_vector(gold, config)
    predicted = _plain(predicted)
    failures: list[str] = []

    def walk(p: Any, g: Any, t: Any, path: str) -> str | None:
        if isinstance(g, list):
            if not isinstance(p, list):
                return f"{path or 'value'} is a {_kind(p)}, expected a list of {len(g)}"
            if len(p) != len(g):
                return f"{path or 'value'} has {len(p)} components, expected {len(g)}"
            for i, (pi, gi) in enumerate(zip(p, g, strict=True)):
                why = walk(pi, gi, t[i] if isinstance(t, list) else t, f"{path}[{i}]")
                if why:
                    return why
            return None
        if isinstance(g, dict):
            if not isinstance(p, dict):
                return f"{path or 'value'} is a {_kind(p)}, expected an object"
            if set(p) != set(g):
                return f"{path or 'value'} has keys {sorted(p)}, expected {sorted(g)}"
            for k in g:
                why = walk(p[k], g[k], t[k] if isinstance(t, dict) else t, f"{path}[{k!r}]")
                if why:
                    return why
            return None
        if not _is_number(p):
            return f"{path or 'value'} is {_short(p)}, expected a finite number"
        diff = abs(_frac(p) - _frac(g))
        if diff > _frac(t):
            failures.append(f"{path or 'value'} off by {float(diff):.10g} (tolerance {t:g})")
        return None

    shape_error = walk(predicted, gold, cfg["tolerance"], "")
    if shape_error:
        return _no(shape_error)
    if failures:
        more = f" and {len(failures) - 1} more" if len(failures) > 1 else ""
        return _no(failures[0] + more)
    return _ok("every component within tolerance")


def _prep_circular(gold: Any, config: Mapping[str, Any] | None) -> tuple[int | float, dict[str, Any]]:
    cfg = _config(
        "circular_tolerance",
        config,
        {"tolerance": _is_tolerance, "modulus": lambda v: _is_number(v) and v > 0},
        required=("tolerance",),
    )
    cfg.setdefault("modulus", 360)
    if _frac(cfg["tolerance"]) * 2 >= _frac(cfg["modulus"]):
        raise ContractError(
            f"circular_tolerance: tolerance {cfg['tolerance']:g} is at least half the modulus {cfg['modulus']:g}, "
            "so every answer would match"
        )
    gold = _plain(gold)
    if not _is_number(gold):
        raise ContractError(f"circular_tolerance: gold must be a finite number, got {_short(gold)}")
    return gold, cfg


def circular_tolerance(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """A finite number whose distance to the gold on a circle of circumference ``modulus`` is at
    most ``tolerance``: the distance is ``min(d, modulus - d)`` with ``d = (predicted - gold) mod
    modulus`` (so 359 and 1 are 2 apart at modulus 360, and 179 and 1 are 2 apart at modulus 180).

    Config: ``tolerance`` (required, >= 0 and less than half the modulus), ``modulus`` (> 0,
    default 360).
    """
    gold, cfg = _prep_circular(gold, config)
    predicted = _plain(predicted)
    if not _is_number(predicted):
        return _no(f"expected a finite number, got {_short(predicted)}")
    m = _frac(cfg["modulus"])
    d = (_frac(predicted) - _frac(gold)) % m
    dist = min(d, m - d)
    if dist <= _frac(cfg["tolerance"]):
        return _ok(f"{float(dist):.10g} apart on the circle (tolerance {cfg['tolerance']:g})")
    return _no(f"{float(dist):.10g} apart on a circle of {cfg['modulus']:g}, tolerance {cfg['tolerance']:g}")


def _require_str(value: Any, canon: Callable[[str], str], what: str) -> str:
    value = _plain(value)
    if not isinstance(value, str):
        raise ValueError(f"{what} is a string, got {_kind(value)}")
    out = canon(value)
    if not out:
        raise ValueError(f"{what} is empty")
    return out


_ALPHABET: dict[str, Callable[[Any], bool]] = {"alphabet": lambda v: v in ("protein", "none")}

_Prep = Callable[[Any, Mapping[str, Any] | None], tuple[Any, dict[str, Any]]]
_Compare = Callable[[Any, Any, dict[str, Any]], FieldResult]


def _canonical_comparator(
    name: str,
    canon: Callable[[Any, dict[str, Any]], Any],
    what: str,
    allowed: Mapping[str, Callable[[Any], bool]] | None = None,
) -> tuple[_Prep, _Compare]:
    """The check and the comparison of a comparator that matches on one canonical form."""

    def prep(gold: Any, config: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        cfg = _config(name, config, allowed or {})
        try:
            return canon(gold, cfg), cfg
        except ValueError as exc:
            raise ContractError(f"{name}: gold: {exc}") from None

    def compare(predicted: Any, gold_canonical: Any, cfg: dict[str, Any]) -> FieldResult:
        try:
            got = canon(predicted, cfg)
        except ValueError as exc:
            return _no(f"not {what}: {exc}")
        if got == gold_canonical:
            return _ok(f"matched as {got!r}")
        return _no(f"{got!r} (canonical) differs from the gold")

    return prep, compare


_prep_atom_id, _cmp_atom_id = _canonical_comparator(
    "canonical_atom_id_equal", lambda v, cfg: canonical_atom_id(v), "an atom id"
)
_prep_atom_identity, _cmp_atom_identity = _canonical_comparator(
    "canonical_atom_identity_equal",
    lambda v, cfg: canonical_atom_identity(v, cfg.get("alphabet", "protein")),
    "an atom",
    _ALPHABET,
)
_prep_asset_id, _cmp_asset_id = _canonical_comparator(
    "canonical_asset_id_equal", lambda v, cfg: _require_str(v, canonical_asset_id, "an asset id"), "an asset id"
)
_prep_residue, _cmp_residue = _canonical_comparator(
    "canonical_residue_equal",
    lambda v, cfg: canonical_residue(v, cfg.get("alphabet", "protein")),
    "a residue",
    _ALPHABET,
)
_prep_space_group, _cmp_space_group = _canonical_comparator(
    "canonical_space_group_equal", lambda v, cfg: canonical_space_group(v), "a space group"
)


def canonical_atom_id_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_atom_id` form: a serial number or an atom name (``"C1*"`` is
    ``"c1'"`` is ``"C1'"``; ``17`` is ``"17"``). A name never equals a serial. Config: none."""
    gold, cfg = _prep_atom_id(gold, config)
    return _cmp_atom_id(predicted, gold, cfg)


def canonical_atom_identity_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_atom_identity` form: the atom as in ``canonical_atom_id_equal``,
    optionally qualified by chain and residue; every qualifier is compared, so a qualifier
    given on one side only is a mismatch. Config: ``alphabet`` (``"protein"`` default, or
    ``"none"``: how a one-letter residue name is read)."""
    gold, cfg = _prep_atom_identity(gold, config)
    return _cmp_atom_identity(predicted, gold, cfg)


def canonical_asset_id_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_asset_id` form (case-folded, ``/`` separators, no ``./`` prefix
    or trailing ``/``). Config: none."""
    gold, cfg = _prep_asset_id(gold, config)
    return _cmp_asset_id(predicted, gold, cfg)


def canonical_residue_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_residue` form: chain, name, number and insertion code all agree
    (a chain given on one side only is a mismatch). Config: ``alphabet`` (``"protein"``
    default: a one-letter amino-acid code reads as its three-letter name; ``"none"``: never)."""
    gold, cfg = _prep_residue(gold, config)
    return _cmp_residue(predicted, gold, cfg)


def canonical_space_group_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal in :func:`canonical_space_group` form. A number and a symbol agree only when the
    symbol is in the built-in table; otherwise symbols compare as canonical symbols. Config: none."""
    gold, cfg = _prep_space_group(gold, config)
    result = _cmp_space_group(predicted, gold, cfg)
    if not result.matched:
        try:
            got = canonical_space_group(predicted)
        except ValueError:
            return result
        if isinstance(got, int) != isinstance(gold, int):
            return _no(f"{got!r} and the expected group cannot be related: a symbol outside the built-in table")
    return result


def _json_element(value: Any) -> str:
    value = _plain(value)
    if not _is_json(value):
        raise ValueError(f"{_short(value)} is not JSON")
    return _exact_key(value)


# How canonical_set_equal keys each element: the canonical forms of the comparators of those names.
_ELEMENT_KEYS: dict[str, Callable[[Any], Any]] = {
    "exact": _json_element,
    "string": lambda v: _require_str(v, canonical_string, "a string"),
    "enum": lambda v: _require_str(v, canonical_enum, "an enumeration value"),
    "asset_id": lambda v: _require_str(v, canonical_asset_id, "an asset id"),
    "atom_id": canonical_atom_id,
    "residue": canonical_residue,
    "space_group": lambda v: _exact_key(canonical_space_group(v)),
}


def _prep_set(gold: Any, config: Mapping[str, Any] | None) -> tuple[Counter[Any], dict[str, Any]]:
    cfg = _config("canonical_set_equal", config, {"element": lambda v: v in _ELEMENT_KEYS})
    gold = _plain(gold)
    if not isinstance(gold, list):
        raise ContractError(f"canonical_set_equal: gold must be a list, got {_kind(gold)}")
    key = _ELEMENT_KEYS[cfg.get("element", "exact")]
    try:
        return Counter(key(g) for g in gold), cfg
    except ValueError as exc:
        raise ContractError(f"canonical_set_equal: gold element: {exc}") from None


def canonical_set_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """Equal as multisets of canonical elements: order is ignored, multiplicity counts
    (``["a", "a", "b"]`` is not ``["a", "b"]``).

    Config: ``element``, how each element is canonicalised: ``"exact"`` (default: type-strict
    JSON), ``"string"``, ``"enum"``, ``"asset_id"``, ``"atom_id"``, ``"residue"`` or
    ``"space_group"`` (the canonical forms of the comparators of those names).
    """
    gold_counts, cfg = _prep_set(gold, config)
    predicted = _plain(predicted)
    if not isinstance(predicted, list):
        return _no(f"expected a list, got a {_kind(predicted)}")
    key = _ELEMENT_KEYS[cfg.get("element", "exact")]
    try:
        got = Counter(key(p) for p in predicted)
    except ValueError as exc:
        return _no(f"an element is unreadable: {exc}")
    if got == gold_counts:
        return _ok(f"the same {sum(got.values())} element(s)")
    missing = sum((gold_counts - got).values())
    extra = sum((got - gold_counts).values())
    return _no(f"{missing} expected element(s) missing and {extra} unexpected")


def _prep_ordered(gold: Any, config: Mapping[str, Any] | None) -> tuple[list[str], dict[str, Any]]:
    cfg = _config(
        "ordered_string_vector_equal", config, {"canonical": lambda v: v in ("string", "enum", "exact")}
    )
    gold = _plain(gold)
    if not _is_str_list(gold):
        raise ContractError("ordered_string_vector_equal: gold must be a list of strings")
    return gold, cfg


def ordered_string_vector_equal(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """A list of strings of the gold's length, equal position by position (the index carries
    meaning, so order matters).

    Config: ``canonical``: ``"string"`` (default, :func:`canonical_string`), ``"enum"``
    (:func:`canonical_enum`) or ``"exact"`` (no canonicalisation).
    """
    gold, cfg = _prep_ordered(gold, config)
    predicted = _plain(predicted)
    if not _is_str_list(predicted):
        return _no("expected a list of strings")
    if len(predicted) != len(gold):
        return _no(f"has {len(predicted)} entries, expected {len(gold)}")
    form = cfg.get("canonical", "string")
    canon: Callable[[str], str] = {"string": canonical_string, "enum": canonical_enum, "exact": lambda s: s}[form]
    wrong = [i for i, (p, g) in enumerate(zip(predicted, gold, strict=True)) if canon(p) != canon(g)]
    if wrong:
        return _no(f"{len(wrong)} position(s) differ, first at index {wrong[0]}")
    return _ok(f"all {len(gold)} positions equal")


# --------------------------------------------------------------------------- packed regions


def pack_region(mask: Any) -> dict[str, Any]:
    """A boolean mask as a packed region: ``{"shape": [...], "packed": <base64 of np.packbits>}``.

    Bits are packed in C order, most significant bit first (numpy's default ``bitorder="big"``).
    """
    arr = np.asarray(mask)
    if arr.dtype != bool:
        raise ValueError(f"a region mask is boolean, got dtype {arr.dtype}")
    if arr.ndim < 1:
        raise ValueError("a region mask has at least one dimension")
    packed = np.packbits(arr.ravel(order="C"))
    return {"shape": [int(s) for s in arr.shape], "packed": base64.b64encode(packed.tobytes()).decode("ascii")}


def unpack_region(region: Any) -> np.ndarray:
    """The boolean mask of a packed region (see :func:`pack_region`). ``packed`` may be base64
    text, bytes, a uint8 array or a list of byte values. Raises ValueError when malformed."""
    if not isinstance(region, Mapping) or set(region) != {"shape", "packed"}:
        raise ValueError("a packed region is an object with exactly 'shape' and 'packed'")
    shape = _plain(region["shape"])
    if (
        not isinstance(shape, list)
        or not shape
        or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)
    ):
        raise ValueError(f"the region's shape {_short(shape)} is not a list of positive integers")
    packed = region["packed"]
    if isinstance(packed, str):
        try:
            raw = np.frombuffer(base64.b64decode(packed.encode("ascii"), validate=True), dtype=np.uint8)
        except (ValueError, UnicodeEncodeError) as exc:
            raise ValueError(f"the region's packed bits are not base64: {exc}") from None
    elif isinstance(packed, (bytes, bytearray)):
        raw = np.frombuffer(bytes(packed), dtype=np.uint8)
    elif isinstance(packed, np.ndarray):
        if packed.dtype != np.uint8 or packed.ndim != 1:
            raise ValueError(
                f"the region's packed bits are a {packed.dtype} array of {packed.ndim} dims, expected 1-D uint8"
            )
        raw = packed
    elif isinstance(packed, list) and all(
        isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in packed
    ):
        raw = np.asarray(packed, dtype=np.uint8)
    else:
        raise ValueError("the region's packed bits are neither base64 text, bytes, a uint8 array nor byte values")
    size = math.prod(shape)
    if raw.size != (size + 7) // 8:
        raise ValueError(f"the region holds {raw.size} packed bytes; shape {shape} needs {(size + 7) // 8}")
    return np.unpackbits(raw, count=size).astype(bool).reshape(shape)


def _prep_voxel(gold: Any, config: Mapping[str, Any] | None) -> tuple[np.ndarray, dict[str, Any]]:
    cfg = _config("voxel_member_of_set", config, {"round": _is_bool})
    try:
        mask = unpack_region(gold)
    except ValueError as exc:
        raise ContractError(f"voxel_member_of_set: gold region: {exc}") from None
    if not mask.any():
        raise ContractError("voxel_member_of_set: the gold region is empty, so no answer could match")
    return mask, cfg


def voxel_member_of_set(predicted: Any, gold: Any, config: Mapping[str, Any] | None = None) -> FieldResult:
    """The predicted voxel index lies inside the gold's packed region (the mask is the tolerance).

    The prediction is a list of integer indices, one per axis of the region, in the region's
    axis order (e.g. ``[z, y, x]``). Negative or out-of-range indices are outside (there is no
    wrap-around). Floats are refused unless ``round`` is set, when they round half away from zero.
    Gold: ``{"shape": [...], "packed": ...}`` (:func:`pack_region`). Config: ``round`` (bool).
    """
    mask, cfg = _prep_voxel(gold, config)
    predicted = _plain(predicted)
    if not isinstance(predicted, list) or len(predicted) != mask.ndim:
        return _no(f"expected a list of {mask.ndim} voxel indices, got {_short(predicted)}")
    index: list[int] = []
    for axis, value in enumerate(predicted):
        if isinstance(value, int) and not isinstance(value, bool):
            index.append(value)
        elif cfg.get("round") and _is_number(value):
            index.append(int(math.copysign(math.floor(abs(value) + 0.5), value)))
        else:
            return _no(f"index {axis} is {_short(value)}, expected an integer")
    for axis, (i, n) in enumerate(zip(index, mask.shape, strict=True)):
        if not 0 <= i < n:
            return _no(f"index {axis} = {i} lies outside the volume (0..{n - 1})")
    if mask[tuple(index)]:
        return _ok(f"voxel {index} is inside the region")
    return _no(f"voxel {index} is outside the region")


# --------------------------------------------------------------------------- registries

COMPARATORS: dict[str, Comparator] = {
    "exact": exact,
    "canonical_string_equal": canonical_string_equal,
    "canonical_enum_equal": canonical_enum_equal,
    "cited_clause_equal": cited_clause_equal,
    "boolean_equal": boolean_equal,
    "integer_equal": integer_equal,
    "abs_tolerance": abs_tolerance,
    "vector_abs_tolerance": vector_abs_tolerance,
    "circular_tolerance": circular_tolerance,
    "canonical_atom_id_equal": canonical_atom_id_equal,
    "canonical_atom_identity_equal": canonical_atom_identity_equal,
    "canonical_asset_id_equal": canonical_asset_id_equal,
    "canonical_residue_equal": canonical_residue_equal,
    "canonical_space_group_equal": canonical_space_group_equal,
    "canonical_set_equal": canonical_set_equal,
    "ordered_string_vector_equal": ordered_string_vector_equal,
    "voxel_member_of_set": voxel_member_of_set,
}

# Each comparator's own check of gold and config; raises ContractError when either is malformed.
PREPARERS: dict[str, Callable[[Any, Mapping[str, Any] | None], Any]] = {
    "exact": _prep_exact,
    "canonical_string_equal": lambda g, c: _prep_string("canonical_string_equal", g, c),
    "canonical_enum_equal": _prep_enum,
    "cited_clause_equal": _prep_citation,
    "boolean_equal": _prep_boolean,
    "integer_equal": _prep_integer,
    "abs_tolerance": _prep_abs,
    "vector_abs_tolerance": _prep_vector,
    "circular_tolerance": _prep_circular,
    "canonical_atom_id_equal": _prep_atom_id,
    "canonical_atom_identity_equal": _prep_atom_identity,
    "canonical_asset_id_equal": _prep_asset_id,
    "canonical_residue_equal": _prep_residue,
    "canonical_space_group_equal": _prep_space_group,
    "canonical_set_equal": _prep_set,
    "ordered_string_vector_equal": _prep_ordered,
    "voxel_member_of_set": _prep_voxel,
}

# The canonical forms exposed for inspection (see the module docstring for which are fixed points).
CANONICAL_FORMS: dict[str, Callable[[Any], Any]] = {
    "canonical_string_equal": canonical_string,
    "canonical_enum_equal": canonical_enum,
    "cited_clause_equal": canonical_citation,
    "canonical_atom_id_equal": canonical_atom_id,
    "canonical_atom_identity_equal": canonical_atom_identity,
    "canonical_asset_id_equal": canonical_asset_id,
    "canonical_residue_equal": canonical_residue,
    "canonical_space_group_equal": canonical_space_group,
}


def exemplar_answer(comparator: str, gold: Any) -> Any:
    """A prediction that the comparator must accept for this gold: the gold itself, except for
    ``voxel_member_of_set``, whose gold is a region (the answer is its first voxel in C order)."""
    if comparator == "voxel_member_of_set":
        mask = unpack_region(gold)
        return [int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape)]
    return _plain(gold)


# One worked example per comparator: (gold, config, a prediction that matches, one that does not).
EXAMPLES: dict[str, tuple[Any, dict[str, Any], Any, Any]] = {
    "exact": ({"a": [1, 2.5]}, {}, {"a": [1, 2.5]}, {"a": [1.0, 2.5]}),
    "canonical_string_equal": ("Mitochondrion", {"accepted": ["mitochondria"]}, "  MITOCHONDRIA ", "nucleus"),
    "canonical_enum_equal": ("cell_cycle", {"choices": ["cell_cycle", "apoptosis"]}, "Cell-Cycle", "apoptosis"),
    "cited_clause_equal": (["ISO 9001:2015", "7.1"], {}, "iso 9001:2015 § 7.1.2", ["ISO 9001:2015", "7"]),
    "boolean_equal": (True, {}, "yes", 1),
    "integer_equal": (3, {}, 3, "3"),
    "abs_tolerance": (1.5, {"tolerance": 0.1}, 1.6, 1.7),
    "vector_abs_tolerance": ([1.0, -2.0], {"tolerance": [0.5, 0.25]}, [1.4, -2.2], [-2.0, 1.0]),
    "circular_tolerance": (179.0, {"tolerance": 3, "modulus": 180}, 1.0, 90.0),
    "canonical_atom_id_equal": ("C1'", {}, "c1*", "C2'"),
    "canonical_atom_identity_equal": ("A:GLY12:CA", {}, {"chain": "A", "residue": "G12", "atom": "ca"}, "B:GLY12:CA"),
    "canonical_asset_id_equal": ("volumes/cell_01.tif", {}, "./Volumes//CELL_01.tif", "volumes/cell_02.tif"),
    "canonical_residue_equal": ("A:LYS57", {}, "A:k 57", "B:LYS57"),
    "canonical_space_group_equal": ("P 21 21 21", {}, 19, "P 21 21 2"),
    "canonical_set_equal": (["a", "b", "b"], {"element": "string"}, ["B", "a", "b"], ["a", "b"]),
    "ordered_string_vector_equal": (["x", "y", "z"], {}, ["X", "y", " z"], ["y", "x", "z"]),
    "voxel_member_of_set": (
        pack_region(np.pad(np.ones((2, 2, 2), bool), 1)),
        {},
        [1, 2, 1],
        [0, 0, 0],
    ),
}
