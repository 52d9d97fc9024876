"""Reporters: pure functions from a ScanReport to text on a stream. Nothing else prints."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from portcheck.api import ScanReport
from portcheck.findings import Finding, Severity

Renderer = Callable[[ScanReport, TextIO, bool], None]


def formats() -> dict[str, Renderer]:
    from portcheck.report import concise, github, json_report, sarif, text

    return {
        "text": text.render,
        "concise": concise.render,
        "json": json_report.render,
        "sarif": sarif.render,
        "github": github.render,
    }


FORMAT_NAMES = ("text", "concise", "json", "sarif", "github")


def shown_path(finding: Finding, root: Path) -> str:
    """The finding's path as the user would type it from the current directory."""
    absolute = root / finding.path
    if not absolute.is_absolute():
        return finding.path
    relative = os.path.relpath(absolute)
    return finding.path if relative.startswith("..") else relative


def target_summary(finding: Finding, selected: tuple[str, ...]) -> str:
    """`error` when it matters the same on every selected target, else `error[tpu,neuron] warning[cpu]`."""
    levels = {level for _, level in finding.targets}
    if len(finding.targets) == len(selected) and len(levels) == 1:
        return finding.severity.label
    groups: dict[Severity, list[str]] = {}
    for target, level in finding.targets:
        groups.setdefault(level, []).append(target)
    return " ".join(f"{level.label}[{','.join(names)}]" for level, names in sorted(groups.items(), reverse=True))


def counts_by_severity(findings: tuple[Finding, ...]) -> Counter[Severity]:
    return Counter(f.severity for f in findings)


def counts_by_target(findings: tuple[Finding, ...]) -> dict[str, Counter[Severity]]:
    table: dict[str, Counter[Severity]] = {}
    for finding in findings:
        for target, level in finding.targets:
            table.setdefault(target, Counter())[level] += 1
    return table


def statistics(report: ScanReport) -> list[dict[str, object]]:
    """One row per rule that fired: Ruff's --statistics."""
    rows: dict[str, dict[str, object]] = {}
    for finding in report.findings:
        row = rows.setdefault(
            finding.code,
            {"code": finding.code, "name": finding.name, "count": 0, "worst_severity": finding.severity.label, "fixable": False},
        )
        row["count"] = int(row["count"]) + 1  # type: ignore[call-overload]
        if finding.severity > Severity.parse(str(row["worst_severity"])):
            row["worst_severity"] = finding.severity.label
    return sorted(rows.values(), key=lambda r: (-int(r["count"]), str(r["code"])))  # type: ignore[call-overload]
