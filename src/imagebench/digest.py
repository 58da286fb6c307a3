"""Digests and their plain-text forms: the primitives every fingerprint and fixture digest shares.

A digest is ``sha256:<hex>``; JSON is hashed in one canonical form (sorted keys, no whitespace,
ASCII, no NaN); a reason that may carry a machine path is scrubbed to ``<path>`` before it is
kept, because a fingerprint names roles, never locators.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

PREFIX = "sha256:"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class FingerprintError(ValueError):
    """A case cannot be fingerprinted (an input cannot be read or has no stable form)."""


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, ASCII, no NaN: the only text this module hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def digest_bytes(data: bytes) -> str:
    return PREFIX + hashlib.sha256(data).hexdigest()


def digest_text(text: str) -> str:
    """Digest of ``text`` as UTF-8; a string that is not valid Unicode text raises FingerprintError."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FingerprintError(f"not valid UTF-8 text ({exc.reason} at character {exc.start})") from None
    return digest_bytes(data)


def digest_json(obj: Any) -> str:
    return digest_bytes(canonical_json(obj).encode("ascii"))


def is_digest(value: Any) -> bool:
    return isinstance(value, str) and bool(_DIGEST.match(value))


_PATH = re.compile(r"(?:(?<=[\s'\"(=])|^)(?:/|~/|[A-Za-z]:\\)[^\s'\"():,;]*")


def scrub(text: str) -> str:
    """``text`` with every absolute path replaced by ``<path>`` (reasons name roles, never locators)."""
    return _PATH.sub("<path>", text)


def names_for_paths(text: str) -> str:
    """``text`` with every absolute path replaced by its last name (``/home/me/agent.py`` ->
    ``agent.py``): how a record hands on a command without the machine it ran on."""
    return _PATH.sub(lambda m: m.group(0).rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] or "<path>", text)
