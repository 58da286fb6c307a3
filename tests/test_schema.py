"""Every on-disk format has a JSON schema with a schema version, printed by ``imagebench schema``."""

from __future__ import annotations

import json

import pytest

from imagebench.cli import main
from imagebench.cli.schema import FORMATS, load_model


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_prints_a_versioned_schema(name, capsys):
    assert main(["schema", name]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["type"] == "object"
    fields = set(schema["properties"])
    assert fields & {"schema_version", "version", "schemaVersion"}, f"{name} has no version field: {sorted(fields)}"
    assert load_model(name).__name__ in json.dumps(schema) or schema.get("title")


def test_unknown_format_is_a_usage_error(capsys):
    assert main(["schema", "nope"]) == 2
    assert "valid:" in capsys.readouterr().err
