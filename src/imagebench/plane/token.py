"""The plane's read tokens: what a call must carry to read a plane started with a read key.

The process that starts a plane gives it a fresh read key (:data:`READ_KEY_ENV`, in the server's
environment only, never on its command line, in a run folder or in a receipt). A call carries a
token in its ``authorization`` header (``Bearer <token>``); the server checks it on every call
(list, describe, ``do_get``, every action, uploads) before the handler runs.

Two kinds of token:

- the read key itself: the harness's, reads everything stored (the driver's fingerprints);
- a *scoped* token, ``ids.<id>,<id>,....<nonce>.<mac>`` with ``mac = HMAC-SHA256(read key, nonce
  and ids)``: reads only those ids and what was uploaded with that same token. This is what one
  sample is given (a worker's harness, and the subject through it): its own fixture's arrays,
  never another sample's or another case's, and it cannot be widened without the key (the mac
  would not match). Each is minted with a fresh nonce, so two samples of one case (the same ids)
  hold different tokens and neither reads what the other uploaded.

This module is pure: no pyarrow, no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from imagebench.plane.protocol import is_valid_id

#: The read key the process that starts a plane gives it (the server takes it out of its environment).
READ_KEY_ENV = "IMAGEBENCH_PLANE_READ_KEY"
#: Where a ``command:`` subject finds its scoped token (beside ``$IMAGEBENCH_TENSOR_URL``).
TENSOR_TOKEN_ENV = "IMAGEBENCH_TENSOR_TOKEN"
#: The call header that carries a token.
HEADER = "authorization"
SCHEME = "Bearer "
_SCOPED = "ids."
_CONTEXT = b"imagebench-plane-read\0"


@dataclass(frozen=True)
class Grant:
    """What a token lets a call read: everything (``full``), or ``ids`` and the uploads made under ``scope``."""

    full: bool
    ids: frozenset[str] = frozenset()
    scope: str = ""  # the scoped token's mac: the key under which its own uploads are kept


def _mac(key: str, nonce: str, ids: str) -> str:
    return hmac.new(key.encode(), _CONTEXT + nonce.encode() + b"\0" + ids.encode(), hashlib.sha256).hexdigest()


def scoped_token(key: str, ids: Iterable[str], nonce: str | None = None) -> str:
    """A token that reads only ``ids`` (and what is uploaded with it) on the plane holding ``key``;
    a fresh one on every call unless ``nonce`` is given."""
    listed = sorted(set(ids))
    for sid in listed:
        if not is_valid_id(sid):
            raise ValueError(f"a scoped read token names plane ids only, not {sid!r}")
    joined = ",".join(listed)
    nonce = secrets.token_hex(8) if nonce is None else nonce
    if not nonce.isalnum():
        raise ValueError(f"a token's nonce is letters and digits, not {nonce!r}")
    return f"{_SCOPED}{joined}.{nonce}.{_mac(key, nonce, joined)}"


def grant_of(key: str, token: str | None) -> Grant | None:
    """What ``token`` may read on the plane holding ``key``; None for no token or a wrong one."""
    if not token:
        return None
    if hmac.compare_digest(token.encode(), key.encode()):
        return Grant(full=True)
    if not token.startswith(_SCOPED) or token.count(".") != 3:
        return None
    joined, nonce, mac = token[len(_SCOPED) :].split(".")
    if not hmac.compare_digest(mac.encode(), _mac(key, nonce, joined).encode()):
        return None
    ids = frozenset(joined.split(",")) if joined else frozenset()
    return Grant(full=False, ids=ids, scope=mac)


def bearer(headers: dict[str, list[str]] | dict[str, list[bytes]]) -> str | None:
    """The token of a call's headers (``authorization: Bearer <token>``), None when there is none."""
    values = headers.get(HEADER) or []
    for value in values:
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        if text.startswith(SCHEME):
            return text[len(SCHEME) :]
    return None
