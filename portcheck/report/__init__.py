"""Reporters: pure functions from a ScanReport to text on a stream. Nothing else prints."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TextIO

from portcheck.api import ScanReport
from portcheck.findings import Finding, Severity

Renderer = Callable[[ScanReport, TextIO, bool], None]


def formats(summary: bool = True) -> dict[str, Renderer]:
    """The renderers by name; without `summary` (the command line's -q), the human formats print
    the findings and errors only."""
    from portcheck.report import concise, github, json_report, sarif, text

    return {
        "text": partial(text.render, summary=summary),
        "concise": partial(concise.render, summary=summary),
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


def errors_per_target(report: ScanReport) -> str:
    """`errors: tpu 3, neuron 1`. A finding can be an error on one target and a warning on
    another, so one total would speak of no target at all."""
    table = counts_by_target(report.findings)
    return "errors: " + ", ".join(f"{t} {table.get(t, Counter())[Severity.ERROR]}" for t in report.config.targets)


def counts_by_target(findings: tuple[Finding, ...]) -> dict[str, Counter[Severity]]:
    table: dict[str, Counter[Severity]] = {}
    for finding in findings:
        for target, level in finding.targets:
            table.setdefault(target, Counter())[level] += 1
    return table


@dataclass(frozen=True)
class RuleCount:
    """One row of --statistics (Ruff's shape): how often a rule fired, and how badly."""

    code: str
    name: str
    count: int
    worst: Severity
    fixable: int = 0


def statistics(report: ScanReport) -> list[RuleCount]:
    by_code: dict[str, list[Finding]] = {}
    for finding in report.findings:
        by_code.setdefault(finding.code, []).append(finding)
    rows = [
        RuleCount(
            code,
            found[0].name,
            len(found),
            max(f.severity for f in found),
            sum(f.fix_safety.value != "none" for f in found),
        )
        for code, found in by_code.items()
    ]
    return sorted(rows, key=lambda row: (-row.count, row.code))
