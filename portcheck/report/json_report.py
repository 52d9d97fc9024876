"""Every field of every finding, as one JSON document (schema_version 1).

Paths are relative to `anchor.root`, the repository root (portcheck.anchor), so they do not
depend on where portcheck ran. In a notebook, `cell` is the cell's number (from 1, among all
cells) and lines count within the cell, as in Ruff's JSON; elsewhere `cell` is null."""

from __future__ import annotations

import json
from typing import TextIO

from portcheck import __version__
from portcheck import targets as target_data
from portcheck.api import ScanReport
from portcheck.findings import Finding
from portcheck.report import counts_by_severity, counts_by_target, statistics

SCHEMA_VERSION = 1


def finding_dict(f: Finding, path: str | None = None) -> dict[str, object]:
    """Every field of a finding; `path` is its file's location from the anchor, when known."""
    return {
        "code": f.code,
        "name": f.name,
        "message": f.message,
        "hint": f.hint,
        "severity": f.severity.label,
        "targets": {target: level.label for target, level in f.targets},
        "path": f.path if path is None else path,
        "cell": f.cell,
        "line": f.line,
        "column": f.column,
        "end_line": f.end_line,
        "end_column": f.end_column,
        "source_line": f.source_line,
        "fix": {"available": f.fix_safety.value != "none", "safety": f.fix_safety.value},
        "fingerprint": f.fingerprint,
    }


def document(report: ScanReport) -> dict[str, object]:
    by_severity = counts_by_severity(report.findings)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "portcheck", "version": __version__, "target_data": target_data.data_fingerprint()},
        "anchor": {"kind": report.anchor.kind, "root": report.anchor.root.as_posix()},
        "targets": list(report.config.targets),
        "rules": list(report.config.rules),
        "summary": {
            "files": report.files,
            "skipped_by_prefilter": report.skipped,
            "findings": len(report.findings),
            "baselined": report.baselined,
            "by_severity": {level.label: count for level, count in sorted(by_severity.items(), reverse=True)},
            "by_target": {
                target: {level.label: count for level, count in sorted(counts.items(), reverse=True)}
                for target, counts in counts_by_target(report.findings).items()
            },
            "by_rule": {row.code: row.count for row in statistics(report)},
        },
        "errors": [*report.errors, *report.internal_errors],
        "findings": [finding_dict(f, report.location(f)) for f in report.findings],
    }


def render(report: ScanReport, out: TextIO, color: bool = False) -> None:
    json.dump(document(report), out, indent=2)
    out.write("\n")
