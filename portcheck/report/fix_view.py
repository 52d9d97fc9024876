"""What `portcheck fix` prints: diffs (with --diff; a notebook's cell by cell, as Ruff shows
them), then what was fixed, what was held back and why, and what is left for a person, with
its guidance."""

from __future__ import annotations

import difflib
from collections import Counter
from typing import TextIO

from portcheck import filekinds, notebooks
from portcheck.api import FixReport
from portcheck.report import target_summary
from portcheck.results import one_line
from portcheck.wording import counted


def render_diff(report: FixReport, out: TextIO) -> None:
    for outcome in report.outcomes:
        if not outcome.changed:
            continue
        before, after = _parts(outcome.path, report.originals[outcome.path]), _parts(outcome.path, outcome.source)
        for (name, old), (_, new) in zip(before, after):
            out.writelines(difflib.unified_diff(old, new, f"a/{name}", f"b/{name}"))


def _parts(path: str, data: bytes) -> list[tuple[str, list[str]]]:
    """What a diff compares, named: a notebook's code cells one by one, else the whole file."""
    if filekinds.kind_of(path) == filekinds.NOTEBOOK:
        cells = notebooks.read(data).cells
        return [(f"{path}:cell {cell.number}", _ended(cell.source).splitlines(keepends=True)) for cell in cells]
    return [(path, data.decode("utf-8", errors="replace").splitlines(keepends=True))]


def _ended(source: str) -> str:
    """A cell's last line usually has no line break: give it one, so the diff's lines stay apart."""
    return source if not source or source.endswith("\n") else source + "\n"


def render_summary(report: FixReport, out: TextIO, summary: bool = True, verbose: bool = False) -> None:
    """What was fixed and held back (unless `summary` is off: -q), what is left for a person, and
    the errors, each in one line (an internal error's traceback with `verbose`)."""
    if summary:
        _fixed(report, out)
    remaining = sorted((f for outcome in report.outcomes for f in outcome.remaining), key=lambda f: f.sort_key)
    if remaining and summary:
        out.write(f"{counted(len(remaining), 'finding')} left for a person:\n")
    for finding in remaining:
        shown = target_summary(finding, (report.target,))
        out.write(f"  {finding.path}:{finding.position}: {finding.code} {shown} {finding.message}\n")
        if finding.hint:
            out.write(f"      help: {finding.hint}\n")
    for outcome in report.outcomes:
        if outcome.error:
            out.write(f"error: {outcome.path}: {outcome.error if verbose else one_line(outcome.error)}\n")
    for error in report.errors:
        out.write(f"error: {error}\n")


def _fixed(report: FixReport, out: TextIO) -> None:
    applied = Counter(code for outcome in report.outcomes for code, _ in outcome.applied)
    files = sum(1 for outcome in report.outcomes if outcome.changed)
    verb = "Fixed" if report.written else "Would fix"
    total = sum(applied.values())
    if total:
        by_rule = ", ".join(f"{code} x{count}" for code, count in sorted(applied.items()))
        out.write(f"{verb} {counted(total, 'finding')} in {counted(files, 'file')} for {report.target} ({by_rule}).\n")
    else:
        out.write(f"Nothing to fix for {report.target}.\n")
    held = Counter(item for outcome in report.outcomes for item in outcome.skipped)
    for (code, reason), count in sorted(held.items()):
        out.write(f"Not applied: {code} x{count}: {reason}\n")
