"""Cases of the bench as inspect_ai tasks (``inspect eval imagebench/case -T label=...``).

The package is the bench's inspect extension (the ``inspect_ai`` entry point names
:mod:`imagebench.inspectai.registry`): :mod:`.task` (the task, its solver and its scorer),
:mod:`.subject` (the subject whose turn is inspect's agent loop over the case's MCP tools) and
:mod:`.hooks` (the inspect log copied into the run folder). Importing it imports inspect_ai
(the ``agents`` extra); nothing else of the bench does.
"""
