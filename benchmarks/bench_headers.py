"""Build-time shape/dtype check: does its cost stay flat as fixture files grow?

For .npy, .tif and .nii.gz, writes a 1 MiB file (the anchor) and a 2 GiB file into a
temporary fixture tree whose manifest records their sizes and array specs, then times:

* ``header``: a fresh ``FileRef`` reading shape and dtype, compared with the manifest spec;
* ``case_available``: the whole in-band check (manifest, case.json, stat, reader, header).

It prints the median of several repeats for each size and the ratio big/small. A header read
is O(1) in the file's size, so the ratios should stay near 1 (well under 1024, the size ratio).
The big .npy and .tif are written sparse (their pixels are zeros), and the big .nii.gz is zeros
compressed at level 1, so setting up takes seconds, not minutes. Everything is deleted afterwards.

Usage: python benchmarks/bench_headers.py [--repeats N] [--big-gib G] [--dir TMPDIR]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from imagebench.fixtures import tree
from imagebench.fixtures.refs import FileRef

MIB = 1 << 20
GIB = 1 << 30
FAKE_SHA = "0" * 64  # the in-band check never hashes; verify is not what is timed here


def _shape(nbytes: int, itemsize: int) -> tuple[int, int, int]:
    n = nbytes // itemsize
    return (max(1, n // (512 * 512)), 512, 512)


def write_npy(path: Path, nbytes: int) -> None:
    shape = _shape(nbytes, 4)
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)  # sparse on disk
    del mm


def write_tif(path: Path, nbytes: int) -> None:
    import tifffile

    shape = _shape(nbytes, 2)
    tifffile.imwrite(path, shape=shape, dtype=np.uint16)  # header + pages, pixel data left sparse


def write_nii_gz(path: Path, nbytes: int) -> None:
    import nibabel as nib

    shape = _shape(nbytes, 4)
    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(np.float32)
    header["vox_offset"] = 352
    head = header.binaryblock + b"\x00" * (352 - len(header.binaryblock))
    zeros = bytes(16 * MIB)
    remaining = int(np.prod(shape)) * 4
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(head)
        while remaining:
            n = min(remaining, len(zeros))
            fh.write(zeros[:n])
            remaining -= n


WRITERS = {".npy": write_npy, ".tif": write_tif, ".nii.gz": write_nii_gz}


def build_tree(root: Path, big: int) -> dict[str, dict[str, str]]:
    """One case per (format, size); returns {suffix: {"small": case_id, "big": case_id}}."""
    cases: dict[str, dict[str, str]] = {}
    entries = []
    for suffix, writer in WRITERS.items():
        for size_name, nbytes in (("small", MIB), ("big", big)):
            case_id = f"{suffix.strip('.').replace('.', '-')}-{size_name}"
            folder = root / "bench" / case_id
            folder.mkdir(parents=True)
            name = f"image{suffix}"
            t0 = time.perf_counter()
            writer(folder / name, nbytes)
            ref = FileRef(folder / name)
            print(
                f"  wrote {case_id:14s} {(folder / name).stat().st_size / MIB:10.1f} MiB on disk, "
                f"array {ref.shape} {ref.dtype} in {time.perf_counter() - t0:.1f} s",
                flush=True,
            )
            tree.write_case_layout(root, "bench", case_id, about="bench", data={"image": name}, truth={})
            entries.append(
                tree.ManifestEntry(
                    skill="bench",
                    case_id=case_id,
                    provenance="benchmark",
                    citation="benchmark",
                    files={
                        name: tree.FileEntry(
                            sha256=FAKE_SHA,
                            bytes=(folder / name).stat().st_size,
                            arrays={"image": tree.ArraySpec.of(ref.shape, ref.dtype)},
                        )
                    },
                )
            )
            cases.setdefault(suffix, {})[size_name] = case_id
    (root / "manifest.json").write_text(tree.Manifest(fixtures=entries).model_dump_json(indent=2))
    return cases


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm: imports, page cache
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--big-gib", type=float, default=2.0)
    ap.add_argument("--dir", default=None, help="where to write the temporary tree")
    args = ap.parse_args()
    big = int(args.big_gib * GIB)

    tmp = Path(tempfile.mkdtemp(prefix="imagebench-bench-headers-", dir=args.dir))
    try:
        print(f"building a tree in {tmp} (1 MiB anchor vs {big / GIB:g} GiB)", flush=True)
        cases = build_tree(tmp, big)
        manifest = tree.load_manifest(tmp)
        print()
        print(f"{'format':8s} {'check':15s} {'1 MiB (ms)':>11s} {'big (ms)':>10s} {'big/small':>10s}")
        for suffix, by_size in cases.items():
            medians = {}
            for size_name, case_id in by_size.items():
                entry = manifest.entry("bench", case_id)
                name, spec_file = next(iter(entry.files.items()))
                spec = spec_file.arrays["image"]
                path = tmp / "bench" / case_id / name

                def header_check(path=path, spec=spec) -> None:
                    ref = FileRef(path)
                    assert spec.agrees(ref.shape, ref.dtype) is None

                def availability(case_id=case_id) -> None:
                    ok, why = tree.case_available(tmp, "bench", case_id)
                    assert ok, why

                medians[("header", size_name)] = median_seconds(header_check, args.repeats)
                medians[("case_available", size_name)] = median_seconds(availability, args.repeats)
            for check in ("header", "case_available"):
                small, large = medians[(check, "small")], medians[(check, "big")]
                print(f"{suffix:8s} {check:15s} {small * 1e3:11.3f} {large * 1e3:10.3f} {large / small:10.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
