"""GitHub Actions workflow commands, which show findings as annotations on the pull request.

Files are named from the repository root (portcheck.anchor), as GitHub resolves them.

A notebook's lines are not the lines of its file (JSON): its findings annotate the file, and
their message starts with the cell and the line in it."""

from __future__ import annotations

from typing import TextIO

from portcheck.api import ScanReport
from portcheck.findings import Severity
from portcheck.report import target_summary

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: ScanReport, out: TextIO, color: bool = False) -> None:
    for f in report.findings:
        span = [f"line={f.line}", f"col={f.column}", f"endLine={f.end_line}", f"endColumn={f.end_column}"]
        properties = ",".join(
            [
                f"file={_escape_property(report.location(f))}",
                *(span if f.cell is None else []),
                f"title={_escape_property(f'portcheck {f.code} ({f.name})')}",
            ]
        )
        targets = target_summary(f, report.config.targets)
        where = "" if f.cell is None else f"{f.position}: "
        message = f"{where}{f.message} [{targets}]" + (f"\n{f.hint}" if f.hint else "")
        out.write(f"::{_COMMAND[f.severity]} {properties}::{_escape_data(message)}\n")
    for error in (*report.errors, *report.internal_errors):
        out.write(f"::error title=portcheck::{_escape_data(error)}\n")
