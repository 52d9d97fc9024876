"""`portcheck report`: the readiness verdict per target as text, JSON or Markdown (for a
pull-request comment)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from portcheck import inventory
from portcheck.findings import Finding, FixSafety, Severity
from portcheck.readiness import BLOCKED, NEEDS_CHANGES, READY, Readiness, place_of
from portcheck.report.json_report import SCHEMA_VERSION

_STYLE = {BLOCKED: "bold red", NEEDS_CHANGES: "yellow", READY: "green"}
_MARK = {BLOCKED: "⛔", NEEDS_CHANGES: "🛠️", READY: "✅"}


def render_text(rows: Sequence[Readiness], found: Sequence[inventory.Kernel], out: TextIO, color: bool) -> None:
    console = Console(file=out, force_terminal=color, no_color=not color, highlight=False, width=None if color else 160)
    table = Table(title="Readiness per target", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("target", "verdict", "errors", "no fix", "fixable", "warnings", "kernels (lines)", "dependencies"):
        table.add_column(column, justify="left" if column in ("target", "verdict") else "right")
    for row in rows:
        table.add_row(
            row.target,
            Text(row.verdict, style=_STYLE.get(row.verdict, "cyan")) + Text(f": {row.reason}"),
            str(row.errors),
            str(row.blockers),
            str(row.fixable),
            str(row.warnings),
            f"{row.kernels} ({row.kernel_lines})",
            str(len(row.dependencies)),
        )
    console.print(table)
    for row in rows:
        if _where(row):
            console.print(Text(row.target, style="bold") + Text(f": {row.verdict}{_where(row)}"))
    for row in rows:
        for title, items in (
            ("dependencies to replace", row.dependencies),
            ("optional dependencies (not blocking)", row.optional_dependencies),
            ("environment to change", row.environment),
        ):
            if items:
                console.print(Text(row.target, style="bold") + Text(f": {title}"))
                for item in items:
                    console.print(f"  - {item}", markup=False)


def document(rows: Sequence[Readiness], found: Sequence[inventory.Kernel]) -> dict[str, object]:
    return {
        "schema_version": SCHEMA_VERSION,
        "targets": [{**asdict(row), "top_rules": dict(row.top_rules)} for row in rows],
        "kernels": len(found),
    }


def render_json(rows: Sequence[Readiness], found: Sequence[inventory.Kernel], out: TextIO) -> None:
    json.dump(document(rows, found), out, indent=2)
    out.write("\n")


# GitHub refuses a comment over 65,536 characters; this leaves room for what a bot adds around it.
MARKDOWN_LIMIT = 60_000
_TOP_FILES = 10


def render_markdown(
    rows: Sequence[Readiness],
    found: Sequence[inventory.Kernel],
    findings: Sequence[Finding],
    out: TextIO,
    details: bool = False,
) -> None:
    """A pull-request comment: the verdict per target, then where to start (what `fix` settles,
    the files with the most errors it does not, each kernel and dependency once for all targets),
    the full lists per target only with `details`. Cut to MARKDOWN_LIMIT characters, saying so."""
    lines = [
        "## portcheck readiness",
        "",
        "| target | verdict | errors (no fix) | fixable | warnings | kernels to port (lines) | dependencies |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| `{row.target}` | {_MARK.get(row.verdict, '⚠️')} {row.verdict}: {row.reason}{_where(row, '`')} "
            f"| {row.errors} ({row.blockers}) | {row.fixable} | {row.warnings} | {row.kernels} ({row.kernel_lines}) "
            f"| {len(row.dependencies)} |"
        )
    lines.extend(_start_here(rows, found, findings))
    if details:
        lines.extend(_details(rows, found))
    out.write(_within_limit(lines))


def _where(row: Readiness, quote: str = "") -> str:
    """` — at path:line and N more`: where a verdict that is not ready comes from."""
    if row.verdict == READY or not row.places:
        return ""
    more = f" and {len(row.places) - 1} more" if len(row.places) > 1 else ""
    return f" — at {quote}{row.places[0]}{quote}{more}"


def _start_here(rows: Sequence[Readiness], found: Sequence[inventory.Kernel], findings: Sequence[Finding]) -> list[str]:
    lines = ["", "### Start here", ""]
    fixable = [f"`{row.target}` {row.fixable}" for row in rows if row.fixable]
    if fixable:
        lines.append(f"- **`portcheck fix --device TARGET`** settles findings by itself: {', '.join(fixable)}.")
    stuck = _files_with_errors(rows, findings)
    if stuck:
        lines += [
            "",
            "**Files with the most errors no fix settles**",
            "",
            "| file | errors | rules | first |",
            "| --- | --- | --- | --- |",
        ]
        lines += [f"| `{path}` | {count} | {rules} | `{first}` |" for path, count, rules, first in stuck]
    targets = [row.target for row in rows]
    kernels = [k for k in found if any(k.to_port(target) for target in targets)]
    if kernels:
        lines += ["", f"**Custom kernels to port** ({len(kernels)})", ""]
        for kernel in kernels:
            paths = "; ".join(f"{t}: {kernel.port_path(t)}" for t in targets if kernel.to_port(t))
            fallback = f" — fallback: {kernel.fallback}" if kernel.fallback else ""
            lines.append(
                f"- {kernel.kind} `{kernel.name}` at `{kernel.place}` ({kernel.lines_of_code} lines): {paths}{fallback}"
            )
    for title, field in (
        ("Dependencies to replace", "dependencies"),
        ("Environment to change", "environment"),
        ("Optional dependencies (not blocking)", "optional_dependencies"),
    ):
        grouped = _once(rows, field)
        if grouped:
            lines += ["", f"**{title}**", ""]
            lines += [f"- {item} ({', '.join(f'`{t}`' for t in where)})" for item, where in grouped.items()]
    if len(lines) == 3:
        lines.append("Nothing to do: no target is blocked and no finding is left.")
    return lines


def _files_with_errors(rows: Sequence[Readiness], findings: Sequence[Finding]) -> list[tuple[str, int, str, str]]:
    """(file, errors without a fix on some selected target, their rules, the first place)."""
    targets = {row.target for row in rows}
    by_file: dict[str, list[Finding]] = {}
    for finding in findings:
        failing = any(t in targets and level is Severity.ERROR for t, level in finding.targets)
        if failing and finding.fix_safety is FixSafety.NONE:
            by_file.setdefault(finding.path, []).append(finding)
    ranked = sorted(by_file.items(), key=lambda item: (-len(item[1]), item[0]))[:_TOP_FILES]
    return [
        (path, len(here), ", ".join(sorted({f.code for f in here})), place_of(min(here, key=lambda f: f.sort_key)))
        for path, here in ranked
    ]


def _once(rows: Sequence[Readiness], field: str) -> dict[str, list[str]]:
    """Each item of a per-target list once, with the targets it applies to."""
    grouped: dict[str, list[str]] = {}
    for row in rows:
        for item in getattr(row, field):
            grouped.setdefault(item, []).append(row.target)
    return grouped


def _details(rows: Sequence[Readiness], found: Sequence[inventory.Kernel]) -> list[str]:
    lines = []
    listed = [row for row in rows if row.kernels or row.dependencies or row.environment or row.optional_dependencies]
    for row in listed:
        lines += ["", f"<details><summary><code>{row.target}</code>: what to port</summary>", ""]
        for kernel in found:
            if kernel.to_port(row.target):
                fallback = f" — fallback: {kernel.fallback}" if kernel.fallback else ""
                lines.append(
                    f"- {kernel.kind} `{kernel.name}` ({kernel.place}): {kernel.port_path(row.target)}{fallback}"
                )
        lines += [f"- {item}" for item in (*row.dependencies, *row.environment)]
        lines += [f"- not blocking: {item}" for item in row.optional_dependencies]
        lines += ["", "</details>"]
    return lines


def _within_limit(lines: list[str]) -> str:
    """The lines that fit in MARKDOWN_LIMIT characters, and a last one saying what was left out."""
    kept, size = [], 0
    for index, line in enumerate(lines):
        if size + len(line) + 1 > MARKDOWN_LIMIT - 200:
            left = len(lines) - index
            kept.append(
                f"\n_… {left} more line{'s' if left != 1 else ''}: `portcheck report --format json` has everything._"
            )
            break
        kept.append(line)
        size += len(line) + 1
    if sum(line.startswith("<details>") for line in kept) > kept.count("</details>"):
        kept.append("</details>")
    return "\n".join(kept) + "\n"
