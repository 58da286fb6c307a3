"""Handles, not arrays: refs to one array on disk that read their header now and pixels later.

A curated fixture's truth can be a label volume as large as the acquisition, so a fixture's
``data`` and ``truth`` values may be *refs*: objects that know their ``shape`` and ``dtype``
from a header read and produce the pixels only when ``np.asarray(ref)`` (or ``ref.dask()``)
asks. Every verifier already reads through ``np.asarray``, so a ref costs it nothing.

Two kinds:

* ``NpzRef(path, key)``: one member of an ``.npz`` archive. Shape and dtype come from the
  member's own ``.npy`` header inside the zip.
* ``FileRef(path)``: a whole file as one array, read through the explicit registry
  ``READERS`` (``.npy``, ``.tif``/``.tiff``, ``.nii``/``.nii.gz``). ``.npz`` is deliberately not
  in it: an archive holds many arrays, so a case layout names the member instead.

The registry is small on purpose: a fixture tree is reviewed data and its formats are a
decision, not whatever this machine happens to have installed. ``ref_missing(ref)`` answers
"can this machine open that file?" without reading pixels, so a missing reader shows up as an
availability fact instead of a crash in the middle of a run.

Costs: a header read is O(1) in the file's size. ``.npy`` files, uncompressed ``.npz`` members
and unscaled uncompressed ``.nii`` files are memory-mapped, so a truth volume larger than the
process is still addressable; TIFF, compressed members and ``.nii.gz`` defer the read but load
the whole array when it happens. Every failure to read (missing file, truncated or corrupt
TIFF/NIfTI, a missing archive member) is raised as ``FixtureError`` naming the file.

tifffile, nibabel and dask are imported only when a ref of that kind is actually read.
"""

from __future__ import annotations

import importlib
import json
import os
import struct
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from imagebench.fixture import FixtureError

if TYPE_CHECKING:  # pragma: no cover
    import dask.array

__all__ = [
    "ArrayRef",
    "FileRef",
    "NpzRef",
    "READERS",
    "Reader",
    "ref_missing",
    "suffix_of",
]


@runtime_checkable
class ArrayRef(Protocol):
    """One array whose shape and dtype are known before its pixels are read."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray: ...

    def dask(self, chunks: Any = "auto") -> dask.array.Array: ...


# --------------------------------------------------------------------------- headers


@dataclass(frozen=True)
class _MemmapSource:
    """Where an uncompressed array sits inside a file; opened afresh per read (and cheap to pickle)."""

    path: str
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype
    order: str = "C"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def open(self) -> np.ndarray:
        if int(np.prod(self.shape, dtype=np.int64)) == 0:
            return np.empty(self.shape, dtype=self.dtype, order=self.order)  # type: ignore[call-overload]
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset, shape=self.shape, order=self.order)  # type: ignore[call-overload]

    def __getitem__(self, index: Any) -> np.ndarray:
        return np.array(self.open()[index])


@dataclass(frozen=True)
class _Header:
    shape: tuple[int, ...]
    dtype: np.dtype
    mmap: _MemmapSource | None = None


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        raise FixtureError(f"{path}: file is missing") from None
    except OSError as exc:
        raise FixtureError(f"{path}: cannot stat the file ({exc.strerror or exc})") from None


def _check_fits(path: Path, what: str, end: int, size: int) -> None:
    if end > size:
        raise FixtureError(
            f"{path}: {what} is truncated: its header promises data up to byte {end}, but the file has {size} bytes"
        )


def _read_npy_header(fh: Any, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Parse an ``.npy`` header from an open binary stream (numpy's own parser; no data read)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(fh)
        else:
            shape, fortran, dtype = fmt._read_array_header(fh, version)  # type: ignore[attr-defined]
    except Exception as exc:
        raise FixtureError(f"{where}: not a valid .npy header ({type(exc).__name__}: {exc})") from None
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise FixtureError(f"{where}: holds Python objects (dtype {dtype}); fixture arrays must be plain numeric data")
    return tuple(int(n) for n in shape), bool(fortran), dtype


def _npy_header(path: Path) -> _Header:
    size = _file_size(path)
    try:
        with open(path, "rb") as fh:
            shape, fortran, dtype = _read_npy_header(fh, str(path))
            offset = fh.tell()
    except OSError as exc:
        raise FixtureError(f"{path}: cannot open ({exc.strerror or exc})") from None
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    _check_fits(path, ".npy data", offset + nbytes, size)
    return _Header(shape, dtype, _MemmapSource(str(path), offset, shape, dtype, "F" if fortran else "C"))


def _npy_load(path: Path, header: _Header) -> np.ndarray:
    if header.mmap is not None and int(np.prod(header.shape, dtype=np.int64)) == 0:
        return header.mmap.open()
    return np.load(path, mmap_mode="r", allow_pickle=False)


def _tiff_shaped_first_page(tf: Any, size: int) -> _Header | None:
    """Shape and dtype of a tifffile-written ("shaped") file from its first page alone.

    tifffile's own series detection counts every page by walking the IFD chain, which grows
    with the file. For a file whose first page carries tifffile's JSON shape description the
    first series is exactly that shape with the page's dtype (tifffile gives that kind
    precedence), so one page is enough. Returns None whenever that shortcut is not certain;
    the caller then asks tifffile for the series. ``read()`` compares the pixels against this.
    """
    import tifffile

    page = tf.pages.first
    if not isinstance(page, tifffile.TiffPage) or page.subifds or page.shaped_description is None:
        return None
    description = page.shaped_description
    try:
        if description.startswith("shape="):  # tifffile's old style: shape=(z, y, x)
            shape = tuple(int(n) for n in description[7:-1].split(",") if n.strip())
        else:
            shape = tuple(int(n) for n in json.loads(description)["shape"])
    except (ValueError, KeyError, TypeError):
        return None
    page_size = int(np.prod(page.shape, dtype=np.int64))
    total = int(np.prod(shape, dtype=np.int64))
    if not shape or page_size <= 0 or total <= 0 or total % page_size:
        return None
    if tuple(page.shape) != shape[len(shape) - len(page.shape) :] and total != page_size:
        return None
    dtype = np.dtype(page.dtype)
    if page.is_contiguous and page.dataoffsets and page.dataoffsets[0] + total * dtype.itemsize > size:
        return None  # not contiguous across pages, or truncated: let tifffile decide
    return _Header(shape, dtype, None)


def _tiff_header(path: Path) -> _Header:
    import tifffile

    size = _file_size(path)
    try:
        with tifffile.TiffFile(path) as tf:
            fast = _tiff_shaped_first_page(tf, size)
            if fast is not None:
                return fast
            if not tf.series:
                raise FixtureError(f"{path}: cannot read the TIFF header (it holds no image series)")
            series = tf.series[0]
            shape = tuple(int(n) for n in series.shape)
            dtype = np.dtype(series.dtype)
            offset = series.dataoffset
            nbytes = int(series.nbytes)
    except FixtureError:
        raise
    except Exception as exc:
        raise FixtureError(f"{path}: cannot read the TIFF header ({type(exc).__name__}: {exc})") from None
    if offset is not None:  # contiguous, uncompressed pixels: their extent is known from the header
        _check_fits(path, "TIFF image data", int(offset) + nbytes, size)
    return _Header(shape, dtype, None)


def _tiff_load(path: Path, header: _Header) -> np.ndarray:
    import tifffile

    with tifffile.TiffFile(path) as tf:
        return np.asarray(tf.series[0].asarray())


def _nifti_image(path: Path) -> Any:
    import nibabel

    return nibabel.load(str(path))


def _nifti_header(path: Path) -> _Header:
    size = _file_size(path)
    try:
        img = _nifti_image(path)
        header = img.header
        shape = tuple(int(n) for n in header.get_data_shape())
        raw = np.dtype(header.get_data_dtype())
        proxy = img.dataobj
        slope = np.asanyarray(getattr(proxy, "slope", 1.0))
        inter = np.asanyarray(getattr(proxy, "inter", 0.0))
        offset = int(getattr(proxy, "offset", 0))
    except FixtureError:
        raise
    except Exception as exc:
        raise FixtureError(f"{path}: cannot read the NIfTI header ({type(exc).__name__}: {exc})") from None
    scaled = not (slope.size == 1 and inter.size == 1 and float(slope) == 1.0 and float(inter) == 0.0)
    if scaled:
        # The header rescales stored values (scl_slope / scl_inter): the array a reader gets is the
        # dtype nibabel's own scaling produces, worked out on one element rather than the volume.
        from nibabel.volumeutils import apply_read_scaling

        dtype = np.dtype(apply_read_scaling(np.zeros(1, raw), slope, inter).dtype)
    else:
        dtype = raw
    mmap = None
    if not str(path).lower().endswith(".gz"):
        nbytes = int(np.prod(shape, dtype=np.int64)) * raw.itemsize
        _check_fits(path, "NIfTI image data", offset + nbytes, size)
        if not scaled:
            mmap = _MemmapSource(str(path), offset, shape, raw, "F")
    return _Header(shape, dtype, mmap)


def _nifti_load(path: Path, header: _Header) -> np.ndarray:
    if header.mmap is not None:
        return header.mmap.open()
    return np.asanyarray(_nifti_image(path).dataobj)


@dataclass(frozen=True)
class Reader:
    """How one file format becomes one array: the module it needs, a header read and a full read."""

    format: str
    module: str
    header: Callable[[Path], _Header] = field(repr=False)
    load: Callable[[Path, _Header], np.ndarray] = field(repr=False)


_NPY = Reader("NumPy .npy (memory-mapped)", "numpy", _npy_header, _npy_load)
_TIFF = Reader("TIFF (first series)", "tifffile", _tiff_header, _tiff_load)
_NIFTI = Reader("NIfTI-1/2", "nibabel", _nifti_header, _nifti_load)

#: The formats a ``FileRef`` reads, by lowercase suffix. Fixed on purpose (see the module doc).
READERS: Mapping[str, Reader] = MappingProxyType(
    {".npy": _NPY, ".tif": _TIFF, ".tiff": _TIFF, ".nii": _NIFTI, ".nii.gz": _NIFTI}
)


def suffix_of(path: str | os.PathLike[str]) -> str:
    """The registry suffix ``path`` ends with (longest match, case-insensitive), else its last suffix."""
    name = Path(path).name.lower()
    for suffix in sorted(READERS, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            return suffix
    return Path(name).suffix


def _unknown_suffix(path: Path) -> str:
    suffix = suffix_of(path)
    known = ", ".join(sorted(READERS))
    if suffix == ".npz":
        return (
            f"{path}: a .npz archive holds several arrays, so it is not read as one file; "
            "name a member through a case layout key (NpzRef)"
        )
    return f"{path}: no reader for suffix {suffix or '(none)'!r}; fixture formats are {known}"


def _import_problem(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except Exception as exc:  # ImportError, or a broken install failing at import time
        return f"{type(exc).__name__}: {exc}"
    return None


# --------------------------------------------------------------------------- refs


class _Ref(ABC):
    """Shared behaviour: lazy header, numpy protocol, dask view, errors naming the file."""

    path: Path

    @abstractmethod
    def _read_header(self) -> _Header: ...

    @abstractmethod
    def _load(self, header: _Header) -> np.ndarray: ...

    @abstractmethod
    def missing(self) -> str | None: ...

    def _where(self) -> str:
        return str(self.path)

    @cached_property
    def _header(self) -> _Header:
        return self._read_header()

    @property
    def shape(self) -> tuple[int, ...]:
        return self._header.shape

    @property
    def dtype(self) -> np.dtype:
        return self._header.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def mmapped(self) -> bool:
        """Whether reads are memory-mapped (so the array need not fit in memory)."""
        return self._header.mmap is not None

    def read(self) -> np.ndarray:
        """The whole array (a read-only memory map where the format allows one)."""
        header = self._header
        try:
            arr = self._load(header)
        except FixtureError:
            raise
        except Exception as exc:
            raise FixtureError(f"{self._where()}: cannot read the array ({type(exc).__name__}: {exc})") from None
        if tuple(arr.shape) != header.shape or arr.dtype != header.dtype:
            raise FixtureError(
                f"{self._where()}: the data read as shape {tuple(arr.shape)} dtype {arr.dtype}, "
                f"but its header says shape {header.shape} dtype {header.dtype}"
            )
        return arr

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        arr = self.read()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"{self._where()}: converting {arr.dtype} to {np.dtype(dtype)} needs a copy")
            return arr.astype(dtype)
        if copy:
            return np.array(arr, copy=True)
        return arr

    def dask(self, chunks: Any = "auto") -> dask.array.Array:
        """A lazy dask array over this file. Memory-mapped formats read chunk by chunk;
        the others load once, on the first compute, as a single task that is then split."""
        import dask
        import dask.array as da
        from dask.base import tokenize

        header = self._header
        token = tokenize(type(self).__name__, self._where(), *self._stamp())
        if header.mmap is not None:
            meta = np.empty((0,) * len(header.shape), dtype=header.dtype)
            return da.from_array(header.mmap, chunks=chunks, meta=meta, lock=False, name=f"imagebench-ref-{token}")
        block = da.from_delayed(
            dask.delayed(self.read, pure=True)(dask_key_name=f"imagebench-read-{token}"),
            shape=header.shape,
            dtype=header.dtype,
        )
        return block.rechunk(chunks) if chunks is not None else block

    def _stamp(self) -> tuple[int, int]:
        try:
            st = self.path.stat()
            return st.st_size, st.st_mtime_ns
        except OSError:
            return -1, -1


@dataclass(frozen=True, eq=True)
class FileRef(_Ref):
    """A whole file as one array, read through ``READERS`` by its suffix."""

    path: Path

    def __init__(self, path: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "path", Path(path))

    @property
    def suffix(self) -> str:
        return suffix_of(self.path)

    @property
    def reader(self) -> Reader:
        reader = READERS.get(self.suffix)
        if reader is None:
            raise FixtureError(_unknown_suffix(self.path))
        return reader

    def missing(self) -> str | None:
        if not self.path.exists():
            return f"{self.path}: file is missing"
        if not self.path.is_file():
            return f"{self.path}: not a regular file"
        if not os.access(self.path, os.R_OK):
            return f"{self.path}: not readable by this user"
        reader = READERS.get(self.suffix)
        if reader is None:
            return _unknown_suffix(self.path)
        problem = _import_problem(reader.module)
        if problem:
            return f"{self.path}: its reader needs {reader.module!r}, which cannot be imported here ({problem})"
        return None

    def _read_header(self) -> _Header:
        reader = self.reader
        problem = _import_problem(reader.module)
        if problem:
            raise FixtureError(f"{self.path}: its reader needs {reader.module!r} ({problem})")
        return reader.header(self.path)

    def _load(self, header: _Header) -> np.ndarray:
        return self.reader.load(self.path, header)

    def __repr__(self) -> str:
        return f"FileRef({str(self.path)!r})"


_LOCAL_HEADER = struct.Struct("<4s5H3L2H")


@dataclass(frozen=True, eq=True)
class NpzRef(_Ref):
    """One array inside an ``.npz`` archive: member ``key.npy`` (or ``key``)."""

    path: Path
    key: str

    def __init__(self, path: str | os.PathLike[str], key: str) -> None:
        object.__setattr__(self, "path", Path(path))
        object.__setattr__(self, "key", str(key))

    def _where(self) -> str:
        return f"{self.path}[{self.key!r}]"

    def _member(self, zf: zipfile.ZipFile) -> zipfile.ZipInfo:
        names = zf.namelist()
        for candidate in (f"{self.key}.npy", self.key):
            if candidate in names:
                return zf.getinfo(candidate)
        members = sorted(n[:-4] if n.endswith(".npy") else n for n in names)
        shown = ", ".join(members[:20]) + (", ..." if len(members) > 20 else "")
        raise FixtureError(f"{self.path}: the archive has no array named {self.key!r} (it holds: {shown or 'nothing'})")

    def _open_zip(self) -> zipfile.ZipFile:
        _file_size(self.path)
        try:
            return zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise FixtureError(f"{self.path}: not a readable .npz archive ({type(exc).__name__}: {exc})") from None

    def missing(self) -> str | None:
        if not self.path.exists():
            return f"{self.path}: file is missing"
        if not self.path.is_file():
            return f"{self.path}: not a regular file"
        try:
            with self._open_zip() as zf:
                self._member(zf)
        except FixtureError as exc:
            return str(exc)
        return None

    def _read_header(self) -> _Header:
        size = _file_size(self.path)
        with self._open_zip() as zf:
            info = self._member(zf)
            try:
                with zf.open(info) as fh:
                    shape, fortran, dtype = _read_npy_header(fh, self._where())
                    header_len = fh.tell()
            except FixtureError:
                raise
            except Exception as exc:
                raise FixtureError(f"{self._where()}: cannot read the member ({type(exc).__name__}: {exc})") from None
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if info.file_size < header_len + nbytes:
            raise FixtureError(
                f"{self._where()}: the member holds {info.file_size} bytes, fewer than its header's "
                f"{header_len + nbytes}"
            )
        mmap = None
        if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1:
            with open(self.path, "rb") as raw:
                raw.seek(info.header_offset)
                fields = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
            if fields[0] != b"PK\x03\x04":
                raise FixtureError(f"{self._where()}: corrupt local header in the archive")
            start = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10] + header_len
            _check_fits(self.path, f"member {self.key!r}", start + nbytes, size)
            mmap = _MemmapSource(str(self.path), start, shape, dtype, "F" if fortran else "C")
        return _Header(shape, dtype, mmap)

    def _load(self, header: _Header) -> np.ndarray:
        if header.mmap is not None:
            return header.mmap.open()
        with self._open_zip() as zf:
            with zf.open(self._member(zf)) as fh:
                return np.lib.format.read_array(fh, allow_pickle=False)

    def __repr__(self) -> str:
        return f"NpzRef({str(self.path)!r}, {self.key!r})"


def npz_keys(path: str | os.PathLike[str]) -> list[str]:
    """The array names an ``.npz`` archive holds (from its directory; no data read)."""
    ref = NpzRef(path, "")
    with ref._open_zip() as zf:
        return sorted(n[:-4] if n.endswith(".npy") else n for n in zf.namelist())


def ref_missing(ref: Any) -> str | None:
    """Why this machine cannot open ``ref`` (no file, unknown format, reader not importable,
    archive member absent), or None when it can. Reads no pixel data."""
    check = getattr(ref, "missing", None)
    if callable(check):
        try:
            return check()
        except Exception as exc:  # an availability question never crashes
            return f"{ref!r}: {type(exc).__name__}: {exc}"
    return None
