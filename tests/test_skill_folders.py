"""Skills for real (issue 31 part 4): Agent Skills folders (``SKILL.md``), a bundle's own skill and
its distractors, ``list_skills``/``use_skill`` over them, and trigger cases graded on the skill the
agent chose, from the transcript. A bad ``SKILL.md`` is named with its field."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import imagebench
from imagebench import cases as builtin
from imagebench.bundle.load import load_bundle
from imagebench.case.session import collect_attempt, open_session
from imagebench.case.skillfile import (
    SkillFileError,
    builtin_skill_docs,
    parse_skill_text,
    read_skill,
    read_skills_dir,
)
from imagebench.case.skills import offered_skills, skill_instructions
from imagebench.runs.runner import observed_notes, prepare_fixture
from imagebench.subjects.mcp.tools import AgentSession, CaseView, ToolError

ROOT = Path(imagebench.__file__).resolve().parents[2]
BUNDLE = ROOT / "examples" / "bundles" / "segment-nuclei"
TRIGGER = "trigger-how-many-cells"
GOOD = """---
name: count-things
description: >
  Count things in an image.
  Use when a task asks how many.
license: MIT
metadata:
  author: someone
  version: "2"
---

# Count things

1. Threshold, label, count.
"""


def _folder(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


# --------------------------------------------------------------------------- SKILL.md


def test_a_skill_md_is_read_as_the_agent_skills_format(tmp_path: Path) -> None:
    doc = read_skill(_folder(tmp_path, "count-things", GOOD))
    assert doc.name == "count-things" and doc.description == "Count things in an image. Use when a task asks how many."
    assert doc.instructions == "# Count things\n\n1. Threshold, label, count."
    assert doc.license == "MIT" and dict(doc.metadata) == {"author": "someone", "version": "2"}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("no front matter\n", "must start with YAML front matter"),
        ("---\nname: x\ndescription: y\n", "never closed"),
        ("---\ndescription: y\n---\nbody\n", "field 'name' is missing"),
        ("---\nname: count-things\n---\nbody\n", "field 'description' is missing"),
        ("---\nname: Count-Things\ndescription: y\n---\nbody\n", "field 'name' is 'Count-Things'; expected 1 to 64"),
        ("---\nname: count--things\ndescription: y\n---\nbody\n", "no two hyphens together"),
        ("---\nname: count-things\ndescription: " + "d" * 1025 + "\n---\nbody\n", "field 'description' has 1025"),
        ("---\nname: count-things\ndescription: ''\n---\nbody\n", "field 'description' is empty"),
        ("---\nname: count-things\ndescription: y\n---\n\n", "no instructions"),
        ("---\nname: count-things\ndescription: [a, b]\n---\nb\n", "field 'description': '[' starts YAML"),
        ("---\nname: count-things\nname: again\ndescription: y\n---\nb\n", "field 'name' is given twice"),
        ('---\nname: count-things\ndescription: "open\n---\nb\n', "must close on its line"),
        ("---\nname: count-things\nmetadata: flat\ndescription: y\n---\nb\n", "field 'metadata' must be a mapping"),
    ],
)
def test_a_bad_skill_md_names_the_file_and_the_field(tmp_path: Path, text: str, field: str) -> None:
    folder = _folder(tmp_path, "count-things", text)
    with pytest.raises(SkillFileError) as err:
        read_skill(folder)
    assert str(err.value).startswith(str(folder / "SKILL.md")) and field in str(err.value)


def test_the_name_must_be_the_folders_and_a_link_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SkillFileError, match="field 'name' is 'count-things', but the folder is 'other'"):
        read_skill(_folder(tmp_path, "other", GOOD))
    secret = tmp_path / "answer-key.md"
    secret.write_text(GOOD)
    linked = tmp_path / "linked"
    linked.mkdir()
    os.symlink(secret, linked / "SKILL.md")
    with pytest.raises(SkillFileError, match="a symbolic link is refused"):
        read_skill(linked)


def test_an_unknown_field_is_a_warning_and_a_bad_folder_is_a_problem_not_a_skill(tmp_path: Path) -> None:
    warnings: list[str] = []
    doc = parse_skill_text(GOOD.replace("license: MIT", "color: blue"), "x/SKILL.md", warnings=warnings)
    assert doc.name == "count-things" and warnings == [
        "x/SKILL.md: unknown front-matter field 'color' (known: name, description, license, compatibility, metadata, allowed-tools)"
    ]
    _folder(tmp_path / "skills", "count-things", GOOD)
    _folder(tmp_path / "skills", "broken", "---\nname: broken\n---\nbody\n")
    skills, problems = read_skills_dir(tmp_path / "skills", [])
    assert list(skills) == ["count-things"] and "field 'description' is missing" in problems["broken"]


def test_every_built_in_skill_ships_its_skill_md() -> None:
    docs = builtin_skill_docs()
    assert sorted(docs) == sorted(builtin.skills())
    for name, doc in docs.items():
        assert doc.name == name and len(doc.instructions.splitlines()) >= 4, name
    (case,) = [c for c in builtin.all_cases() if c.label == "segment-nuclei/count-nuclei"]
    assert skill_instructions(case)["segment-nuclei"] == docs["segment-nuclei"].instructions
    assert offered_skills(case) == {"segment-nuclei": docs["segment-nuclei"].description}


# --------------------------------------------------------------------------- a bundle's skills and distractors


def _trigger(bundle: Path = BUNDLE) -> Any:
    loaded = load_bundle(bundle)
    (case,) = [c for c in loaded.cases if c.case_class == "trigger"]
    return case, loaded


def _copy_bundle(tmp_path: Path) -> Path:
    dest = tmp_path / "segment-nuclei"
    shutil.copytree(BUNDLE, dest)
    return dest


def _set_distractors(bundle: Path, names: list[str]) -> None:
    path = bundle / "evals" / "fixtures" / TRIGGER / "case.json"
    spec = json.loads(path.read_text())
    spec["grading"]["distractors"] = names
    path.write_text(json.dumps(spec))


def test_the_trigger_case_offers_its_skill_and_its_distractors_with_their_texts() -> None:
    case, _ = _trigger()
    offered = offered_skills(case)
    assert sorted(offered) == sorted(
        [
            "segment-nuclei",
            "segment-nuclei-3d",
            "spot-detection",
            "drift-correction",
            "measure-intensity",
            "denoise-image",
        ]
    )
    own = read_skill(BUNDLE)  # the bundle's own SKILL.md wins over the built-in one of the same name
    assert offered["segment-nuclei"] == own.description
    texts = skill_instructions(case)
    assert texts["segment-nuclei"] == own.instructions
    assert texts["measure-intensity"] == read_skill(BUNDLE / "skills" / "measure-intensity").instructions
    assert texts["spot-detection"] == builtin_skill_docs()["spot-detection"].instructions
    session = open_session(case, prepare_fixture(case).fixture)
    agent = AgentSession(CaseView.of(case), session)
    listed = agent.list_skills()["skills"]
    assert {s["name"]: s["about"] for s in listed} == offered  # name and description, every one
    assert agent.use_skill("denoise-image")["instructions"] == texts["denoise-image"]
    with pytest.raises(ToolError, match="no skill named 'segment-everything'"):
        agent.use_skill("segment-everything")


def test_a_distractor_that_is_no_skill_keeps_the_case_from_running_with_the_field(tmp_path: Path) -> None:
    bundle = _copy_bundle(tmp_path)
    _set_distractors(bundle, ["measure-intensity", "no-such-skill"])
    loaded = load_bundle(bundle)
    (why,) = [w for c, w in loaded.skipped if c == TRIGGER]
    assert "field 'grading.distractors': skill 'no-such-skill' cannot be offered" in why
    _set_distractors(bundle, ["segment-nuclei"])
    (why,) = [w for c, w in load_bundle(bundle).skipped if c == TRIGGER]
    assert "names 'segment-nuclei', the graded skill itself" in why


def test_a_bad_skill_md_in_a_bundle_is_named_by_reindex_and_never_offered(tmp_path: Path) -> None:
    bundle = _copy_bundle(tmp_path)
    (bundle / "skills" / "measure-intensity" / "SKILL.md").write_text("---\nname: measure-intensity\n---\nbody\n")
    loaded = load_bundle(bundle)
    named = [w for w in loaded.warnings if "measure-intensity/SKILL.md" in w]
    assert len(named) == 1 and "field 'description' is missing" in named[0]
    (why,) = [w for c, w in loaded.skipped if c == TRIGGER]  # the case named it as a distractor: it cannot run
    assert "skill 'measure-intensity' cannot be offered" in why and "field 'description' is missing" in why


def test_a_new_skill_text_is_a_new_case() -> None:
    from dataclasses import replace

    from imagebench.runs.fingerprint import agent_visible

    case, _ = _trigger()
    texts = dict(case.meta["skill_texts"])
    texts["denoise-image"] += "\nAnd one more step."
    changed = replace(case, meta={**case.meta, "skill_texts": texts})
    assert agent_visible(case)["skill_texts"] != agent_visible(changed)["skill_texts"]


# --------------------------------------------------------------------------- graded on the choice, from the transcript


@pytest.mark.parametrize(
    ("calls", "status", "chosen"),
    [
        (["segment-nuclei"], "ok", "segment-nuclei"),
        (["segment-nuclei-3d"], "wrong-answer", "segment-nuclei-3d"),  # the near miss
        (["measure-intensity", "segment-nuclei"], "wrong-answer", "measure-intensity"),  # two choices is no choice
        (
            [
                "segment-nuclei",
                "segment-nuclei-3d",
                "spot-detection",
                "drift-correction",
                "measure-intensity",
                "denoise-image",
            ],
            "wrong-answer",
            "segment-nuclei",
        ),  # every skill offered: not choosing
        ([], "wrong-answer", None),
    ],
)
def test_a_trigger_case_is_graded_on_the_skill_the_agent_chose(
    calls: list[str], status: str, chosen: str | None
) -> None:
    case, _ = _trigger()
    fixture = prepare_fixture(case).fixture
    session = open_session(case, fixture)
    agent = AgentSession(CaseView.of(case), session)
    for name in calls:
        agent.call("use_skill", {"name": name}, lambda name=name: agent.use_skill(name))
    # a dishonest agent also claims the skill it did not choose: ignored, only the transcript counts
    session.namespace["trace"] = [{"type": "skill", "name": "segment-nuclei"}]
    agent.apply_to(session)
    attempt = collect_attempt(case, "agent", session.lookup)
    observed_notes(attempt, session, "none", "agent")
    outcome = case.verify(fixture, attempt)
    assert outcome.status == status, outcome.detail
    assert outcome.detail.get("chosen") == chosen
    assert [a["name"] for a in outcome.detail["observed"]["activations"]] == list(dict.fromkeys(calls))
