"""SARIF 2.1.0 for GitHub code scanning and other static-analysis dashboards.

URIs are relative to `%SRCROOT%`, the repository root (portcheck.anchor: the git root, else
the folder of [tool.portcheck], else the current one; which one is the run's `anchor`
property and the base's description), as code scanning resolves them. Every result carries a
partialFingerprint (the line-shift-proof fingerprint), and every selected rule is described
with its documentation: a one-sentence shortDescription, and a helpUri to its page under
docs/rules/ (portcheck.rule_docs); all of it from portcheck.catalog.

SARIF has no notebook cells. A finding in a notebook has its region in the cell's own lines
(as in every other portcheck output and in Ruff's), the cell's number in the region's property
bag (`"properties": {"cell": 3}`), and the cell as a logical location (`nb.ipynb:cell 3`).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePath
from typing import TextIO
from urllib.parse import quote

from portcheck import __version__, anchor, catalog
from portcheck.api import ScanReport
from portcheck.findings import Finding, Severity
from portcheck.wording import sentences

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_KEY = "portcheck/v1"
SRCROOT = "%SRCROOT%"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note", Severity.OFF: "none"}


def _rule_descriptor(rule: catalog.Entry) -> dict[str, object]:
    sections = dict(rule.sections)
    what = sections.get("What it does", "")
    why = sections.get("Why is this bad?", "")
    markdown = "\n\n".join(f"## {title}\n{body}" for title, body in rule.sections)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.headline[:1024]},
        "fullDescription": {"text": f"{what}\n\n{why}".strip()[:1024]},
        "helpUri": catalog.help_uri(rule.code),
        "help": {"text": f"{why}\n\nUse instead:\n{sections.get('Use instead', '')}".strip(), "markdown": markdown},
        "defaultConfiguration": {"level": _LEVEL[rule.worst]},
        "properties": {"tags": ["portability", rule.family], "precision": "high"},
    }


def _result(finding: Finding, rule_index: dict[str, int], path: str) -> dict[str, object]:
    text = sentences(finding.message, finding.hint)
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "level": _LEVEL[finding.severity],
        "message": {"text": text},
        "locations": [_location(finding, path)],
        "partialFingerprints": {FINGERPRINT_KEY: finding.fingerprint},
        "properties": {"targets": {target: level.label for target, level in finding.targets}},
    }


def _location(finding: Finding, path: str) -> dict[str, object]:
    """Where a finding is; `path` is the file's location from the anchor (absolute outside it)."""
    region: dict[str, object] = {
        "startLine": finding.line,
        "startColumn": finding.column,
        "endLine": finding.end_line,
        "endColumn": finding.end_column,
    }
    absolute = PurePath(path).is_absolute()
    artifact = {"uri": Path(path).as_uri()} if absolute else {"uri": quote(path), "uriBaseId": SRCROOT}
    if finding.cell is None:
        return {"physicalLocation": {"artifactLocation": artifact, "region": region}}
    cell = f"cell {finding.cell}"
    return {
        "physicalLocation": {"artifactLocation": artifact, "region": {**region, "properties": {"cell": finding.cell}}},
        "logicalLocations": [{"name": cell, "fullyQualifiedName": f"{path}:{cell}", "kind": "notebookCell"}],
    }


def document(report: ScanReport) -> dict[str, object]:
    codes = sorted(set(report.config.rules) | {f.code for f in report.findings})
    rule_index = {code: index for index, code in enumerate(codes)}
    notifications = [
        {"level": "error", "message": {"text": error}} for error in (*report.errors, *report.internal_errors)
    ]
    root_uri = report.anchor.root.as_uri().rstrip("/") + "/"
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "portcheck",
                        "version": __version__,
                        "semanticVersion": __version__.split("+")[0],
                        "informationUri": "https://pypi.org/project/portcheck/",
                        "rules": [_rule_descriptor(catalog.entries()[code]) for code in codes],
                    }
                },
                "automationDetails": {"id": f"portcheck/{'+'.join(report.config.targets)}/"},
                "originalUriBaseIds": {
                    SRCROOT: {"uri": root_uri, "description": {"text": anchor.DESCRIPTIONS[report.anchor.kind]}}
                },
                "properties": {"anchor": report.anchor.kind},
                "invocations": [
                    {"executionSuccessful": not report.internal_errors, "toolExecutionNotifications": notifications}
                ],
                "results": [_result(f, rule_index, report.location(f)) for f in report.findings],
            }
        ],
    }


def render(report: ScanReport, out: TextIO, color: bool = False) -> None:
    json.dump(document(report), out, indent=2)
    out.write("\n")
