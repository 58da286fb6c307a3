"""Sealed seeds: each sample of a procedural case is built from a seed derived from a secret.

A procedural case's seed is a constant in its source, so anyone who reads the source can rebuild
its fixture, truth included. A *sealed* run is given a secret (``imagebench run --sealed`` or
``--sealed-file``) and builds every sample of every procedural case from its own seed::

    seed = int.from_bytes(HMAC-SHA256(key=secret, msg=fingerprint + b"\\0" + str(sample))[:8], "big") & (2**63 - 1)

``fingerprint`` is the case's definition fingerprint
(:func:`imagebench.runs.fingerprint.definition_fingerprint`: every input of the case but its seed and
the fixture built from it, so a derived seed never feeds back into what it is derived from) and
``sample`` the sample index. Without the secret the seeds cannot be told; with it the run is
reproduced exactly. A case judged across its samples (``case.verify.across_samples``, a bundle's
rerun class) compares its samples' answers with each other, so its samples share one fixture: all
of them get the seed of sample 0. Curated (on-disk) fixtures have no seed and are not affected.

The secret stays in the process that holds the :class:`Seal` (it refuses to be pickled): the
helper process and dask workers get seeds, never the secret. A run folder records only that the
run is sealed and a *commitment* to the secret, ``sha256(b"imagebench-sealed\\0" + secret)``
(:func:`commitment`), under ``run.json`` ``extra["sealed"]``: two runs with the same commitment
used the same secret. Each sample's seed is written into its ``summary.json`` once it is scored.
A short or guessable secret can be found again from its commitment: use a random one (32 bytes).

**Sealed by default.** An untrusted subject (a command, an MCP agent, an isolated function:
:func:`imagebench.subjects.is_trusted`) run without a secret is sealed anyway, with a fresh random
secret of 32 bytes (:func:`default_seal`). That secret is kept in the user's state folder
(:mod:`imagebench.state`, ``seals/<commitment hex>``), outside every run folder and hidden from
subjects, so the run can be resumed (:func:`stored_seal` finds it by the commitment ``run.json``
records) and reproduced by whoever holds the state folder. ``run.json`` records such a seal with
``"origin": "default"``. Opting out (``--unsealed``) is recorded as ``extra["unsealed"]`` and named
by ``compare``'s conditions. Trusted subjects keep the public seeds.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from imagebench.case.model import Case

#: ``run.json`` ``extra`` key of a sealed run's record (see :meth:`Seal.record`).
RECORD_KEY = "sealed"
#: ``run.json`` ``extra`` key set when an untrusted subject was run unsealed on purpose (``--unsealed``).
UNSEALED_KEY = "unsealed"
#: The state folder's folder of default seals' secrets (one file per commitment).
SEALS_DIR = "seals"
#: What the commitment hashes before the secret (a sealed commitment is never another sha256 of it).
COMMITMENT_TAG = b"imagebench-sealed\0"
SEED_MASK = (1 << 63) - 1
SCHEME = "hmac-sha256(secret, definition fingerprint NUL sample)[:8] & (2**63-1)"


class SealedError(ValueError):
    """A secret cannot be used (empty, or its file is missing or unreadable), or a case cannot be sealed."""


def secret_bytes(secret: str | bytes) -> bytes:
    """``secret`` as bytes (text as UTF-8); an empty secret raises :class:`SealedError`."""
    data = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    if not data:
        raise SealedError("the sealed secret is empty")
    return data


def read_secret_file(path: str | os.PathLike[str]) -> bytes:
    """The secret held in ``path``: its bytes with surrounding whitespace stripped.

    A file that is missing, unreadable or holds only whitespace raises :class:`SealedError`
    naming the file.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise SealedError(f"sealed-secret file {path}: no such file") from None
    except OSError as exc:
        raise SealedError(f"sealed-secret file {path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    data = data.strip()
    if not data:
        raise SealedError(f"sealed-secret file {path}: it is empty (it must hold the secret)")
    return data


def commitment(secret: str | bytes) -> str:
    """``"sha256:<hex>"`` of ``b"imagebench-sealed\\0" + secret``: names the secret without revealing it."""
    return "sha256:" + hashlib.sha256(COMMITMENT_TAG + secret_bytes(secret)).hexdigest()


def derive_seed(secret: str | bytes, fingerprint: str, sample: int) -> int:
    """The seed of sample ``sample`` of the case whose definition fingerprint is ``fingerprint``.

    A non-negative integer below 2**63: the first 8 bytes of HMAC-SHA256(secret, fingerprint NUL
    sample), big-endian, with the top bit cleared. Deterministic; a different secret, case or
    sample gives an unrelated seed.
    """
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise ValueError(f"sample must be an index >= 0, got {sample!r}")
    message = fingerprint.encode("utf-8") + b"\0" + str(sample).encode("ascii")
    digest = hmac.digest(secret_bytes(secret), message, "sha256")
    return int.from_bytes(digest[:8], "big") & SEED_MASK


def sealable(case: Case) -> bool:
    """Whether ``case``'s fixture is built from a seed (a :class:`~imagebench.fixtures.specs.Procedural` spec)."""
    from imagebench.fixtures.specs import Procedural

    return isinstance(case.fixture, Procedural)


def shares_fixture(case: Case) -> bool:
    """Whether ``case``'s samples must share one fixture: it is judged across them (a rerun case)."""
    return callable(getattr(case.verify, "across_samples", None))


def recorded_commitment(extra: Mapping[str, Any]) -> str | None:
    """The commitment a ``run.json`` ``extra`` records, None for a run that was not sealed."""
    entry = extra.get(RECORD_KEY)
    if isinstance(entry, Mapping) and isinstance(entry.get("commitment"), str):
        return entry["commitment"]
    return None


@dataclass(frozen=True)
class Seal:
    """A sealed run's secret, held by the process that drives the run (it cannot be pickled)."""

    secret: bytes = field(repr=False)
    # "given" (--sealed/--sealed-file, the Python API) or "default" (made for an untrusted subject)
    origin: str = "given"

    def __post_init__(self) -> None:
        object.__setattr__(self, "secret", secret_bytes(self.secret))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Seal:
        return cls(read_secret_file(path))

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Seal holds a run's secret and never leaves the process that holds it")

    @property
    def commitment(self) -> str:
        return commitment(self.secret)

    def record(self) -> dict[str, Any]:
        """What ``run.json`` keeps under ``extra["sealed"]``: the commitment and the scheme, never the secret."""
        out = {"commitment": self.commitment, "scheme": SCHEME}
        if self.origin != "given":
            out["origin"] = self.origin
        return out

    def seed(self, fingerprint: str, sample: int) -> int:
        return derive_seed(self.secret, fingerprint, sample)

    def seeds(self, cases: Iterable[Case], samples: int) -> dict[str, list[int]]:
        """``{label: [seed of sample 0, 1, ...]}`` for every procedural case of ``cases``.

        ``samples`` is the run's samples per case (a case may ask for more, ``min_samples``).
        A case whose definition cannot be fingerprinted raises :class:`SealedError` naming it:
        it cannot be sealed.
        """
        from imagebench.runs.fingerprint import (
            FingerprintError,
            RevisionError,
            definition_fingerprint,
        )
        from imagebench.runs.verdict import samples_for

        out: dict[str, list[int]] = {}
        for case in cases:
            if not sealable(case):
                continue
            try:
                fingerprint = definition_fingerprint(case)
            except (FingerprintError, RevisionError) as exc:
                raise SealedError(f"case {case.label} cannot be sealed: {exc}") from None
            n = samples_for(case, samples)
            if shares_fixture(case):
                out[case.label] = [self.seed(fingerprint, 0)] * n
            else:
                out[case.label] = [self.seed(fingerprint, i) for i in range(n)]
        return out


def _seal_path(commitment_text: str) -> Path:
    from imagebench.state import state_dir

    hexpart = commitment_text.removeprefix("sha256:")
    if len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
        raise SealedError(f"{commitment_text!r} is not a seal's commitment (sha256:<64 hex>)")
    return state_dir(SEALS_DIR) / hexpart


def default_seal() -> Seal:
    """A fresh seal for a run of an untrusted subject: 32 random bytes, kept in the state folder
    under its commitment (so :func:`stored_seal` finds it for a resume). SealedError when the state
    folder cannot hold it."""
    from imagebench.state import StateError, write_secret

    seal = Seal(os.urandom(32), origin="default")
    try:
        write_secret(_seal_path(seal.commitment), seal.secret.hex().encode("ascii") + b"\n")
    except StateError as exc:
        raise SealedError(f"the run's default seal cannot be kept: {exc}") from None
    return seal


def stored_seal(commitment_text: str) -> Seal | None:
    """The default seal whose commitment is ``commitment_text``, from the state folder; None when
    this state folder does not hold it."""
    from imagebench.state import StateError, read_secret

    try:
        data = read_secret(_seal_path(commitment_text))
    except StateError as exc:
        raise SealedError(f"the run's default seal cannot be read: {exc}") from None
    if data is None:
        return None
    try:
        seal = Seal(bytes.fromhex(data.decode("ascii").strip()), origin="default")
    except (ValueError, UnicodeDecodeError):
        raise SealedError(f"the state folder's seal {commitment_text[:19]}... is not hex text") from None
    if seal.commitment != commitment_text:
        raise SealedError(f"the state folder's seal {commitment_text[:19]}... does not match its commitment")
    return seal


def sealing_of(extra: Mapping[str, Any]) -> str:
    """How a run's procedural fixtures were seeded, in words ``compare`` checks: ``sealed`` (a secret
    given), ``sealed by default`` (a fresh secret, for an untrusted subject), ``unsealed`` (an
    untrusted subject opted out) or ``public seeds``."""
    entry = extra.get(RECORD_KEY)
    if isinstance(entry, Mapping):
        return "sealed by default" if entry.get("origin") == "default" else "sealed"
    return "unsealed" if extra.get(UNSEALED_KEY) else "public seeds"


__all__ = [
    "RECORD_KEY",
    "SEALS_DIR",
    "UNSEALED_KEY",
    "default_seal",
    "sealing_of",
    "stored_seal",
    "SCHEME",
    "Seal",
    "SealedError",
    "commitment",
    "derive_seed",
    "read_secret_file",
    "recorded_commitment",
    "sealable",
    "secret_bytes",
    "shares_fixture",
]
