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
from portcheck.readiness import BLOCKED, NEEDS_CHANGES, READY, Readiness
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


def render_markdown(rows: Sequence[Readiness], found: Sequence[inventory.Kernel], out: TextIO) -> None:
    out.write("## portcheck readiness\n\n")
    out.write("| target | verdict | errors (no fix) | warnings | kernels to port (lines) | dependencies |\n")
    out.write("| --- | --- | --- | --- | --- | --- |\n")
    for row in rows:
        mark = _MARK.get(row.verdict, "⚠️")
        out.write(
            f"| `{row.target}` | {mark} {row.verdict}: {row.reason} | {row.errors} ({row.blockers}) | {row.warnings} "
            f"| {row.kernels} ({row.kernel_lines}) | {len(row.dependencies)} |\n"
        )
    listed = [row for row in rows if row.kernels or row.dependencies or row.environment or row.optional_dependencies]
    for row in listed:
        out.write(f"\n<details><summary><code>{row.target}</code>: what to port</summary>\n\n")
        for kernel in found:
            if kernel.to_port(row.target):
                fallback = f" — fallback: {kernel.fallback}" if kernel.fallback else ""
                out.write(
                    f"- {kernel.kind} `{kernel.name}` ({kernel.place}): {kernel.port_path(row.target)}{fallback}\n"
                )
        for item in (*row.dependencies, *row.environment):
            out.write(f"- {item}\n")
        for item in row.optional_dependencies:
            out.write(f"- not blocking: {item}\n")
        out.write("\n</details>\n")
