"""One line per finding: `path:line:col: CODE severity message` (`path:cell N:line:col: ...` in a
notebook, as Ruff writes it), grep- and editor-friendly."""

from __future__ import annotations

from typing import TextIO

from portcheck.api import ScanReport
from portcheck.report import shown_path, target_summary


def render(report: ScanReport, out: TextIO, color: bool = False, summary: bool = True) -> None:
    for finding in report.findings:
        levels = target_summary(finding, report.config.targets)
        path = shown_path(finding, report.config.root)
        out.write(f"{path}:{finding.position}: {finding.code} {levels} {finding.message}\n")
    for error in (*report.errors, *report.internal_errors):
        out.write(f"error: {error}\n")
    if not summary:
        return
    count = len(report.findings)
    out.write(f"Found {count} finding{'s' if count != 1 else ''}.\n" if count else "No findings.\n")
