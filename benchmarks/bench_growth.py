"""Benchmark: what a run costs as its samples grow (issue 29, part 5).

For each size N of ``--sizes`` (default 1,000 / 10,000 / 100,000) a run folder holds N samples of
one cheap case (``segment-nuclei/count-nuclei``, the reference subject, ``--artifacts`` left to
its default: all images for a run of up to 1,000 units, failures and the first 3 samples above).
The script prints, per size, the folder's size, ``report.html``'s size, and the wall time and peak
memory (max RSS, ``/usr/bin/time``) of

- ``imagebench report RUN`` (the run's page: the samples it shows read whole, the others counted
  from their verified journal lines, each summary's size checked),
- ``imagebench compare RUN RUN`` (both runs read whole; two plain runs are not comparable, so it
  exits 1 after reading them, which is what is measured),
- the check ``imagebench run --resume RUN`` makes of the folder (``executor.run.resume_check``:
  ``read_run`` keeping each journaled sample as its case's columns), alone, and
- ``imagebench run --resume RUN`` on the complete folder (the check, then the case summary
  written again from those columns, and the supervisor's check of the folder after it), last,
  since it appends to the journal;

then the ratios the issue's targets name: report size and time at the largest size over the
smallest (target <= 3x), and each peak memory at the largest over the next (target <= 1.5x).

Sizes up to ``--real-max`` (default 10,000) are real runs. A larger size is made from the largest
real run, synthetically, because a real run of 100,000 samples takes hours on a small machine:
its sample folders are copied round-robin (the size must be a multiple of the real run's), each
summary written again with its own sample number (a copy of one of the first 3 samples that is
not among the first 3 loses its images, as ``--artifacts failures`` would have it), the case
summary's counts scaled, and the journal written line by line (each unit line with its brief,
``journal.brief_of``), each line signed and chained under this state folder's journal key, its anchors (the state folder's and the receipt's)
written as the harness writes them. The reader checks such a folder exactly as a real one: every
summary it reads against its signed line, every file beside it against its digests.

Run: ``python benchmarks/bench_growth.py`` (``--work DIR`` keeps the run folders, and a later call
reuses the real runs it finds there; ``--sizes 100 1000 --real-max 1000`` for a quick look).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

LABEL = "segment-nuclei/count-nuclei"
SUBJECT = "reference"
TIME = "/usr/bin/time"


def _env() -> dict[str, str]:
    src = Path(__file__).resolve().parents[1] / "src"
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{src}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(src)
    return env


def measured(argv: list[str]) -> tuple[float, int, int]:
    """``(wall seconds, peak RSS in KiB, exit code)`` of one command, by ``/usr/bin/time``."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        proc = subprocess.run(
            [TIME, "-f", "%e %M", "-o", out.name, *argv],
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        wall, rss = out.read().split()[-2:]
    return float(wall), int(rss), proc.returncode


def imagebench(*args: str) -> list[str]:
    return [sys.executable, "-m", "imagebench", *args]


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def real_run(work: Path, n: int) -> Path:
    """A real run of ``n`` samples under ``work/real-<n>`` (one already there is reused)."""
    root = work / f"real-{n}"
    found = sorted(root.glob("run-*/run.json"))
    for record in reversed(found):
        raw = json.loads(record.read_text())
        if raw.get("complete") and raw.get("samples") == n:
            return record.parent
    root.mkdir(parents=True, exist_ok=True)
    print(f"  running {n} real samples of {LABEL} (about 50 ms each here) ...", file=sys.stderr, flush=True)
    argv = imagebench("run", "-k", LABEL, "--samples", str(n), "--subject", SUBJECT, "--out", str(root))
    subprocess.run([*argv, "--quiet", "--no-report"], env=_env(), check=True, stdout=subprocess.DEVNULL)
    return sorted(root.glob("run-*"))[-1]


def synthetic_run(work: Path, template: Path, n: int) -> Path:
    """A run folder of ``n`` samples made from ``template``'s (see the module); signed as the harness signs."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from imagebench.records import CaseSummary, RunRecord, SampleSummary, read_record, write_record
    from imagebench.runs import journal as jr
    from imagebench.runs.keep import PASSING_KEPT
    from imagebench.runs.layout import artifact_digests, label_dir

    record = read_record(template / "run.json", RunRecord)
    m = record.samples
    if n % m:
        raise SystemExit(f"--sizes: {n} is not a multiple of the real run's {m} samples")
    root = work / f"synthetic-{n}"
    if root.exists():
        shutil.rmtree(root)
    run_id = "run-20000101T000000Z"
    dst = root / run_id
    src_case = label_dir(template, record.subject, LABEL)
    dst_case = label_dir(dst, record.subject, LABEL)
    dst_case.mkdir(parents=True)
    new_record = record.model_copy(update={"run_id": run_id, "samples": n})
    write_record(dst / "run.json", new_record)
    shutil.copyfile(template / "receipt.json", dst / "receipt.json")
    key, key_id = jr.journal_key()
    previous, count, first_mac = run_id, 0, ""
    with open(dst / jr.JOURNAL_NAME, "wb") as out:

        def line(event: str, **fields: Any) -> None:
            nonlocal previous, count, first_mac
            entry = jr.JournalEntry(event=event, time="2000-01-01T00:00:00.000+00:00", pid=1, key=key_id, **fields)  # type: ignore[arg-type]
            body = entry.model_dump_json(exclude_none=True).encode("utf-8")
            mac = jr._mac(key, previous, body)
            out.write(body[:-1] + b',"mac":"' + mac.encode("ascii") + b'"}\n')
            previous, count = mac, count + 1
            first_mac = first_mac or mac

        line("start", detail={"run_id": run_id, "mode": "serial (synthetic)", "record": jr.record_fields(new_record)})
        for i in range(n):
            src = src_case / f"sample-{i % m}"
            folder = dst_case / f"sample-{i}"
            folder.mkdir()
            summary = read_record(src / "summary.json", SampleSummary)
            lean = i >= PASSING_KEPT and summary.status == "ok" and summary.artifacts
            for f in src.iterdir():
                if f.name != "summary.json" and not (lean and f.suffix in (".png", ".npy")):
                    shutil.copyfile(f, folder / f.name)
            update: dict[str, Any] = {"sample": i, "artifact_digests": artifact_digests(folder)}
            if lean:
                detail = {k: v for k, v in summary.detail.items() if k != "artifact_range"}
                update.update(artifacts=[], detail={**detail, "images": "not kept (--artifacts failures)"})
            written = summary.model_copy(update=update)
            data = (written.model_dump_json(indent=2) + "\n").encode("utf-8")
            (folder / "summary.json").write_bytes(data)
            line(
                "unit",
                label=LABEL,
                sample=i,
                status=summary.status,
                summary=(folder / "summary.json").relative_to(dst).as_posix(),
                sha256=jr.digest(data),
                brief=jr.brief_of(written, data),
            )
        case = read_record(src_case / "summary.json", CaseSummary)
        scale = n // m
        case = case.model_copy(
            update={
                "samples": n,
                "passed": case.passed * scale,
                "counts": {k: v * scale for k, v in case.counts.items()},
            }
        )
        write_record(dst_case / "summary.json", case)
        data = (dst_case / "summary.json").read_bytes()
        verdict = case.extra.get("verdict")
        line(
            "case",
            label=LABEL,
            summary=(dst_case / "summary.json").relative_to(dst).as_posix(),
            sha256=jr.digest(data),
            detail={"verdict": verdict, "samples": n},
        )
        line(
            "end",
            detail={"complete": True, "counts": record.counts and {k: v * scale for k, v in record.counts.items()}},
        )
    jr._keep_state_anchor(run_id, first_mac, previous, count)
    receipt = json.loads((dst / "receipt.json").read_text())
    receipt["journal"] = jr.signed_anchor(key, key_id, previous, count)
    (dst / "receipt.json").write_text(json.dumps(receipt, indent=2) + "\n")
    closed = new_record.model_copy(update={"counts": {k: v * scale for k, v in record.counts.items()}})
    write_record(dst / "run.json", closed)
    return dst


def measure(run_dir: Path, n: int) -> dict[str, float]:
    row: dict[str, float] = {"folder_mb": folder_size(run_dir) / 1e6}
    wall, rss, rc = measured(imagebench("report", str(run_dir), "--quiet"))
    if rc != 0:
        raise SystemExit(f"imagebench report {run_dir} exited {rc}: the folder did not verify")
    row.update(report_s=wall, report_mb=rss / 1024, html_mb=(run_dir / "report.html").stat().st_size / 1e6)
    wall, rss, _ = measured(imagebench("compare", str(run_dir), str(run_dir)))
    row.update(compare_s=wall, compare_mb=rss / 1024)
    check = (
        "import sys; from pathlib import Path; from imagebench.executor.run import resume_check; "
        f"c, kept = resume_check(Path(sys.argv[1]), {SUBJECT!r}, {{{LABEL!r}: {n}}}); "
        "sys.exit(1 if c.problems else 0)"
    )
    wall, rss, rc = measured([sys.executable, "-c", check, str(run_dir)])
    if rc != 0:
        raise SystemExit(f"the resume check of {run_dir} found problems")
    row.update(check_s=wall, check_mb=rss / 1024)
    wall, rss, _ = measured(imagebench("run", "--resume", str(run_dir), "--quiet", "--no-report"))
    row.update(resume_s=wall, resume_mb=rss / 1024)
    return row


COLUMNS = (
    ("folder_mb", "folder MB"),
    ("html_mb", "report.html MB"),
    ("report_s", "report s"),
    ("report_mb", "report peak MB"),
    ("compare_s", "compare s"),
    ("compare_mb", "compare peak MB"),
    ("check_s", "resume check s"),
    ("check_mb", "resume check peak MB"),
    ("resume_s", "run --resume s"),
    ("resume_mb", "run --resume peak MB"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000], metavar="N")
    parser.add_argument("--real-max", type=int, default=10000, metavar="N", help="sizes above this are synthetic")
    parser.add_argument("--work", metavar="DIR", help="keep the run folders here (default: a temporary folder)")
    args = parser.parse_args(argv)
    if not Path(TIME).exists():
        raise SystemExit(f"{TIME} is needed to measure peak memory")
    sizes = sorted(args.sizes)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="imagebench-growth-"))
    rows: dict[int, dict[str, float]] = {}
    made: dict[int, str] = {}
    real = [n for n in sizes if n <= args.real_max]
    if not real:
        raise SystemExit("--real-max: at least one size must be a real run (the synthetic ones are made from it)")
    template = None
    for n in sizes:
        if n <= args.real_max:
            run_dir = template = real_run(work, n)
            made[n] = "real"
        else:
            assert template is not None
            run_dir = synthetic_run(work, template, n)
            made[n] = f"synthetic from the {real[-1]}-sample run"
        print(f"  measuring {n} samples ({made[n]}) in {run_dir}", file=sys.stderr, flush=True)
        rows[n] = measure(run_dir, n)
    print(f"\n{'samples':>9} " + " ".join(f"{title:>14}" for _, title in COLUMNS))
    for n in sizes:
        print(f"{n:>9} " + " ".join(f"{rows[n][key]:>14.2f}" for key, _ in COLUMNS) + f"   ({made[n]})")
    lo, hi = sizes[0], sizes[-1]
    print(f"\nratios {hi}/{lo} samples (target <= 3x for report size and time):")
    for key, title in COLUMNS:
        print(f"  {title:<22} {rows[hi][key] / rows[lo][key]:8.2f}x")
    if len(sizes) >= 2:
        mid = sizes[-2]
        print(f"\npeak memory ratios {hi}/{mid} samples (target <= 1.5x):")
        for key, title in COLUMNS:
            if key.endswith("_mb") and key not in ("folder_mb", "html_mb"):
                print(f"  {title:<22} {rows[hi][key] / rows[mid][key]:8.2f}x")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
