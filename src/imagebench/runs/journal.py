"""The run journal and the run lock: what makes a run folder resumable.
Long because the journal's lines, their signing and chaining, the check a reader makes and the lock are one on-disk contract.

``journal.jsonl`` in a run folder is an append-only log, one JSON object per line, each line
flushed and fsync'd before the run goes on:

- ``start`` when a run begins, ``resume`` each time ``imagebench run --resume`` takes it up again,
  ``end`` when a pass over the run finished (``complete`` says whether every unit is done);
- ``unit`` for every finished ``(case, sample)``: its label, sample, status, the summary's path
  relative to the run folder and the sha256 of the summary's bytes (which records the sha256 of
  every artifact beside it, so those are anchored too), and (since version 3) ``brief``
  (:class:`UnitBrief`): the summary's size and what a report's figures read of it (the fixture's
  digest, whether it passed, each metric's value, limit and verdict), signed with the line, so a
  report can count a sample it does not show from the verified journal alone;
- ``case`` each time a case's ``summary.json`` is written (its label, path, sha256 and verdict):
  its check across samples (a bundle's rerun class) can turn a pass into a fail, so it is anchored
  as a sample's summary is. Journals of version 1 (before this line) have none.

The order of writes is what makes a resume safe: a unit's ``summary.json`` is written atomically
(and is the last file of its sample folder) *before* its journal line. So a run killed at any
moment leaves, for each unit, either a complete summary or none; at worst a complete summary
whose journal line never made it (the resume runs that unit again: the journal never vouched for
that summary, which could have been put there), or a torn last journal line (dropped on the next
open). A journal line whose digest no longer matches its summary means the summary was changed
afterwards: the folder is named forged until a resume runs the unit again, and that resume's
signed line lists it.

**The journal is anchored.** Every line carries ``key`` (the id of the journal key) and ``mac``:
HMAC-SHA256 under the journal key of the previous line's ``mac`` (the run's id for the first
line), a newline, and the line's own bytes without its ``mac``. The key is 32 random bytes kept in
the user's state folder (:mod:`imagebench.state`, ``journal.key``, made on first use), never in a
run folder and hidden from subjects. So a run folder whose summaries and journal were rewritten
together (a ``nop`` run forged to ``ok``, its digests recomputed) no longer verifies: whoever does
not hold the key cannot make a line that does. The ``start`` line signs ``run.json``'s fixed
fields (:func:`record_fields`); the state folder keeps every journal's anchor, updated at each
line (:data:`ANCHORS_DIR`). :func:`check_journal` names every line that fails, a line without a
``mac`` in an anchored journal, a journal shorter than the state folder's anchor, and one shorter than the anchor its run's
receipt records (``receipt.json`` ``journal``: the key id, the last line's ``mac`` and the line
count and ``sig``, their MAC: rewritten at the end of every pass). Whoever holds the key can
forge; a subject cannot.

:class:`RunLock` is an exclusive ``flock`` on ``<run>/.lock``, held by whoever writes the run,
so two processes never resume the same folder at once. A killed process releases it (a stale
file then stays, unlocked); one that finishes or is interrupted removes the file as it lets go.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError

from imagebench.records import Record

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, SampleSummary

JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = ".lock"
#: 2 added the ``case`` line; a journal whose first line is of version 2 or later journals every
#: case summary it writes (:mod:`imagebench.runs.reader` holds it to that). 3 added a unit line's
#: ``brief``; a unit line without one (version 1 or 2) is read as before: its summary whole.
JOURNAL_SCHEMA_VERSION = 3
CASE_LINES_SINCE = 2
BRIEF_SINCE = 3
#: The journal key's file in the state folder (its 32 bytes as hex text).
KEY_NAME = "journal.key"
_KEY_ID_TAG = b"imagebench-journal-key\0"
_MAC_TAIL = re.compile(rb',"mac":"([0-9a-f]{64})"\}$')

Event = Literal["start", "resume", "unit", "case", "end"]


class JournalError(ValueError):
    """The journal cannot be read (names the file, the line and what was expected)."""


class RunLocked(RuntimeError):
    """Another process holds the run folder's lock."""


class UnitBrief(Record):
    """What a ``unit`` line says of its summary beyond its digest (journal version 3): its size in
    bytes and what the figures of a report read of it, so that a sample a page does not show is
    counted from its signed line (its summary checked against it in full by ``imagebench report
    --check-all``). ``metrics`` holds each metric as ``[name, value, limit, verdict]``."""

    bytes: int
    fixture: str | None = None
    passed: bool = False
    metrics: list[tuple[str, float | None, float | None, str]] = Field(default_factory=list)


def brief_of(summary: SampleSummary, data: bytes) -> UnitBrief:
    """The :class:`UnitBrief` of a sample summary whose bytes are ``data``."""
    return UnitBrief(
        bytes=len(data),
        fixture=summary.fixture_digest,
        passed=bool(summary.passed),
        metrics=[(m.name, m.value, m.limit, m.verdict) for m in summary.metrics],
    )


class JournalEntry(Record):
    """One line of ``journal.jsonl``."""

    schema_version: Literal[1, 2, 3] = JOURNAL_SCHEMA_VERSION
    event: Event
    time: str
    pid: int | None = None
    label: str | None = None
    sample: int | None = None
    status: str | None = None
    summary: str | None = None  # path of the unit's (or the case's) summary.json, relative to the run folder
    sha256: str | None = None  # of the summary's bytes
    detail: dict[str, Any] | None = None
    brief: UnitBrief | None = None  # a unit line's (version 3 on): its summary's size and figures
    key: str | None = None  # the id of the journal key the line is signed with
    mac: str | None = None  # HMAC-SHA256 chaining the line to the one before it (see the module)


# --------------------------------------------------------------------------- the key


def key_id_of(key: bytes) -> str:
    """The public name of a journal key: ``jk-`` and 16 hex of sha256 over a tag and the key."""
    return "jk-" + hashlib.sha256(_KEY_ID_TAG + key).hexdigest()[:16]


def journal_key() -> tuple[bytes, str]:
    """``(key, key id)`` of this state folder's journal key, made (32 random bytes) on first use.
    JournalError when the state folder cannot hold it: a run that cannot be anchored does not start."""
    from imagebench.state import StateError, state_dir, write_secret

    try:
        path = state_dir() / KEY_NAME
        text = write_secret(path, os.urandom(32).hex().encode("ascii") + b"\n")
        key = bytes.fromhex(text.decode("ascii").strip())
    except StateError as exc:
        raise JournalError(f"the journal cannot be anchored: {exc}") from None
    except (ValueError, UnicodeDecodeError):
        raise JournalError(f"the journal key {path} is not 64 hex characters") from None
    if len(key) < 16:
        raise JournalError(f"the journal key {path} is too short")
    return key, key_id_of(key)


def key_named(key_id: str) -> bytes | None:
    """The journal key whose id is ``key_id`` when this state folder holds it, else None (never
    made: looking a key up does not create one)."""
    from imagebench.state import StateError, read_secret, state_root

    try:
        data = read_secret(state_root() / KEY_NAME)
    except StateError:
        return None
    if not data:
        return None
    try:
        key = bytes.fromhex(data.decode("ascii").strip())
    except (ValueError, UnicodeDecodeError):
        return None
    return key if key_id_of(key) == key_id else None


def _mac(key: bytes, previous: str, body: bytes) -> str:
    return hmac.new(key, previous.encode("utf-8") + b"\n" + body, "sha256").hexdigest()


def run_id_of(run_dir: Path) -> str:
    """The run's id as its ``run.json`` names it (the folder's name when that cannot be read): the
    first link of its journal's chain, so a journal moved to another run no longer verifies."""
    try:
        raw = json.loads((run_dir / "run.json").read_bytes())
        if isinstance(raw, dict) and isinstance(raw.get("run_id"), str):
            return raw["run_id"]
    except (OSError, ValueError):
        pass
    return run_dir.name


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- writing


class Journal:
    """An open ``journal.jsonl``: :meth:`append` writes one line and fsyncs it. Thread-safe."""

    def __init__(self, path: Path, fd: int, key: bytes, key_id: str, previous: str, run_id: str = "") -> None:
        self.path = path
        self._fd: int | None = fd
        self._lock = threading.Lock()
        self._key, self.key_id, self._previous = key, key_id, previous
        self.run_id = run_id
        self.lines = 0  # lines the journal holds (set by open)
        self.first_mac: str | None = None  # the first line's MAC: names the journal in the state folder

    @classmethod
    def open(cls, run_dir: str | os.PathLike[str]) -> Journal:
        """Open (or create) the run's journal for appending; a torn last line is cut off first.
        Each line is signed with the state folder's journal key, chained to the last line on disk."""
        run_dir = Path(run_dir)
        path = run_dir / JOURNAL_NAME
        key, key_id = journal_key()
        created = not path.exists()
        run_id = run_id_of(run_dir)
        previous, first, existing = run_id, None, 0
        if not created:
            _cut_torn_tail(path)
            head, last, existing = _ends(path)
            found = _MAC_TAIL.search(last) if last else None
            if found is not None:
                previous = found.group(1).decode("ascii")
            found = _MAC_TAIL.search(head) if head else None
            first = found.group(1).decode("ascii") if found is not None else None
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:
            _fsync_dir(path.parent)
        journal = cls(path, fd, key, key_id, previous, run_id)
        journal.lines, journal.first_mac = existing, first
        return journal

    def anchor(self) -> dict[str, Any]:
        """What ``receipt.json`` keeps of the journal (``journal``): the key id, the last line's MAC,
        how many lines the journal holds, and ``sig``, their MAC under the key (an anchor moved to
        a shorter journal no longer verifies)."""
        return signed_anchor(self._key, self.key_id, self._previous, self.lines)

    @property
    def last_mac(self) -> str:
        """The ``mac`` of the last line written (the run's id before any)."""
        return self._previous

    def append(self, event: Event, **fields: Any) -> JournalEntry:
        entry = JournalEntry(event=event, time=_now(), pid=os.getpid(), key=self.key_id, **fields)
        body = entry.model_dump_json(exclude_none=True).encode("utf-8")
        with self._lock:
            if self._fd is None:
                raise JournalError(f"{self.path}: the journal is closed")
            mac = _mac(self._key, self._previous, body)
            line = body[:-1] + b',"mac":"' + mac.encode("ascii") + b'"}\n'
            view = memoryview(line)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
            self._previous = mac
            self.lines += 1
            if self.first_mac is None:
                self.first_mac = mac
            _keep_state_anchor(self.run_id, self.first_mac, mac, self.lines)
        return entry.model_copy(update={"mac": mac})

    def unit(self, run_dir: Path, summary_path: Path, summary: SampleSummary, data: bytes) -> JournalEntry:
        """The line for a finished unit, once its summary (``data`` are its bytes) is on disk."""
        return self.append(
            "unit",
            label=summary.label,
            sample=summary.sample,
            status=summary.status,
            summary=summary_path.relative_to(run_dir).as_posix(),
            sha256=digest(data),
            brief=brief_of(summary, data),
        )

    def case(self, run_dir: Path, summary_path: Path, summary: CaseSummary, data: bytes) -> JournalEntry:
        """The line for a case's summary, once it (``data`` are its bytes) is on disk."""
        verdict = summary.extra.get("verdict") if isinstance(summary.extra, dict) else None
        return self.append(
            "case",
            label=summary.label,
            summary=summary_path.relative_to(run_dir).as_posix(),
            sha256=digest(data),
            detail={"verdict": verdict, "samples": summary.samples},
        )

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The state folder's folder of journal anchors: one file per journal, updated at every line.
ANCHORS_DIR = "anchors"


#: ``extra`` keys of ``run.json`` that a pass rewrites at its end (never part of its fixed fields).
VOLATILE_EXTRA: frozenset[str] = frozenset({"verdicts", "passed", "interrupted", "resumes", "receipt_error"})
#: The fields of ``run.json`` a run fixes when it starts (the start line signs a digest of each).
FIXED_FIELDS: tuple[str, ...] = ("run_id", "started", "subject", "sandbox", "limits", "samples", "selection", "cases")


def record_fields(
    record: Any, fields: tuple[str, ...] | None = FIXED_FIELDS, extra: bool | tuple[str, ...] = True
) -> dict[str, str]:
    """``{field: digest}`` of ``run.json``'s fixed fields (``fields``) and of each ``extra`` key that
    is not :data:`VOLATILE_EXTRA` (``extra=True``; or only those named): what a run's ``start``
    (and ``resume``) line signs, so that a changed ``run.json`` (a sandbox, a suite, an execution
    condition copied from another run) is named."""
    from imagebench.fixtures.digest import digest_json

    raw = record.model_dump(mode="json") if hasattr(record, "model_dump") else dict(record)
    out = {name: digest_json(raw.get(name)) for name in fields or ()}
    keys = [k for k in raw.get("extra", {}) if k not in VOLATILE_EXTRA] if extra is True else list(extra or ())
    for key in keys:
        out[f"extra.{key}"] = digest_json(raw.get("extra", {}).get(key))
    return out


def signed_anchor(key: bytes, key_id: str, mac: str, lines: int) -> dict[str, Any]:
    sig = hmac.new(key, f"anchor\0{key_id}\0{mac}\0{lines}".encode(), "sha256").hexdigest()
    return {"key": key_id, "mac": mac, "lines": lines, "sig": sig}


def _anchor_name(run_id: str, first_mac: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:96]
    return f"{safe}-{first_mac[:16]}.json"


def _keep_state_anchor(run_id: str, first_mac: str, mac: str, lines: int) -> None:
    """The journal's anchor in the state folder (``anchors/<run id>-<first MAC>.json``), replaced
    atomically at every line: a journal cut short on this machine is named, whatever the run
    folder says."""
    from imagebench.state import StateError, state_dir

    try:
        folder = state_dir(ANCHORS_DIR)
    except StateError:
        return  # the key was made there a moment ago; a state folder gone since is named on reading
    target = folder / _anchor_name(run_id, first_mac)
    tmp = folder / f".{target.name}.{os.getpid()}.{threading.get_ident()}"
    data = json.dumps({"run_id": run_id, "first": first_mac, "mac": mac, "lines": lines}).encode("ascii")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, target)


def state_anchors(run_id: str) -> list[dict[str, Any]]:
    """Every anchor this state folder keeps of journals of runs named ``run_id``."""
    from imagebench.state import state_root

    folder = state_root() / ANCHORS_DIR
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:96]
    out = []
    for path in sorted(folder.glob(f"{safe}-*.json")) if folder.is_dir() else []:
        try:
            raw = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(raw, dict) and raw.get("run_id") == run_id:
            out.append(raw)
    return out


def _ends(path: Path) -> tuple[bytes, bytes, int]:
    """``(first line, last line, how many lines)`` of a journal whose torn tail was cut, read a
    line at a time (a journal of any length is opened in bounded memory)."""
    first = last = b""
    count = 0
    with open(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                break
            count += 1
            last = line[:-1]
            if count == 1:
                first = last
    return first, last, count


def _cut_torn_tail(path: Path) -> None:
    """Truncate a last line that has no newline (a write cut short by a kill)."""
    with open(path, "rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        # find the last newline
        pos = size - 1
        block = 4096
        keep = 0
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())


# --------------------------------------------------------------------------- reading


def read_journal(path: str | os.PathLike[str]) -> list[JournalEntry]:
    """Every complete line of a journal; a torn last line is ignored, any other bad line raises."""
    return [entry for _, entry in iter_journal_lines(path)]


def read_journal_lines(path: str | os.PathLike[str]) -> list[tuple[bytes, JournalEntry]]:
    """Every complete line of a journal with its bytes (what :func:`check_journal` verifies)."""
    return list(iter_journal_lines(path))


def iter_journal_lines(path: str | os.PathLike[str]) -> Iterator[tuple[bytes, JournalEntry]]:
    """The complete lines of a journal with their bytes, one at a time: a reader of a journal of
    any length holds one line. A torn last line (no newline) is not a line; any other line that is
    not one JournalEntry raises JournalError naming the file and the line."""
    path = Path(path)
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, after the last line
    except FileNotFoundError:
        return
    except OSError as exc:
        raise JournalError(f"{path}: cannot be read ({exc})") from None
    with fh:
        number = 0
        while True:
            try:
                line = fh.readline()
            except OSError as exc:
                raise JournalError(f"{path}: cannot be read ({exc})") from None
            if not line.endswith(b"\n"):
                return  # the end, or a line cut short by a kill
            number += 1
            line = line[:-1]
            if not line.strip():
                continue
            try:
                entry = JournalEntry.model_validate_json(line)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(line)"
                raise JournalError(
                    f"{path}: line {number}: field {where!r}: {first['msg']} (expected one JournalEntry JSON object per line)"
                ) from None
            yield line, entry


@dataclass
class JournalCheck:
    """What :func:`check_journal` found. ``forged`` lines are named in ``problems``; a journal that
    cannot be checked here (no line is signed, or the key is not in this state folder) is
    ``verified`` False without being forged."""

    lines: int = 0
    key_id: str | None = None
    verified: bool = False
    forged: bool = False
    forged_lines: set[int] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    last_mac: str | None = None


def check_journal(
    lines: Iterable[tuple[bytes, JournalEntry]],
    run_id: str,
    anchor: Any = None,
    *,
    where: str = JOURNAL_NAME,
    anchored_by: str = "receipt.json",
) -> JournalCheck:
    """Verify a journal's chain of MACs (line numbers from 1), and that it is not shorter than its
    anchors say: the receipt's ``anchor`` (``{"key", "mac", "lines", "sig"}``, its ``sig`` checked
    under the key; ``anchored_by`` names the file that holds it, a sitting's ``sitting.json``) and
    the one this state folder keeps of it (:data:`ANCHORS_DIR`).

    ``lines`` is read once, in order, and no line is kept: a journal of any length is checked in
    bounded memory (the MACs kept are the first, the last and those at the lines an anchor names)."""
    kept = state_anchors(run_id)
    wanted = {a.get("lines") for a in kept}
    if isinstance(anchor, dict):
        wanted.add(anchor.get("lines"))
    count, key_ids = 0, set()
    unsigned: list[int] = []  # lines without a MAC: inserted, if the journal is signed
    key_id: str | None = None  # the first key a signed line names: every line is verified under it
    key: bytes | None = None
    waiting: list[tuple[int, bytes, JournalEntry]] = []  # signed lines seen before any names a key
    previous = run_id
    macs: dict[int, str | None] = {}
    first_mac = last_mac = None
    bad: list[tuple[int, str]] = []

    def verify(number: int, raw: bytes, entry: JournalEntry) -> str:
        nonlocal previous
        found = _MAC_TAIL.search(raw)
        claimed = found.group(1).decode("ascii") if found is not None else str(entry.mac)
        if key is not None:
            body = raw[: found.start()] + b"}" if found is not None else b""
            if found is None or not hmac.compare_digest(_mac(key, previous, body), claimed):
                label = f" {entry.label}#{entry.sample}" if entry.label else ""
                bad.append(
                    (
                        number,
                        f"{where} line {number} ({entry.event}{label}) does not verify under the journal key: "
                        "it was changed, moved or forged",
                    )
                )
        previous = claimed
        return claimed

    for number, (raw, entry) in enumerate(lines, start=1):
        count = number
        mac: str | None = None
        if entry.mac is None:
            unsigned.append(number)
        else:
            key_ids.add(entry.key)
            if key_id is None and entry.key:
                key_id, key = entry.key, key_named(entry.key)
                for held in waiting:
                    verify(*held)
                waiting.clear()
            if key_id is None:
                waiting.append((number, raw, entry))
                found = _MAC_TAIL.search(raw)
                mac = found.group(1).decode("ascii") if found is not None else entry.mac
            else:
                mac = verify(number, raw, entry)
        if number == 1:
            first_mac = mac
        if number in wanted:
            macs[number] = mac
        last_mac = mac
    bad.extend((n, f"{where} line {n} carries no MAC in a signed journal (inserted)") for n in unsigned)
    bad.sort(key=lambda item: item[0])
    return _judge(count, key_ids, key, first_mac, last_mac, macs, bad, kept, run_id, anchor, where, anchored_by)


def _judge(
    count: int,
    key_ids: set[str | None],
    key: bytes | None,
    first_mac: str | None,
    last_mac: str | None,
    macs: dict[int, str | None],
    bad: list[tuple[int, str]],
    kept: list[dict[str, Any]],
    run_id: str,
    anchor: Any,
    where: str,
    anchored_by: str,
) -> JournalCheck:
    """What :func:`check_journal` found, from what one pass over the lines kept."""
    check = JournalCheck(lines=count)

    def forged(why: str) -> JournalCheck:
        check.forged = True
        check.problems.append(why)
        return check

    if not key_ids:  # no line is signed
        if kept:
            return forged(
                f"{where} carries no MAC, but this state folder anchored {kept[0].get('lines')} signed line(s) of "
                f"run {run_id}: its signatures were stripped or it was replaced"
            )
        if not count:
            check.verified = anchor is None
            if anchor is not None:
                return forged(f"{where} is empty, but {anchored_by} anchors {anchor.get('lines')} line(s)")
            return check
        check.problems.append(
            f"{where} is not anchored: no line carries a MAC (written before journals were signed, or stripped)"
        )
        if anchor is not None:
            check.forged = True
        return check
    ids = sorted({k for k in key_ids if k})
    check.key_id = ids[0] if len(ids) == 1 else None
    if len(ids) != 1:
        return forged(f"{where}: its lines name {len(ids)} different journal keys {ids}")
    if key is None:
        check.problems.append(
            f"{where} cannot be verified here: it is signed with journal key {ids[0]}, which this state folder "
            "does not hold (verify it where it was written)"
        )
        return check
    for number, why in bad:
        check.forged_lines.add(number)
        check.problems.append(why)
    check.last_mac = last_mac

    def holds(line_count: Any, mac: Any, what: str) -> None:
        if not isinstance(line_count, int) or line_count < 1 or line_count > count:
            forged(f"{where} holds {count} line(s), but {what} anchors {line_count}: lines were cut off")
        elif macs.get(line_count) != mac:
            forged(f"{where} line {line_count} is not the line {what} anchors")

    mine = [a for a in kept if a.get("first") == first_mac]
    for a in mine:
        holds(a.get("lines"), a.get("mac"), "this state folder")
    if kept and not mine:
        forged(f"this state folder anchors run {run_id} with another first line: {where} was replaced")
    if isinstance(anchor, dict):
        want = signed_anchor(key, ids[0], str(anchor.get("mac")), anchor.get("lines"))  # type: ignore[arg-type]
        if anchor.get("key") != check.key_id:
            forged(f"{anchored_by} anchors the journal under key {anchor.get('key')}, its lines name {check.key_id}")
        elif not hmac.compare_digest(str(anchor.get("sig", "")), want["sig"]):
            forged(f"{anchored_by}'s journal anchor is not signed by the journal key (made or moved by hand)")
        else:
            holds(anchor.get("lines"), anchor.get("mac"), anchored_by)
    check.forged = check.forged or bool(check.forged_lines)
    check.verified = not check.forged
    return check


# --------------------------------------------------------------------------- the lock


class RunLock:
    """An exclusive, non-blocking ``flock`` on ``<run>/.lock`` that records the holder's pid."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock, documented
            return self
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
                finally:
                    os.close(fd)
                raise RunLocked(
                    f"{self.path.parent} is being written by another imagebench process (pid {holder}); "
                    "wait for it to finish or stop it first"
                ) from None
            # A holder that let go removed the file it had locked: what was locked is then no
            # longer the lock. Lock the file the path names now.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path, follow_symlinks=False))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            import fcntl

            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # while still held: no finished run folder keeps a lock file
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
