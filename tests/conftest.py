"""The test run's environment and its pytest fixtures; the shared helpers are in ``helpers.py``."""

from __future__ import annotations

import os

# Each test builds its own fixtures: the fixture cache (imagebench.fixtures.cache) is off unless a test
# turns it on (tests/test_cache.py), and so it is in every process a test starts.
os.environ["IMAGEBENCH_CACHE"] = "off"
# The user's state folder (the journal key, sealed runs' secrets): one per test session, never the user's.
if "IMAGEBENCH_STATE" not in os.environ:
    import tempfile

    os.environ["IMAGEBENCH_STATE"] = tempfile.mkdtemp(prefix="imagebench-state-")

from collections.abc import Callable  # noqa: E402

import pytest  # noqa: E402
from helpers import make_toy_case  # noqa: E402

from imagebench.case.model import Case  # noqa: E402


@pytest.fixture
def toy_case() -> Callable[..., Case]:
    """Factory for toy cases: ``toy_case(case_id="x", spec=..., reference=None, ...)``."""
    return make_toy_case


@pytest.fixture(autouse=True)
def _leftovers_kept_aside(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The panel asks in a message box what to do with a person's layers of another case (not
    modal since the box was found to hold tests up for ever: the Load keeps them aside and goes
    on). Unless a test is marked ``leftovers_box`` (it answers the real box), the question is
    answered Keep aside, as a script's model answers it, and no box is left on screen. Only where
    the plugin's Qt side is already imported (no Qt here)."""
    import sys

    panel = sys.modules.get("napari_imagebench._answer_panel")
    if panel is None or request.node.get_closest_marker("leftovers_box"):
        return
    monkeypatch.setattr(panel.AnswerPanel, "ask_leftovers", lambda self, question: "keep")
