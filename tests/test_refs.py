"""Refs: header-only shape/dtype, lazy reads, dask views, ref_missing and errors that name the file."""

from __future__ import annotations

import zipfile

import nibabel as nib
import numpy as np
import pytest
import tifffile

from imagebench.fixtures import refs
from imagebench.fixtures.fixture import FixtureError
from imagebench.fixtures.refs import READERS, ArrayRef, FileRef, NpzRef, ref_missing, suffix_of


@pytest.fixture
def arr() -> np.ndarray:
    return np.arange(2 * 5 * 6, dtype=np.uint16).reshape(2, 5, 6)


def _write_all(tmp_path, a):
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    tifffile.imwrite(tmp_path / "a.tif", a)
    tifffile.imwrite(tmp_path / "b.TIFF", a, byteorder=">")
    nib.save(nib.Nifti1Image(a, np.eye(4)), tmp_path / "a.nii")
    nib.save(nib.Nifti1Image(a, np.eye(4)), tmp_path / "a.nii.gz")
    np.savez(tmp_path / "s.npz", a=a, b=np.zeros(3))
    np.savez_compressed(tmp_path / "c.npz", a=a)
    return [
        FileRef(tmp_path / "a.npy"),
        FileRef(tmp_path / "f.npy"),
        FileRef(tmp_path / "a.tif"),
        FileRef(tmp_path / "b.TIFF"),
        FileRef(tmp_path / "a.nii"),
        FileRef(tmp_path / "a.nii.gz"),
        NpzRef(tmp_path / "s.npz", "a"),
        NpzRef(tmp_path / "c.npz", "a"),
    ]


def test_every_format_round_trips_with_header_shape_and_dtype(tmp_path, arr):
    for ref in _write_all(tmp_path, arr):
        assert isinstance(ref, ArrayRef)
        assert ref_missing(ref) is None, ref
        assert ref.shape == arr.shape and ref.dtype == arr.dtype, ref
        got = np.asarray(ref)
        np.testing.assert_array_equal(got, arr, err_msg=repr(ref))
        np.testing.assert_array_equal(np.asarray(ref, dtype=np.float32), arr.astype(np.float32))


def test_dask_views_are_lazy_and_correct(tmp_path, arr):
    import dask.array as da

    for ref in _write_all(tmp_path, arr):
        lazy = ref.dask(chunks=(1, 3, 3))
        assert isinstance(lazy, da.Array)
        assert lazy.shape == arr.shape and lazy.dtype == arr.dtype
        assert lazy.chunks[0] == (1, 1)
        np.testing.assert_array_equal(lazy.compute(), arr, err_msg=repr(ref))
        np.testing.assert_array_equal(lazy[1, 2:4].compute(), arr[1, 2:4])


def test_memory_mapped_formats(tmp_path, arr):
    by_name = {r.path.name + getattr(r, "key", ""): r for r in _write_all(tmp_path, arr)}
    assert by_name["a.npy"].mmapped and by_name["f.npy"].mmapped
    assert by_name["a.nii"].mmapped and by_name["s.npza"].mmapped
    assert not by_name["a.tif"].mmapped and not by_name["a.nii.gz"].mmapped and not by_name["c.npza"].mmapped
    m = np.asarray(by_name["a.npy"])
    assert not m.flags.writeable  # truth on disk is read-only


def test_header_read_does_not_read_pixels(tmp_path, monkeypatch, arr):
    np.save(tmp_path / "a.npy", arr)
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("header read loaded the array"))
    ref = FileRef(tmp_path / "a.npy")
    assert ref.shape == arr.shape


def test_copy_semantics(tmp_path, arr):
    np.save(tmp_path / "a.npy", arr)
    ref = FileRef(tmp_path / "a.npy")
    copied = np.array(ref, copy=True)
    assert copied.flags.writeable and copied.flags.owndata
    with pytest.raises(ValueError, match="needs a copy"):
        ref.__array__(dtype=np.float64, copy=False)


def test_nifti_scaling_gives_the_scaled_dtype(tmp_path):
    img = nib.Nifti1Image(np.ones((3, 4), np.int16), np.eye(4))
    img.header.set_slope_inter(2.0, 1.0)
    nib.save(img, tmp_path / "s.nii.gz")
    ref = FileRef(tmp_path / "s.nii.gz")
    got = np.asarray(ref)
    assert ref.dtype == got.dtype and got.dtype.kind == "f"
    assert np.all(got == 3.0)


def test_npy_with_objects_is_refused(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(FixtureError, match=r"o\.npy.*objects"):
        FileRef(tmp_path / "o.npy").shape


def test_npz_missing_member_names_file_and_key(tmp_path):
    np.savez(tmp_path / "s.npz", stack=np.zeros(2), other=np.ones(2))
    ref = NpzRef(tmp_path / "s.npz", "labels")
    why = ref_missing(ref)
    assert "s.npz" in why and "'labels'" in why and "other, stack" in why
    with pytest.raises(FixtureError, match=r"s\.npz.*'labels'"):
        ref.shape


def test_npz_is_not_a_single_file_format(tmp_path):
    np.savez(tmp_path / "s.npz", a=np.zeros(2))
    assert ".npz" not in READERS
    why = ref_missing(FileRef(tmp_path / "s.npz"))
    assert "s.npz" in why and "NpzRef" in why
    with pytest.raises(FixtureError, match="several arrays"):
        FileRef(tmp_path / "s.npz").shape


def test_ref_missing_reasons(tmp_path, monkeypatch):
    assert "file is missing" in ref_missing(FileRef(tmp_path / "nope.tif"))
    assert "file is missing" in ref_missing(NpzRef(tmp_path / "nope.npz", "a"))
    (tmp_path / "x.png").write_bytes(b"\x89PNG")
    why = ref_missing(FileRef(tmp_path / "x.png"))
    assert "no reader for suffix '.png'" in why and ".nii.gz" in why
    (tmp_path / "d.tif").mkdir()
    assert "not a regular file" in ref_missing(FileRef(tmp_path / "d.tif"))
    (tmp_path / "a.tif").write_bytes(b"II*\0")

    real_import = refs.importlib.import_module

    def no_tifffile(name, *a):
        if name == "tifffile":
            raise ImportError("No module named 'tifffile'")
        return real_import(name, *a)

    monkeypatch.setattr(refs.importlib, "import_module", no_tifffile)
    why = ref_missing(FileRef(tmp_path / "a.tif"))
    assert "needs 'tifffile'" in why and "a.tif" in why
    assert ref_missing(object()) is None  # not a ref this module knows: nothing to say


def test_suffix_of_handles_compound_and_case():
    assert suffix_of("x/Brain.NII.GZ") == ".nii.gz"
    assert suffix_of("a.tiff") == ".tiff"
    assert suffix_of("a.tar.gz") == ".gz"
    assert suffix_of(".nii.gz") == ".gz"  # a bare suffix is not a file of that format


def test_truncated_tiff_is_a_fixture_error_naming_the_file(tmp_path, arr):
    tifffile.imwrite(tmp_path / "a.tif", arr)
    raw = (tmp_path / "a.tif").read_bytes()
    (tmp_path / "half.tif").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "head.tif").write_bytes(raw[:64])
    (tmp_path / "junk.tif").write_bytes(b"not a tiff at all")
    with pytest.raises(FixtureError, match=r"half\.tif.*truncated"):
        FileRef(tmp_path / "half.tif").shape
    for name in ("head.tif", "junk.tif"):
        with pytest.raises(FixtureError, match=rf"{name}: cannot read the TIFF header"):
            FileRef(tmp_path / name).shape


def test_compressed_truncated_tiff_fails_on_read_not_with_a_traceback(tmp_path, arr):
    tifffile.imwrite(tmp_path / "z.tif", arr, compression="zlib")
    raw = (tmp_path / "z.tif").read_bytes()
    # keep the IFD (tifffile writes it before the data here) and drop half the strips
    (tmp_path / "zt.tif").write_bytes(raw[: len(raw) - 40])
    ref = FileRef(tmp_path / "zt.tif")
    try:
        shape = ref.shape
    except FixtureError as exc:
        assert "zt.tif" in str(exc)
        return
    assert shape == arr.shape
    with pytest.raises(FixtureError, match=r"zt\.tif"):
        np.asarray(ref)


def test_truncated_nifti_is_a_fixture_error_naming_the_file(tmp_path):
    # incompressible pixels, so cutting the .gz in half cuts pixels and leaves the header whole
    arr = np.random.default_rng(0).integers(0, 60000, (8, 32, 32), dtype=np.uint16)
    nib.save(nib.Nifti1Image(arr, np.eye(4)), tmp_path / "a.nii")
    nib.save(nib.Nifti1Image(arr, np.eye(4)), tmp_path / "a.nii.gz")
    raw = (tmp_path / "a.nii").read_bytes()
    (tmp_path / "t.nii").write_bytes(raw[: len(raw) - 10])
    (tmp_path / "h.nii").write_bytes(raw[:100])
    gz = (tmp_path / "a.nii.gz").read_bytes()
    (tmp_path / "t.nii.gz").write_bytes(gz[: len(gz) // 2])
    (tmp_path / "junk.nii.gz").write_bytes(b"\x1f\x8bnot gzip")
    with pytest.raises(FixtureError, match=r"t\.nii: NIfTI image data is truncated"):
        FileRef(tmp_path / "t.nii").shape
    with pytest.raises(FixtureError, match=r"h\.nii: cannot read the NIfTI header"):
        FileRef(tmp_path / "h.nii").shape
    with pytest.raises(FixtureError, match=r"junk\.nii\.gz: cannot read the NIfTI header"):
        FileRef(tmp_path / "junk.nii.gz").shape
    ref = FileRef(tmp_path / "t.nii.gz")
    assert ref.shape == arr.shape  # the header is intact; the loss shows when pixels are read
    with pytest.raises(FixtureError, match=r"t\.nii\.gz: cannot read the array"):
        np.asarray(ref)


def test_truncated_npy_and_npz(tmp_path, arr):
    np.save(tmp_path / "a.npy", arr)
    raw = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[:-2])
    (tmp_path / "h.npy").write_bytes(raw[:20])
    with pytest.raises(FixtureError, match=r"t\.npy: \.npy data is truncated"):
        FileRef(tmp_path / "t.npy").shape
    with pytest.raises(FixtureError, match=r"h\.npy.*not a valid \.npy header"):
        FileRef(tmp_path / "h.npy").shape
    np.savez(tmp_path / "s.npz", a=arr)
    zraw = (tmp_path / "s.npz").read_bytes()
    (tmp_path / "t.npz").write_bytes(zraw[: len(zraw) // 2])
    ref = NpzRef(tmp_path / "t.npz", "a")
    assert "t.npz: not a readable .npz archive" in ref_missing(ref)
    with pytest.raises(FixtureError, match=r"t\.npz: not a readable \.npz archive"):
        ref.shape


def test_npz_member_without_npy_suffix(tmp_path):
    buf = tmp_path / "m.npz"
    with zipfile.ZipFile(buf, "w") as zf:
        with zf.open("raw", "w") as fh:
            np.lib.format.write_array(fh, np.arange(4, dtype=np.int8))
    ref = NpzRef(buf, "raw")
    assert ref.shape == (4,) and np.asarray(ref).tolist() == [0, 1, 2, 3]
    assert refs.npz_keys(buf) == ["raw"]


def test_empty_array(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((0, 3), np.float32))
    ref = FileRef(tmp_path / "e.npy")
    assert ref.shape == (0, 3) and np.asarray(ref).shape == (0, 3)
    assert ref.dask().compute().shape == (0, 3)


def test_importing_refs_loads_no_reader(tmp_path):
    import subprocess
    import sys

    code = "import sys, imagebench.fixtures.refs; print(sorted(m for m in ('tifffile','nibabel','dask') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


_TIFF_LAYOUTS = {
    "rgb": dict(data=np.zeros((3, 10, 12, 3), np.uint8), photometric="rgb"),
    "planar": dict(data=np.zeros((2, 3, 10, 12), np.uint16), photometric="rgb", planarconfig="separate"),
    "zlib": dict(data=np.arange(5 * 8 * 8, dtype=np.float32).reshape(5, 8, 8), compression="zlib"),
    "tiled": dict(data=np.zeros((4, 64, 64), np.uint16), tile=(16, 16)),
    "imagej": dict(data=np.zeros((3, 2, 16, 16), np.uint16), imagej=True, metadata={"axes": "ZCYX"}),
    "ome": dict(data=np.zeros((3, 16, 16), np.uint16), ome=True),
    "5d": dict(data=np.zeros((2, 3, 4, 16, 16), np.int16)),
    "2d": dict(data=np.zeros((16, 16), np.float64)),
    "one-ifd": dict(data=np.zeros((6, 16, 16), np.uint8), truncate=True),
    "yx3-grey": dict(data=np.zeros((16, 16, 3), np.uint8), photometric="minisblack"),
}


@pytest.mark.parametrize("layout", sorted(_TIFF_LAYOUTS))
def test_tiff_first_page_shortcut_agrees_with_tifffile_series(tmp_path, layout):
    kw = dict(_TIFF_LAYOUTS[layout])
    data = kw.pop("data")
    path = tmp_path / f"{layout}.tif"
    tifffile.imwrite(path, data, **kw)
    with tifffile.TiffFile(path) as tf:
        fast = refs._tiff_shaped_first_page(tf, path.stat().st_size)
        series = tf.series[0]
        full = (tuple(series.shape), np.dtype(series.dtype))
    if fast is not None:
        assert (fast.shape, fast.dtype) == full
    ref = FileRef(path)
    assert (ref.shape, ref.dtype) == full == (data.shape, data.dtype)
    np.testing.assert_array_equal(np.asarray(ref), data)


def test_tiff_description_that_lies_is_caught_when_read(tmp_path):
    # a description claiming more pages than the file holds: the header believes it, the read does not
    tifffile.imwrite(
        tmp_path / "x.tif",
        np.zeros((2, 8, 8), np.uint8),
        description='{"shape": [4, 8, 8]}',
        metadata=None,
        compression="zlib",
    )
    ref = FileRef(tmp_path / "x.tif")
    assert ref.shape == (4, 8, 8)
    with pytest.raises(FixtureError, match=r"x\.tif: the data read as shape \(8, 8\).*header says shape \(4, 8, 8\)"):
        np.asarray(ref)
