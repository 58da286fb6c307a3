"""What inspect_ai loads through the bench's ``inspect_ai`` entry point: the task and the hook."""

from __future__ import annotations

from imagebench.inspectai.hooks import LogBeside
from imagebench.inspectai.task import case

__all__ = ["LogBeside", "case"]
