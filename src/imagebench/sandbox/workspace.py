"""A subject's workspace: the one place the harness reads or writes what a subject touched.

A subject owns its workspace while it works, so nothing found there is trusted: a leaving may be
a symbolic link to the truth, a folder on its path may be one, it may be a FIFO that blocks a
reader forever, a device, a sparse file of many GiB, or an ``.npy`` whose header declares a
shape its body does not hold. :class:`Workspace` keeps a descriptor of the folder the harness
made and opens every path *beneath* it without following any link (``openat2`` with
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS``; where the kernel lacks it, an
``O_NOFOLLOW`` walk of each component). It takes only regular files (``fstat`` on the descriptor
it opened), checks the size on that descriptor against a cap before reading a byte, and reads
from that same descriptor: there is no check-then-open. A refusal raises :class:`Refused`,
whose message names the leaving and why (``outputs/labels.npy is a symbolic link``).

Writes the harness makes for a subject (``prompt.md``, ``inputs/``, ``files/``) happen before the
subject starts, beneath the same descriptor, with ``O_EXCL | O_NOFOLLOW``.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# openat2(2): asm-generic numbering, the same on x86_64 and aarch64.
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
#: the largest .npy header read (numpy writes 128 bytes; a subject may pad it)
NPY_HEADER_MAX = 64 * 1024
#: the most names a CTC result folder may hold (a 1000-frame movie has 1001), and its table's cap
CTC_MAX_ENTRIES = 10_000
CTC_TABLE_MAX = 16 * 1024 * 1024


class Refused(Exception):
    """A leaving the harness will not read: the message names it and says why."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc: Any = None
_HAVE_OPENAT2: bool | None = None


def _openat2(dirfd: int, rel: str, flags: int) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(_SYS_OPENAT2, dirfd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), rel)
    return int(fd)


def have_openat2() -> bool:
    """Whether this kernel has openat2 (Linux 5.6+); else every open walks component by component."""
    global _HAVE_OPENAT2
    if _HAVE_OPENAT2 is None:
        fd = os.open("/", os.O_PATH | os.O_DIRECTORY)
        try:
            os.close(_openat2(fd, ".", os.O_PATH))
            _HAVE_OPENAT2 = True
        except OSError as exc:
            _HAVE_OPENAT2 = exc.errno not in (errno.ENOSYS, errno.EPERM)  # ENOSYS: old kernel; EPERM: seccomp
        finally:
            os.close(fd)
    return _HAVE_OPENAT2


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if not rel or "\x00" in rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise Refused(f"{rel!r} is not a plain relative path inside the workspace")
    return parts


def _walk(dirfd: int, parts: list[str], flags: int) -> int:
    """The O_NOFOLLOW walk: each folder opened beneath the last, never through a link."""
    fd = dirfd
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            if fd != dirfd:
                os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    finally:
        if fd != dirfd:
            os.close(fd)


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


class Workspace:
    """A folder the harness made for a subject, held by a directory descriptor.

    ``budget`` (bytes) caps everything read from it for one sample; each read also has its own cap.
    """

    def __init__(self, root: Path, *, budget: int | None = None) -> None:
        self.root = Path(root)
        self.fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.budget = budget
        self.read_total = 0

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- opening

    def _open_path(self, rel: str) -> int:
        """An O_PATH descriptor of ``rel`` (itself, never a link's target), or Refused."""
        parts = _parts(rel)
        for _attempt in range(3):
            try:
                if have_openat2():
                    return _openat2(self.fd, rel, os.O_PATH | os.O_NOFOLLOW)
                return _walk(self.fd, parts, os.O_PATH)
            except FileNotFoundError:
                raise
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    continue  # openat2 saw a rename on the way: resolve again
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
                    raise Refused(f"{rel} {self._which_link(parts)}") from None
                raise
        raise Refused(f"{rel} kept changing while it was opened (something renames its folders)")

    def _which_link(self, parts: list[str]) -> str:
        """Why a path did not resolve beneath the workspace: the first component that is a link.
        Found by walking from the workspace's descriptor one component at a time, each opened
        without following it, so naming the reason reads nothing a link points to."""
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(parts, start=1):
                sub = "/".join(parts[:i])
                try:
                    nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError:
                    break
                mode = os.fstat(nxt).st_mode
                os.close(fd)
                fd = nxt
                if stat.S_ISLNK(mode):
                    return "is a symbolic link" if i == len(parts) else f"lies in {sub}, which is a symbolic link"
                if i < len(parts) and not stat.S_ISDIR(mode):
                    return f"lies in {sub}, which is {_kind(mode)}"
        finally:
            os.close(fd)
        return "has a symbolic link on its path (it was one when it was opened)"

    def kind(self, rel: str) -> str | None:
        """What ``rel`` is (``"file"``, or why it is not one), or None when it is absent."""
        try:
            fd = self._open_path(rel)
        except FileNotFoundError:
            return None
        except Refused:
            return "refused"
        try:
            mode = os.fstat(fd).st_mode
        finally:
            os.close(fd)
        return "file" if stat.S_ISREG(mode) else _kind(mode)

    def exists(self, rel: str) -> bool:
        return self.kind(rel) is not None

    def _open_regular(self, rel: str, cap: int) -> tuple[int, int]:
        """A readable descriptor of the regular file ``rel`` and its size, checked against ``cap``
        and the sample's budget before anything is read. FileNotFoundError when absent."""
        pfd = self._open_path(rel)
        try:
            st = os.fstat(pfd)
            if not stat.S_ISREG(st.st_mode):
                raise Refused(f"{rel} is {_kind(st.st_mode)}, not a regular file")
            self._check_size(rel, st.st_size, cap)
            # Re-open the very inode through our own descriptor: never the path again.
            fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(pfd)
        st2 = os.fstat(fd)
        if not stat.S_ISREG(st2.st_mode) or (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            raise Refused(f"{rel} changed while it was opened")
        return fd, st.st_size

    def _check_size(self, rel: str, size: int, cap: int) -> None:
        if size > cap:
            raise Refused(f"{rel} is {_size(size)}, more than the limit of {_size(cap)} for one leaving")
        if self.budget is not None and self.read_total + size > self.budget:
            raise Refused(
                f"{rel} is {_size(size)}, past what one sample may leave in all ({_size(self.budget)}; "
                f"{_size(self.read_total)} already read)"
            )

    # ---------------------------------------------------------------- reading

    def read_bytes(self, rel: str, cap: int) -> bytes:
        """The bytes of the regular file ``rel`` (at most ``cap``): FileNotFoundError or Refused."""
        fd, size = self._open_regular(rel, cap)
        try:
            buf = bytearray(size)
            _read_into(fd, memoryview(buf), rel)
        finally:
            os.close(fd)
        self.read_total += size
        return bytes(buf)

    def read_text(self, rel: str, cap: int) -> str:
        """``rel`` as UTF-8 text; a byte that is not UTF-8 is :class:`NotText` naming it."""
        return utf8(self.read_bytes(rel, cap))

    def read_json(self, rel: str, cap: int) -> Any:
        return json.loads(self.read_text(rel, cap))

    def read_array(self, rel: str, cap: int) -> Any:
        """One array saved with ``numpy.save``, read from the descriptor it was checked on.

        The header is parsed first; a shape whose bytes differ from what the file holds after the
        header, an object dtype (it would need pickle) or an array over ``cap`` is refused before
        any memory is given to it."""
        import numpy as np
        from numpy.lib import format as npy

        fd, size = self._open_regular(rel, cap)
        try:
            with os.fdopen(os.dup(fd), "rb", buffering=0) as fh:
                head = fh.read(len(_NPY_MAGIC))
                if head[:4] == _ZIP_MAGIC:
                    raise Refused(f"{rel} could not be read: it is an .npz archive, expected one array saved with numpy.save")
                if head != _NPY_MAGIC:
                    raise Refused(f"{rel} could not be read: it is not an .npy file (no numpy magic bytes at its start)")
                fh.seek(0)
                try:
                    version = npy.read_magic(fh)
                    reader = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
                    shape, fortran, dtype = reader(fh, max_header_size=NPY_HEADER_MAX)
                except ValueError as exc:
                    why = f"longer than {NPY_HEADER_MAX} bytes" if "max_header_size" in str(exc) else str(exc)
                    raise Refused(f"{rel} could not be read: its .npy header is not readable ({why})") from None
                offset = fh.tell()
            if dtype.hasobject:
                raise Refused(f"{rel} could not be read: it holds Python objects (dtype {dtype}), which need pickle")
            count = 1
            for n in shape:
                count *= int(n)
            nbytes = count * dtype.itemsize
            if offset + nbytes != size:
                raise Refused(
                    f"{rel} declares shape {tuple(shape)} of {dtype} ({_size(nbytes)}) but holds "
                    f"{_size(size - offset)} after its header"
                )
            arr = np.empty(count, dtype=dtype)
            os.lseek(fd, offset, os.SEEK_SET)
            if nbytes:
                _read_into(fd, memoryview(arr.view(np.uint8)), rel)
        finally:
            os.close(fd)
        self.read_total += size
        return arr.reshape(shape, order="F" if fortran else "C")

    def read_ctc_result(self, rel: str, cap: int, *, max_entries: int = CTC_MAX_ENTRIES) -> Any:
        """A Cell Tracking Challenge result folder (``mask000.tif`` ... and ``res_track.txt``) as a
        checked :class:`imagebench.tracking.ctc.TimeLapse`, read with the guarantees of every read here.

        The folder is opened beneath the workspace (never through a link) and listed from that
        descriptor, at most ``max_entries`` names (more is refused before any file is read); each
        file is read by :meth:`read_bytes` (regular files only, its own cap and the sample's
        budget); a TIFF's declared frame (one page, 2-D or 3-D, integer pixels) is checked before
        it is decoded, and all frames decoded together stay within ``cap``. A folder that breaks the
        CTC format (a hole in the frame numbers, a table naming labels the masks lack) is refused
        with the format's own message."""
        import numpy as np

        from imagebench.tracking.ctc import RESULT_MASK, CtcFormatError, TimeLapse, check_masks, parse_lineage

        fd = self._dir_beneath(rel)
        try:
            names: list[str] = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    names.append(entry.name)
                    if len(names) > max_entries:
                        raise Refused(f"{rel}/ holds more than {max_entries} entries, more than a result folder may")
        finally:
            os.close(fd)
        frames: dict[int, str] = {}
        for name in sorted(names):
            m = RESULT_MASK.match(name)
            if m is None:
                continue
            number = int(m.group(1))
            if number in frames:
                raise Refused(f"{rel}/{name}: frame {number} is also {frames[number]}")
            frames[number] = name
        if not frames:
            raise Refused(f"{rel}/ holds no mask*.tif (a CTC result folder: mask000.tif ... and res_track.txt)")
        holes = sorted(set(range(max(frames) + 1)) - set(frames))
        if holes:
            raise Refused(f"{rel}/: mask frame(s) {holes[:5]} missing; frames must run 0..{max(frames)} without a hole")
        if "res_track.txt" not in names:
            raise Refused(f"{rel}/ holds no res_track.txt (the lineage table)")
        decoded = 0
        stack = []
        for number in range(len(frames)):
            where = f"{rel}/{frames[number]}"
            image = _decode_label_tiff(self.read_bytes(where, cap), where, cap - decoded)
            decoded += image.nbytes
            if stack and image.shape != stack[0].shape:
                raise Refused(f"{where} has shape {image.shape}, expected {stack[0].shape} as {frames[0]}")
            stack.append(image)
        track = f"{rel}/res_track.txt"
        try:
            lineage = parse_lineage(self.read_text(track, min(cap, CTC_TABLE_MAX)), source=track)
            dtype = np.result_type(*[f.dtype for f in stack])
            movie = TimeLapse(labels=np.stack(stack).astype(dtype, copy=False), lineage=lineage)
            check_masks(movie, source=track, names=[f"{rel}/{frames[n]}" for n in range(len(frames))])
        except CtcFormatError as exc:
            raise Refused(str(exc)) from None
        return movie

    def _dir_beneath(self, rel: str) -> int:
        """A descriptor of the folder ``rel`` opened beneath the workspace, never through a link; else Refused."""
        _parts(rel)  # a plain relative path, or Refused
        try:
            fd = self._open_dir(rel)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
                pfd = self._open_path(rel)  # names the link, or what the path is instead of a folder
                mode = os.fstat(pfd).st_mode
                os.close(pfd)
                raise Refused(f"{rel} is {_kind(mode)}, not a folder") from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):
            os.close(fd)
            raise Refused(f"{rel} is {_kind(st.st_mode)}, not a folder")
        return fd

    def walk_files(self, *, max_entries: int = 100_000, max_depth: int = 64) -> Iterator[tuple[str, str]]:
        """Every entry beneath the workspace as ``(relative path, kind)``, links not followed; at
        most ``max_entries``, and no deeper than ``max_depth`` folders (a deeper one is reported as
        ``"folder too deep"``: what is copied out must stay removable by ordinary tools). One folder is open at a time (a folder is opened beneath the
        workspace's descriptor when its turn comes), so no tree runs the harness out of descriptors;
        a folder that cannot be opened (a path too long) is reported as ``"unreadable folder"``."""
        seen = 0
        pending = [""]
        while pending:
            prefix = pending.pop()
            try:
                fd = self._open_dir(prefix.rstrip("/")) if prefix else os.dup(self.fd)
            except (OSError, Refused):
                yield prefix.rstrip("/"), "unreadable folder"
                continue
            try:
                names = sorted(os.listdir(fd))
                kinds = []
                for name in names:
                    try:
                        kinds.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode))
                    except OSError:
                        continue
            finally:
                os.close(fd)
            for name, mode in kinds:
                seen += 1
                if seen > max_entries:
                    return
                rel = f"{prefix}{name}"
                if stat.S_ISDIR(mode):
                    if rel.count("/") >= max_depth - 1:
                        yield rel, "folder too deep"
                        continue
                    yield rel, "folder"
                    pending.append(rel + "/")
                else:
                    yield rel, "file" if stat.S_ISREG(mode) else _kind(mode)

    def _open_dir(self, rel: str) -> int:
        flags = os.O_RDONLY | os.O_DIRECTORY
        if have_openat2():
            return _openat2(self.fd, rel, flags | os.O_NOFOLLOW)
        return _walk(self.fd, _parts(rel), flags)

    def copy_out(self, dest: Path, *, cap: int) -> list[str]:
        """Copy the workspace's folders and regular files (``cap`` bytes in all) to ``dest``, a folder
        of the harness's; links, FIFOs and devices are listed, never followed. Returns what was left out."""
        left_out: list[str] = []
        dest.mkdir(parents=True, exist_ok=True)
        budget, self.budget, self.read_total = (self.budget, self.read_total), None, 0
        try:
            for rel, what in self.walk_files():
                try:
                    if what == "folder":
                        (dest / rel).mkdir(parents=True, exist_ok=True)
                        continue
                    if what != "file":
                        left_out.append(f"{rel} ({what})")
                        continue
                    data = self.read_bytes(rel, cap - self.read_total)
                    (dest / rel).write_bytes(data)
                except (Refused, OSError) as exc:  # a path too long, the copy's cap reached, ...
                    left_out.append(f"{rel} ({exc})")
        finally:
            self.budget, self.read_total = budget
        return left_out

    # ---------------------------------------------------------------- writing (before the subject starts)

    def mkdir(self, rel: str, mode: int = 0o755) -> None:
        parts = _parts(rel)
        parent = self._open_dir("/".join(parts[:-1])) if len(parts) > 1 else self.fd
        try:
            os.mkdir(parts[-1], mode, dir_fd=parent)
        finally:
            if parent != self.fd:
                os.close(parent)

    def write_bytes(self, rel: str, data: bytes | memoryview, mode: int = 0o644) -> None:
        """Create ``rel`` (it must not exist: O_EXCL, never through a link) and write ``data``."""
        parts = _parts(rel)
        parent = self._open_dir("/".join(parts[:-1])) if len(parts) > 1 else self.fd
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        finally:
            if parent != self.fd:
                os.close(parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))

    def save_array(self, rel: str, arr: Any) -> None:
        import io

        import numpy as np

        buf = io.BytesIO()
        np.save(buf, np.asarray(arr), allow_pickle=False)
        self.write_bytes(rel, buf.getbuffer())

    def copy_in(self, src: Path, rel: str) -> None:
        """Copy the harness's folder ``src`` to ``rel`` (a bundle case's ``files/``); ``.gitkeep`` left out."""
        self.mkdir(rel)
        for path in sorted(Path(src).rglob("*")):
            if path.name == ".gitkeep" or path.is_symlink():
                continue
            sub = f"{rel}/{path.relative_to(src).as_posix()}"
            if path.is_dir():
                self.mkdir(sub)
            elif path.is_file():
                self.write_bytes(sub, path.read_bytes())

    def chown_all(self, uid: int, gid: int) -> None:
        """Give the subject's uid everything the harness wrote (nothing here is the subject's yet)."""
        os.chown(self.fd, uid, gid)
        for rel, _what in self.walk_files():
            os.chown(rel, uid, gid, dir_fd=self.fd, follow_symlinks=False)


class NotText(ValueError):
    """A file that should hold JSON text holds bytes that are not UTF-8."""


def utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(f"is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} ({exc.reason})") from None


def _decode_label_tiff(data: bytes, rel: str, cap: int) -> Any:
    """One label frame from a TIFF's bytes: one page, 2-D or 3-D, integer pixels, at most ``cap``
    bytes decoded; what the header declares is checked before a pixel is decoded (no TIFF bomb)."""
    import io

    import numpy as np
    import tifffile

    try:
        with tifffile.TiffFile(io.BytesIO(data)) as tif:
            if len(tif.series) != 1:
                raise Refused(f"{rel} holds {len(tif.series)} images, expected one label frame")
            series = tif.series[0]
            shape, dtype = tuple(int(n) for n in series.shape), np.dtype(series.dtype)
            if dtype.kind not in "ui":
                raise Refused(f"{rel} has pixel type {dtype}, expected an integer label image")
            if len(shape) not in (2, 3):
                raise Refused(f"{rel} has shape {shape}, expected a 2-D (Y×X) or 3-D (Z×Y×X) frame")
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if nbytes > cap:
                left = f"past the {_size(max(cap, 0))} left for its folder"
                raise Refused(f"{rel} declares {shape} of {dtype} ({_size(nbytes)}), {left}")
            image = np.asarray(series.asarray())
    except Refused:
        raise
    except Exception as exc:  # tifffile raises many kinds for a broken file
        raise Refused(f"{rel} is not a readable TIFF ({type(exc).__name__}: {exc})") from None
    if image.shape != shape:
        raise Refused(f"{rel} decoded to shape {image.shape}, but declared {shape}")
    if dtype.kind == "i" and image.size and int(image.min()) < 0:
        raise Refused(f"{rel} has negative labels, expected labels >= 0")
    return image


def _read_into(fd: int, view: memoryview, rel: str) -> None:
    got = 0
    while got < len(view):
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise Refused(f"{rel} ended after {got} of {len(view)} bytes (it shrank while it was read)")
        got += n
