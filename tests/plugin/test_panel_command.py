"""``command:`` subjects run from the panel's model, confined as ``imagebench run`` confines them
(issue 26, item 9d): the bubblewrap sandbox, its limits, a sealed fixture of its own; refused with
the command line's own message where bubblewrap cannot start; a dishonest command does not reach
the truth the sitting holds; the served agent's submit is told, and how to connect the example agent."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import make_toy_case

from imagebench.records import RunRecord, SampleSummary, read_record
from imagebench.runs.sitting import read_sitting
from imagebench.sandbox.policy import unavailable_reason
from napari_imagebench._agent_model import SUBMITTED, connect_command, example_agent
from napari_imagebench._controls import PanelState
from napari_imagebench._model import INTERACTIVE, BenchModel, PanelError
from napari_imagebench._subjects_model import COMMAND_ENTRY

PY = shlex.quote(sys.executable)
TOY = "toy/rectangle"
needs_bwrap = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

# The honest command: threshold the image and leave the mask and its area.
HONEST = (
    f"{PY} -c \"import numpy as np; m = np.load('inputs/image.npy') > 0.5; "
    "np.save('outputs/mask.npy', m); open('outputs/area.json', 'w').write(str(int(m.sum())))\""
)


def _dishonest(truth: Path) -> str:
    """A command that goes after the truth: the reference's truth artifact in the sitting (by its
    full path), then the harness's package rebuilt from the case's public seed; it leaves whatever
    it found and says on stdout what it reached."""
    code = (
        "import sys, numpy as np\n"
        "try:\n"
        f"    t = np.load({str(truth)!r}) > 0.5; print('REACHED-TRUTH'); np.save('outputs/mask.npy', t)\n"
        "    open('outputs/area.json', 'w').write(str(int(t.sum())))\n"
        "except Exception as exc: print('no truth file:', type(exc).__name__)\n"
        "try:\n"
        "    import imagebench; print('IMPORTED-IMAGEBENCH')\n"
        "except Exception as exc: print('no imagebench:', type(exc).__name__)\n"
    )
    return f"{PY} -c {shlex.quote(code)}"


def _loaded_model(tmp_path: Path) -> BenchModel:
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    model.load(TOY)
    return model


def _run(model: BenchModel, spec: str):  # noqa: ANN202 - a ResultRow
    job = model.prepare_run(spec)
    assert job.unit is None and job.sealed  # its unit is opened by work(), in the worker thread
    left = model.finish_run(job, job.work())
    assert left == {}  # a sealed fixture of its own: nothing drawn over the viewer's case
    assert job.unit is not None and job.unit.seed is not None
    return model.score(spec)


@needs_bwrap
def test_a_command_runs_from_the_panel_confined_and_sealed_as_on_the_command_line(tmp_path: Path) -> None:
    model = _loaded_model(tmp_path)
    spec = model.subjects.add_command(HONEST)
    assert spec == "command:" + HONEST and spec in model.subject_specs
    assert "in the bubblewrap sandbox, on sealed fixtures of its own" in model.messages[-1].text
    first, second = _run(model, spec), _run(model, spec)
    assert (first.status, second.status) == ("ok", "ok"), (first.reason, second.reason)
    summaries = [read_record(r.sample_dir / "summary.json", SampleSummary) for r in (first, second)]
    assert [s.sandbox for s in summaries] == ["bubblewrap", "bubblewrap"]
    assert summaries[0].limits is not None
    public = model.loaded.unit.prepared.seed if model.loaded is not None else None
    seeds = [s.seed for s in summaries]
    assert None not in seeds and seeds[0] != seeds[1] and public not in seeds  # each sample its own sealed seed
    record = read_record(first.run_dir / "run.json", RunRecord)
    assert record.sandbox == "bubblewrap" and record.limits is not None
    assert record.extra["sealed"]["origin"] == "default" and "unsealed" not in record.extra
    assert record.extra["execution"]["sealing"] == "sealed by default" and record.extra["execution"]["network"] is False
    assert record.extra["subject_spec"].startswith("command:") and record.extra["subject_identity"]["name"] == first.subject
    assert (first.sample_dir / "stdout.txt").is_file()
    assert read_sitting(model.ledger.sitting_dir).verified  # type: ignore[arg-type]


@needs_bwrap
def test_a_dishonest_command_from_the_panel_does_not_reach_the_truth(tmp_path: Path) -> None:
    model = _loaded_model(tmp_path)
    job = model.prepare_run("reference")
    model.finish_run(job, job.work())
    reference = model.score("reference")
    truth = reference.sample_dir / "truth.npy"
    assert truth.is_file()  # the sitting holds the truth of the reference's sample
    command = _dishonest(truth)
    # outside the sandbox the route is real: the same command reads the truth and imports the harness
    outside = tmp_path / "outside"
    (outside / "outputs").mkdir(parents=True)
    done = subprocess.run(["bash", "-c", command], cwd=outside, capture_output=True, text=True, timeout=120, check=False)
    assert "REACHED-TRUTH" in done.stdout and "IMPORTED-IMAGEBENCH" in done.stdout, done.stdout + done.stderr

    spec = model.subjects.add_command(command)
    row = _run(model, spec)
    stdout = (row.sample_dir / "stdout.txt").read_text()
    assert "REACHED-TRUTH" not in stdout and "no truth file" in stdout, stdout
    assert "IMPORTED-IMAGEBENCH" not in stdout and "no imagebench" in stdout, stdout
    summary = read_record(row.sample_dir / "summary.json", SampleSummary)
    assert summary.status == "no-result" and summary.sandbox == "bubblewrap", summary.reason


def test_without_bubblewrap_a_command_is_refused_with_the_command_lines_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import imagebench.subjects.command as command_kind
    from imagebench.cli import main

    why = "bubblewrap (bwrap) is not installed: install it (apt install bubblewrap), or pass --no-sandbox"
    monkeypatch.setattr(command_kind, "unavailable_reason", lambda: why)
    model = _loaded_model(tmp_path)
    with pytest.raises(PanelError) as refused:
        model.subjects.add_command("echo hi")
    assert str(refused.value) == why and model.messages[-1].level == "error"
    assert "command:echo hi" not in model.subject_specs
    assert main(["run", "-k", "toy/none", "--subject", "command:echo hi", "--out", str(tmp_path / "cli")]) == 2
    assert why in capsys.readouterr().err  # the command line refuses it in the same words
    assert not (tmp_path / "out").exists() and not (tmp_path / "cli").exists()  # nothing ran, nothing was written


def test_the_command_entry_asks_for_a_line_and_runs_nothing(tmp_path: Path) -> None:
    model = _loaded_model(tmp_path)
    controls = model.controls(PanelState(subject=COMMAND_ENTRY))
    assert not controls.run.enabled and not controls.score.enabled and "add one" in controls.run.why
    with pytest.raises(PanelError, match="type a command line first"):
        model.subjects.add_command("   ")
    assert model.controls(PanelState(subject=INTERACTIVE)).score.why  # the person's own rules are untouched


def test_the_served_agent_is_told_how_to_connect_and_its_submit_is_a_notice(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    model = _loaded_model(tmp_path)
    serve = model.serve_agent()
    try:
        line = serve.connect
        assert line == connect_command(serve.config)
        assert shlex.split(line) == [sys.executable, str(example_agent()), "--config", str(serve.config)]
        assert example_agent().is_file() and example_agent().name == "classical_agent.py"
        assert line in model.messages[-1].text
        call = SimpleNamespace(tool="list_layers", ok=True)
        assert model.serving.heard(call) is None and not serve.submitted
        assert model.serving.heard(SimpleNamespace(tool="submit", ok=False)) is None  # a refused submit is no submit
        told = model.serving.heard(SimpleNamespace(tool="submit", ok=True))
        assert told is not None and told.text.endswith(SUBMITTED) and told.level == "info"
        assert model.serving.heard(SimpleNamespace(tool="submit", ok=True)) is None  # told once
    finally:
        model.stop_agent()


def test_a_served_agent_submitting_through_its_tools_is_told_without_a_viewer(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    model = _loaded_model(tmp_path)
    serve = model.serve_agent()  # no on_call: the model hears each call on the server's thread
    try:
        serve.agent.call("submit", {"note": "done"}, lambda: serve.agent.submit("done"))
        assert serve.submitted and [m.text for m in model.messages if m.text.endswith(SUBMITTED)] == [
            f"{serve.subject_name}: {SUBMITTED}"
        ]
    finally:
        model.stop_agent()
