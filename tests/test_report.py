"""The static HTML report: rows failures first, nothing dropped, everything escaped, images that load."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pytest
from helpers import UnavailableSpec, make_toy_case, resign_run

from imagebench import cli
from imagebench.executor import run_cases
from imagebench.fixtures.fixture import Attempt, Fixture, Outcome
from imagebench.report import REPORT_NAME, ReportError, read_page, write_html_report
from imagebench.runs.verdict import RunResult
from imagebench.subjects import ReferenceSubject

HOSTILE = "<script>alert('x')</script> & \"quoted\""
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")) if p and Path(p).exists()), None)


def _hostile_verifier(fixture: Fixture, attempt: Attempt) -> Outcome:
    raise ValueError(HOSTILE)


def _wrong_reference(session: Any) -> None:
    image = np.asarray(session.namespace["image"])
    session.namespace["mask"] = image > 0.5
    session.namespace["area"] = 3  # far from the truth


class Page(HTMLParser):
    """Collects the result rows, image sources, section order and body attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self.images: list[str] = []
        self.sections: list[str] = []
        self.body: dict[str, str] = {}
        self.status_rows: dict[str, str] = {}
        self._status: str | None = None
        self._cell = 0
        self.scripts = 0
        self.text = ""
        self.headings: list[str] = []
        self._heading = False
        self._row: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "tr" and "case-row" in a.get("class", ""):
            a["text"] = ""  # the row's text, entities decoded
            self.rows.append(a)
            self._row = a
        if tag == "img":
            self.images.append(a["src"])
        if tag == "section":
            self.sections.append(a.get("data-label", ""))
        if tag == "body":
            self.body = a
        if tag == "tr" and "data-status" in a:
            self._status, self._cell = a["data-status"], 0
        if tag == "td" and self._status is not None:
            self._cell += 1
        if tag == "script":
            self.scripts += 1
        if tag == "h2":
            self._heading = True
            self.headings.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._heading = False
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        self.text += data
        if self._row is not None:
            self._row["text"] += data
        if self._heading:
            self.headings[-1] += data
        if self._status is not None and self._cell == 2 and data.strip():
            self.status_rows[self._status] = data.strip()
            self._status = None


def _parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


@pytest.fixture
def mixed_run(tmp_path: Path) -> RunResult:
    cases = [
        make_toy_case("passes"),
        make_toy_case("hostile", verify=_hostile_verifier),
        make_toy_case("elsewhere", spec=UnavailableSpec("the toy tree is not here")),
        make_toy_case("wrong", reference=_wrong_reference),
    ]
    return run_cases(cases, ReferenceSubject(), samples=2, out=tmp_path, progress=False)


def test_rows_failures_first_and_every_status_counted(mixed_run: RunResult) -> None:
    path = write_html_report(mixed_run.run_dir)
    assert path == mixed_run.run_dir / REPORT_NAME
    text = path.read_text(encoding="utf-8")
    page = _parse(text)
    order = [(r["data-label"], r["data-verdict"]) for r in page.rows]
    assert order == [
        ("toy/wrong", "fail"),
        ("toy/hostile", "error"),  # a harness error is the bench's fault: apart from the failures
        ("toy/elsewhere", "skipped"),
        ("toy/passes", "pass"),
    ]
    assert page.sections == ["toy/wrong", "toy/hostile", "toy/elsewhere", "toy/passes"]
    # every status has a row; skipped and harness errors are counted, never dropped
    assert page.status_rows["ok"] == "2"
    assert page.status_rows["harness-error"] == "2"
    assert page.status_rows["skipped"] == "2"
    assert page.status_rows["wrong-answer"] == "2"
    assert page.status_rows["timeout"] == "0" and page.status_rows["blocked"] == "0"
    # pass@k with its denominator, for k = 1 and k = samples
    assert "pass@1" in text and "pass@2" in text and "(2/2 scored ok)" in text and "(0/2 scored ok)" in text
    # the hostile message is shown, escaped: as text on the page, never as markup
    assert "<script>alert(" not in text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#34;quoted&#34;" in text
    assert HOSTILE in page.text
    assert page.scripts == 1  # only the page's own
    # metrics against limits
    assert "mask_error" in text and "/ 0.05" in text


def test_images_are_relative_files_with_their_shared_range(mixed_run: RunResult) -> None:
    text = write_html_report(mixed_run.run_dir).read_text(encoding="utf-8")
    page = _parse(text)
    assert page.images, "the verifier's artifacts are not on the page"
    for src in page.images:
        assert not src.startswith(("/", "file:", "http")), src
        assert (mixed_run.run_dir / unquote(src)).is_file(), src
    summary = mixed_run.samples["toy/passes"][0]
    lo, hi = summary.detail["artifact_range"]
    assert f"[{lo:.4g}, {hi:.4g}]" in text
    assert "http://" not in text and "https://" not in text  # nothing fetched from anywhere


def test_receipt_and_an_incomplete_run(mixed_run: RunResult, tmp_path: Path) -> None:
    text = write_html_report(mixed_run.run_dir).read_text(encoding="utf-8")
    assert (mixed_run.run_dir / "receipt.json").is_file()
    assert 'id="receipt"' in text and "source revision" in text
    # a run cut short: no receipt, one case never reached, one sample missing
    (mixed_run.run_dir / "receipt.json").unlink()
    record = json.loads((mixed_run.run_dir / "run.json").read_text())
    record["complete"] = False
    record["cases"].append("toy/never-reached")
    (mixed_run.run_dir / "run.json").write_text(json.dumps(record))
    (mixed_run.run_dir / "reference/toy/passes/summary.json").unlink()
    (mixed_run.run_dir / "reference/toy/passes/sample-1/summary.json").unlink()
    run = read_page(mixed_run.run_dir)
    verdicts = {v.label: v.verdict for v in run.cases}
    assert verdicts["toy/never-reached"] == "missing" and verdicts["toy/passes"] == "incomplete"
    text = write_html_report(mixed_run.run_dir).read_text(encoding="utf-8")
    assert "this run wrote no receipt.json" in text
    assert "imagebench run --resume" in text
    assert "of 10 expected" in text


def test_cli_report_and_run_write_the_page(mixed_run: RunResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (mixed_run.run_dir / REPORT_NAME).unlink(missing_ok=True)
    assert cli.main(["report", str(mixed_run.run_dir), "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(mixed_run.run_dir / REPORT_NAME)
    elsewhere = tmp_path / "pages" / "run.html"
    assert cli.main(["report", str(mixed_run.run_dir), "--out", str(elsewhere), "--quiet"]) == 0
    page = _parse(elsewhere.read_text(encoding="utf-8"))
    assert page.images and all((elsewhere.parent / unquote(src)).is_file() for src in page.images)
    assert cli.main(["report", str(tmp_path / "nothing-here")]) == 2
    assert "not a folder" in capsys.readouterr().err
    with pytest.raises(ReportError, match="run.json: file is missing"):
        write_html_report(tmp_path / "pages")


def test_markup_in_a_label_subject_or_reason_stays_text(mixed_run: RunResult) -> None:
    """Text the run wrote (a case label, the subject, a case's reason, a flag) is escaped by the
    template wherever it lands: element text, an attribute, the title, the anchor."""
    run_json = mixed_run.run_dir / "run.json"
    record = json.loads(run_json.read_text())
    record["cases"].append(HOSTILE)  # a case the run never reached, under a label that is markup
    record["selection"] = {"k": [HOSTILE]}
    run_json.write_text(json.dumps(record))
    case_json = mixed_run.run_dir / "reference/toy/wrong/summary.json"
    case = json.loads(case_json.read_text())
    case["extra"]["reasons"] = [HOSTILE]
    case_json.write_text(json.dumps(case))
    resign_run(mixed_run.run_dir)  # as if the run had written them (a case summary is journaled too)
    sample_json = mixed_run.run_dir / "reference/toy/passes/sample-0/summary.json"
    sample = json.loads(sample_json.read_text())
    sample["flags"] = [HOSTILE]
    sample_json.write_text(json.dumps(sample))

    text = write_html_report(mixed_run.run_dir).read_text(encoding="utf-8")
    page = _parse(text)
    assert "<script>alert(" not in text and "</script> &" not in text
    assert text.count("<script>") == 1 and page.scripts == 1  # the page's own, nothing from the run
    # the label comes back whole: as an attribute value, as the row's link and as a heading
    rows = {r["data-label"]: r for r in page.rows}
    assert rows[HOSTILE]["data-verdict"] == "missing" and rows[HOSTILE]["text"].strip().startswith(HOSTILE)
    assert HOSTILE in page.sections and f"{HOSTILE} missing" in page.headings
    # the reason is the failing case's first reason, as text in its row
    assert rows["toy/wrong"]["text"].strip().endswith(HOSTILE)
    # a sample edited after the run journaled it is left out and named, never shown as a result
    assert "sample 0: summary.json changed after it was journaled" in page.text
    assert f"sample 0: ok {HOSTILE}" not in page.text
    assert json.dumps({"k": [HOSTILE]}, sort_keys=True) in page.text


def test_the_template_ships_as_package_data() -> None:
    """Every template file is matched by pyproject's package-data, so an installed wheel can render."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[1]
    package = root / "src" / "imagebench"
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["imagebench"]
    templates = [p.relative_to(package).as_posix() for p in (package / "templates").rglob("*") if p.is_file()]
    assert "templates/report.html.j2" in templates
    for name in templates:
        assert any(fnmatch.fnmatch(name, pat) for pat in patterns), f"{name} is not package data ({patterns})"


# --------------------------------------------------------------------------- in a real browser


def _chromium(url: str, profile: Path, *extra: str) -> str:
    assert CHROMIUM is not None
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *extra,
        url,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on this machine (apt-get install chromium)")
def test_the_page_renders_in_headless_chromium_and_every_image_loads(mixed_run: RunResult, tmp_path: Path) -> None:
    path = write_html_report(mixed_run.run_dir)
    dom = _chromium(path.as_uri(), tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom")
    page = _parse(dom)
    n_images = len(_parse(path.read_text(encoding="utf-8")).images)
    assert n_images > 0
    assert page.body.get("data-images") == "loaded", page.body
    assert page.body.get("data-images-ok") == page.body.get("data-images-total") == str(n_images)
    assert [r["data-label"] for r in page.rows] == ["toy/wrong", "toy/hostile", "toy/elsewhere", "toy/passes"]
    # a broken image is noticed: the page says so instead of claiming success
    victim = mixed_run.run_dir / unquote(_parse(path.read_text(encoding="utf-8")).images[0])
    victim.write_bytes(b"not a png")
    dom = _chromium(path.as_uri(), tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom")
    assert _parse(dom).body.get("data-images") == "broken"
    shot = tmp_path / "page.png"
    _chromium(path.as_uri(), tmp_path / "profile", "--window-size=1280,1600", f"--screenshot={shot}")
    assert shot.is_file() and shot.stat().st_size > 10_000


def test_a_bundle_case_s_grading_checklist_is_in_its_case_summary_and_the_report(tmp_path: Path) -> None:
    from imagebench.bundle.load import load_bundle
    from imagebench.subjects import NopSubject

    bundle = Path(__file__).resolve().parents[1] / "examples" / "bundles" / "segment-nuclei"
    (case,) = [c for c in load_bundle(bundle).cases if c.case_id == "golden-count"]
    result = run_cases([case], NopSubject(), out=tmp_path, progress=False)
    checks = ["Reports an integer count", "The count matches the 25 nuclei drawn"]
    assert result.summaries[case.label].extra["checks"] == checks
    page = write_html_report(result.run_dir, progress=False).read_text()
    assert "grading checklist" in page and all(c in page for c in checks)
