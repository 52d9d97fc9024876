"""`portcheck kernels`: the custom-kernel inventory as a table, JSON or CSV (for spreadsheets)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.table import Table

from portcheck import inventory
from portcheck.report.json_report import SCHEMA_VERSION


def render_text(found: Sequence[inventory.Kernel], targets: Sequence[str], out: TextIO, color: bool) -> None:
    """A table where it fits the terminal (COLUMNS is honoured), else one kernel per paragraph;
    lines are never broken by the tool (a folded path cannot be copied or grepped)."""
    console = Console(file=out, force_terminal=color, no_color=not color, highlight=False)
    if not found:
        console.print("No custom kernels found.")
        return
    rows = [_row(kernel) for kernel in found]
    fixed = [max(len(row[i]) for row in rows + [_HEADERS]) for i in range(len(_HEADERS) - 1)]
    if sum(fixed) + 3 * len(_HEADERS) + _MIN_FALLBACK <= console.width:
        console.print(_table(rows))
    else:
        console.print("Custom kernels:")
        for name, kind, where, lines, calls, fallback in rows:
            counts = f"{lines} line{'s' if lines != '1' else ''}, {calls} call{'s' if calls != '1' else ''}"
            console.print(f"{name}  ({kind}, {counts})", soft_wrap=True, markup=False)
            console.print(f"  at {where}", soft_wrap=True, markup=False)
            console.print(f"  fallback: {fallback}", soft_wrap=True, markup=False)
    console.print("\nTo port, per target:")
    for row in inventory.work(found, targets):
        kinds = sorted({k.kind for k in found if k.to_port(row.target)})
        paths: dict[str, list[str]] = {}
        for kind in kinds:
            paths.setdefault(found_kind_path(found, kind, row.target), []).append(kind)
        how = "; ".join(f"{', '.join(group)}: {path}" for path, group in paths.items()) or "nothing to port"
        console.print(
            f"{row.target}: {row.kernels} to port, {row.lines_of_code} lines, {row.without_fallback} without "
            f"fallback; {how}",
            soft_wrap=True,
            markup=False,
        )
    uncounted = sum(1 for k in found if not k.counted)
    if uncounted:
        console.print(
            f"{uncounted} kernel{'s' if uncounted != 1 else ''} in tests or vendored code "
            "not counted as kernels to port (--all-kernels counts them)."
        )


_HEADERS = ("kernel", "kind", "where", "lines", "calls", "fallback")
_MIN_FALLBACK = 24  # the one column that wraps, at spaces


def _row(kernel: inventory.Kernel) -> tuple[str, ...]:
    where = kernel.place + (f" ({kernel.origin})" if kernel.origin else "")
    calls = str(len(kernel.call_sites))
    return (kernel.name, kernel.kind, where, str(kernel.lines_of_code or "-"), calls, kernel.fallback or "none found")


def _table(rows: list[tuple[str, ...]]) -> Table:
    table = Table(title="Custom kernels", title_justify="left", show_edge=False, pad_edge=False)
    for column in _HEADERS:
        wraps = column == "fallback"
        table.add_column(column, justify="right" if column in ("lines", "calls") else "left", no_wrap=not wraps)
    for row in rows:
        table.add_row(*row)
    return table


def found_kind_path(found: Sequence[inventory.Kernel], kind: str, target: str) -> str:
    return next(k.port_path(target) for k in found if k.kind == kind)


def document(found: Sequence[inventory.Kernel], targets: Sequence[str]) -> dict[str, object]:
    return {
        "schema_version": SCHEMA_VERSION,
        "kernels": [
            {
                "name": k.name,
                "kind": k.kind,
                "path": k.path,
                "cell": k.cell,
                "line": k.line,
                "lines_of_code": k.lines_of_code,
                "call_sites": list(k.call_sites),
                "fallback": k.fallback,
                "origin": k.origin or "project",
                "counted": k.counted,
                "port": {target: k.port_path(target) for target in targets},
            }
            for k in found
        ],
        "per_target": {
            row.target: {
                "kernels": row.kernels,
                "lines_of_code": row.lines_of_code,
                "without_fallback": row.without_fallback,
            }
            for row in inventory.work(found, targets)
        },
    }


def render_json(found: Sequence[inventory.Kernel], targets: Sequence[str], out: TextIO) -> None:
    json.dump(document(found, targets), out, indent=2)
    out.write("\n")


def render_csv(found: Sequence[inventory.Kernel], targets: Sequence[str], out: TextIO) -> None:
    """One row per kernel, with its port path per target as a column each."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["kernel", "kind", "path", "cell", "line", "lines_of_code", "call_sites", "fallback", "origin", "counted"]
        + [f"port on {target}" for target in targets]
    )
    for k in found:
        writer.writerow(
            [k.name, k.kind, k.path, k.cell or "", k.line, k.lines_of_code, len(k.call_sites), k.fallback]
            + [k.origin or "project", k.counted]
            + [k.port_path(target) if k.to_port(target) else "" for target in targets]
        )
