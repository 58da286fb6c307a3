"""A case, and the session a subject works it in.

- :mod:`.model`: ``Case``, ``Layer``, ``Collect``, ``Skill`` and choosing cases (``select_cases``);
- :mod:`.session`: what a subject sees (``Session``, ``open_session``, ``case_prompt``, ``collect_attempt``);
- :mod:`.skills`: the skills a case offers, and the ones the harness observed a subject activate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)

if TYPE_CHECKING:  # pragma: no cover
    from imagebench.case.model import (
        LAYER_KINDS,
        PRESENTATIONS,
        Case,
        CaseError,
        Collect,
        Layer,
        Skill,
        presentation_warnings,
        select_cases,
    )
    from imagebench.case.session import Session, SessionLayer, case_prompt, collect_attempt, open_session
    from imagebench.case.skills import ObservedSkills, note_observed, offered_skills, read_observed
