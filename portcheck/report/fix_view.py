"""What `portcheck fix` prints: diffs (with --diff), then what was fixed, what was held back
and why, and what is left for a person, with its guidance."""

from __future__ import annotations

import difflib
from collections import Counter
from typing import TextIO

from portcheck.api import FixReport
from portcheck.report import target_summary


def render_diff(report: FixReport, out: TextIO) -> None:
    for outcome in report.outcomes:
        if not outcome.changed:
            continue
        before = report.originals[outcome.path].decode("utf-8", errors="replace").splitlines(keepends=True)
        after = outcome.source.decode("utf-8", errors="replace").splitlines(keepends=True)
        out.writelines(difflib.unified_diff(before, after, f"a/{outcome.path}", f"b/{outcome.path}"))


def render_summary(report: FixReport, out: TextIO) -> None:
    applied = Counter(code for outcome in report.outcomes for code, _ in outcome.applied)
    files = sum(1 for outcome in report.outcomes if outcome.changed)
    verb = "Fixed" if report.written else "Would fix"
    total = sum(applied.values())
    if total:
        by_rule = ", ".join(f"{code} x{count}" for code, count in sorted(applied.items()))
        out.write(
            f"{verb} {total} finding{'s' if total != 1 else ''} in {files} file{'s' if files != 1 else ''} for {report.target} ({by_rule}).\n"
        )
    else:
        out.write(f"Nothing to fix for {report.target}.\n")
    held = Counter(item for outcome in report.outcomes for item in outcome.skipped)
    for (code, reason), count in sorted(held.items()):
        out.write(f"Not applied: {code} x{count}: {reason}\n")
    remaining = sorted(
        (finding for outcome in report.outcomes for finding in outcome.remaining),
        key=lambda f: (f.path, f.line, f.column, f.code),
    )
    if remaining:
        out.write(f"{len(remaining)} finding{'s' if len(remaining) != 1 else ''} left for a person:\n")
        for finding in remaining:
            summary = target_summary(finding, (report.target,))
            out.write(f"  {finding.path}:{finding.line}:{finding.column}: {finding.code} {summary} {finding.message}\n")
            if finding.hint:
                out.write(f"      help: {finding.hint}\n")
    for outcome in report.outcomes:
        if outcome.error:
            out.write(f"error: {outcome.path}: {outcome.error}\n")
    for error in report.errors:
        out.write(f"error: {error}\n")
