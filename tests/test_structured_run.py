"""A structured case end to end through the runner: the answer as a command's final message."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from imagebench.case.model import Case, Collect, Layer
from imagebench.executor import run_cases
from imagebench.fixtures.fixture import Fixture
from imagebench.fixtures.specs import Procedural
from imagebench.records import SampleSummary, read_record
from imagebench.scoring import FieldRule, ScorerSpec, TaskContract, structured_verifier
from imagebench.subjects import parse_subject

CONTRACT = TaskContract(
    task_id="tasks/count-three",
    answer_schema={"count": FieldRule(comparator="integer_equal", config={})},
    ground_truth={"count": {"from_truth": "count"}},
    scorer=ScorerSpec(contract="deterministic_structured_v2_1"),
    evaluation_eligible=True,
)


def build_three(*, seed: int) -> Fixture:
    image = np.zeros((8, 8), np.float32)
    image[1, 1] = image[4, 4] = image[6, 2] = 1.0
    return Fixture(provenance=f"three dots, seed {seed}", data={"image": image}, truth={"count": np.int64(3)})


CASE = Case(
    case_id="count-three",
    namespace="tasks",
    task="Count the bright pixels in `image`; leave `answer` as {\"count\": <integer>}.",
    persona="a tester",
    fixture=Procedural(build_three, seed=1, tolerance={"answer_mismatch": 0.0}),
    layers=(Layer("image", "image"),),
    collect=(Collect("answer", what="json"),),
    verify=structured_verifier(CONTRACT),
    answer=CONTRACT,
)


@pytest.mark.parametrize(
    ("stdout", "status"),
    [
        ('I looked carefully.\nIMAGEBENCH_FINAL_JSON: {"count": 3}', "ok"),
        ('IMAGEBENCH_FINAL_JSON: {"count": "3"}', "wrong-answer"),
        ("There are three bright pixels.", "no-result"),  # talk without an answer left nothing
        ('IMAGEBENCH_FINAL_JSON: {"count": 3}\nand one more thing', "unscorable-result"),
    ],
)
def test_final_message_of_a_command_is_the_answer(tmp_path, stdout, status):
    # the text is in the command itself: a file under tmp_path is outside the subject's sandbox
    subject = parse_subject(f"command:printf %s {shlex.quote(stdout)}")
    result = run_cases([CASE], subject, out=tmp_path / "out", progress=False)
    (summary,) = result.samples[CASE.label]
    assert summary.status == status, summary.reason
    on_disk = read_record(next((result.run_dir).rglob("sample-*/summary.json")), SampleSummary)
    if status in ("ok", "wrong-answer"):
        assert on_disk.answer is not None and on_disk.answer["answer_score"] == (1.0 if status == "ok" else 0.0)
    else:
        assert on_disk.answer is None or on_disk.answer.get("answer_score") in (None, 0.0)


def test_outputs_file_still_wins_over_stdout(tmp_path):
    subject = parse_subject(
        "command:mkdir -p outputs && echo '{\"count\": 3}' > outputs/answer.json && echo 'IMAGEBENCH_FINAL_JSON: {\"count\": 9}'"
    )
    result = run_cases([CASE], subject, out=tmp_path / "out", progress=False)
    assert result.samples[CASE.label][0].status == "ok"
    assert json.loads(json.dumps(result.samples[CASE.label][0].answer))["answer_score"] == 1.0
