"""The canonical forms the comparators match on, each a pure function of one value.

The string forms (string, enum, asset id, atom id, space group) are fixed points of themselves:
canonicalising a canonical form changes nothing. The others (citation, residue, qualified atom)
are comparison keys. Each raises ValueError for a value it cannot read, which a comparator turns
into a mismatch for a prediction and into a blocked contract for a gold value.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from imagebench.scoring.values import kind, plain, short


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
    value = plain(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"atom serial {value} is negative")
        return f"#{value}"
    if not isinstance(value, str):
        raise ValueError(f"an atom id is a name or a serial number, got {kind(value)}")
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
    value = plain(value)
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
            raise ValueError(f"{short(value)} is not a residue id such as 'A:GLY12' or 'G12'")
        chain, name, icode = m.group("chain") or "", m.group("name") or "", m.group("icode") or ""
        number = int(m.group("num"))
    else:
        raise ValueError(f"a residue id is a string or an object, got {kind(value)}")
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
    value = plain(value)
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
            raise ValueError(f"{short(value)} is not 'chain:residue:atom', 'residue:atom' or an atom id")
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
    value = plain(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= 230:
            raise ValueError(f"space-group number {value} is outside 1-230")
        return value
    if not isinstance(value, str):
        raise ValueError(f"a space group is a symbol or a number, got {kind(value)}")
    text = value.strip()
    if text.isdigit() and text.isascii():
        return canonical_space_group(int(text))
    symbol = _space_group_symbol(text)
    if not symbol or not symbol[0].isalpha() or not symbol.isascii():
        raise ValueError(f"{short(value)} is not a Hermann-Mauguin symbol")
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
    value = plain(value)
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
        raise ValueError(f"a citation is a [standard, clause] pair, got {kind(value)}")
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


_TRUE = frozenset({"true", "yes"})
_FALSE = frozenset({"false", "no"})


def resolve_boolean(value: Any, *, strict: bool = False) -> bool:
    """A JSON boolean; unless ``strict``, also the strings true/false/yes/no (any case, trimmed).
    Numbers never resolve (``1`` is not ``true``). Raises ValueError otherwise."""
    value = plain(value)
    if isinstance(value, bool):
        return value
    if not strict and isinstance(value, str):
        text = value.strip().casefold()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError(f"{short(value)} is not a boolean")


def require_str(value: Any, canon: Callable[[str], str], what: str) -> str:
    """``canon(value)`` for a non-empty string; raises ValueError for anything else."""
    value = plain(value)
    if not isinstance(value, str):
        raise ValueError(f"{what} is a string, got {kind(value)}")
    out = canon(value)
    if not out:
        raise ValueError(f"{what} is empty")
    return out

