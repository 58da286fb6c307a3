"""``imagebench schema``: print the JSON schema of each on-disk format."""

from __future__ import annotations

import argparse
import importlib
import json

from imagebench.cli import UsageError

# record name -> "module:Model". Every on-disk format the bench reads or writes is listed here.
FORMATS: dict[str, str] = {
    "summary": "imagebench.records:SampleSummary",
    "case-summary": "imagebench.records:CaseSummary",
    "run": "imagebench.records:RunRecord",
    "sitting": "imagebench.runs.sitting:SittingRecord",
    "manifest": "imagebench.fixtures.tree:Manifest",
    "fixture-case": "imagebench.fixtures.tree:CaseLayout",
    "receipt": "imagebench.runs.receipt:Receipt",
    "scorer-manifest": "imagebench.scoring.manifest:ScorerManifest",
    "task-contract": "imagebench.scoring.contract:TaskContract",
    "bundle-case": "imagebench.bundle.casefile:CaseFile",
    "case-declaration": "imagebench.case.declared:CaseDeclaration",
    "suite": "imagebench.suite.model:SuiteManifest",
    "suite-aliases": "imagebench.suite.model:AliasFile",
    "suite-run": "imagebench.suite.record:SuiteRunInfo",
    "comparison": "imagebench.suite.compare:Comparison",
    "cache-entry": "imagebench.fixtures.cache:CacheEntry",
    "closure-cache-entry": "imagebench.runs.closurecache:ClosureCacheEntry",
    "transcript": "imagebench.subjects.mcp.transcript:Transcript",
    "views-index": "imagebench.subjects.views:ViewsIndex",
    "agent": "imagebench.subjects.agents.envelope:AgentRecord",
    "calibration": "imagebench.executor.calibration:CalibrationRecord",
    "calibration-store": "imagebench.executor.calibrated:CalibrationStore",
    "ctc-lineage": "imagebench.tracking.ctc:Lineage",
    "ctc-metrics": "imagebench.tracking.metrics:CtcScores",
    "prices": "imagebench.usage.prices:PriceTable",
}


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the JSON schema of an on-disk format (summary, run, manifest, ...)")
    p.add_argument("record", nargs="?", help="format name; omit to list them")
    p.set_defaults(func=_cmd_schema)


def load_model(name: str) -> type:
    module, _, attr = FORMATS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def _cmd_schema(args: argparse.Namespace) -> int:

    if not args.record:
        print("\n".join(sorted(FORMATS)))
        return 0
    if args.record not in FORMATS:
        raise UsageError(f"unknown format {args.record!r}; valid: {', '.join(sorted(FORMATS))}")
    print(json.dumps(load_model(args.record).model_json_schema(), indent=2))
    return 0
