"""The old path of :mod:`imagebench.fixtures.fixture`, kept for one version (docs/design.md).

``imagebench.scoring.contract`` still imports it: that module's text is pinned by the shipped
scorer manifest (its implementation hash), so it moves with the next change to the scorer."""

from imagebench.fixtures.fixture import (
    FIXTURES_ENV,
    Attempt,
    Fixture,
    FixtureError,
    Metric,
    Outcome,
    WhyNot,
    read_array,
    read_scalar,
)

__all__ = ["FIXTURES_ENV", "Attempt", "Fixture", "FixtureError", "Metric", "Outcome", "WhyNot", "read_array", "read_scalar"]
