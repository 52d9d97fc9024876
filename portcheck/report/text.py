"""The human-readable report: each finding with its source line, then a summary by rule and by
target. Colours only when writing to a terminal."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from portcheck.api import ScanReport
from portcheck.findings import Finding, Severity
from portcheck.report import counts_by_target, errors_per_target, shown_path, statistics, target_summary
from portcheck.wording import counted

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def render(report: ScanReport, out: TextIO, color: bool = False, summary: bool = True) -> None:
    console = Console(file=out, force_terminal=color, no_color=not color, highlight=False, width=None if color else 120)
    body = Text()  # printed at once: rich's cost is per print, not per character
    for finding in report.findings:
        _finding(body, finding, report)
    for error in (*report.errors, *report.internal_errors):
        body.append("error: ", style="bold red").append(f"{error}\n")
    if color:
        console.print(body, soft_wrap=True, end="")
    else:
        out.write(body.plain)  # the same characters, without rich's rendering
    if summary:
        _summary(console, report)


def _finding(body: Text, finding: Finding, report: ScanReport) -> None:
    style = _STYLE[finding.severity]
    body.append(f"{shown_path(finding, report.config.root)}:{finding.position}: {finding.code} ", style="bold")
    body.append(target_summary(finding, report.config.targets), style=style)
    body.append(f" {finding.message}\n")
    gutter = " " * len(str(finding.line))
    if finding.source_line:
        line = finding.source_line.replace("\t", " ")
        end = finding.end_column if finding.end_line == finding.line else len(line) + 1
        width = max(1, min(end, len(line) + 1) - finding.column)
        body.append(f"{gutter} |\n{finding.line} | ", style="blue").append(f"{line}\n")
        body.append(f"{gutter} | ", style="blue").append(" " * (finding.column - 1) + "^" * width + "\n", style=style)
    if finding.hint:
        body.append(f"{gutter} = help: ", style="blue").append(f"{finding.hint}\n")
    body.append("\n")


def _summary(console: Console, report: ScanReport) -> None:
    findings = report.findings
    scanned = report.files - report.skipped
    if not findings:
        console.print(
            Text(f"No findings in {counted(report.files, 'file')} ", style="bold green")
            + Text(f"({scanned} parsed, {report.skipped} without any CUDA-related word)")
        )
    else:
        files_hit = len({f.path for f in findings})
        console.print(
            Text(f"Found {counted(len(findings), 'finding')} ", style="bold")
            + Text(
                f"in {files_hit} of {counted(report.files, 'file')} ({errors_per_target(report)}); "
                f"{scanned} parsed, {report.skipped} skipped"
            )
        )
        console.print(_rule_table(report))
        console.print(_target_table(report))
    if report.baselined:
        console.print(f"{counted(report.baselined, 'known finding')} hidden by the baseline.")


def _rule_table(report: ScanReport) -> Table:
    table = Table(title="By rule", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("code")
    table.add_column("name")
    table.add_column("count", justify="right")
    table.add_column("worst")
    for row in statistics(report):
        table.add_row(row.code, row.name, str(row.count), row.worst.label)
    return table


def _target_table(report: ScanReport) -> Table:
    table = Table(title="By target", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("target", "error", "warning", "info"):
        table.add_column(column, justify="left" if column == "target" else "right")
    counts = counts_by_target(report.findings)
    for target in report.config.targets:
        row = counts.get(target, {})
        table.add_row(target, *(str(row.get(level, 0)) for level in (Severity.ERROR, Severity.WARNING, Severity.INFO)))
    return table
