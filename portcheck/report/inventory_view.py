"""`portcheck kernels`: the custom-kernel inventory as a table or as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.table import Table

from portcheck import inventory
from portcheck.report.json_report import SCHEMA_VERSION


def render_text(found: Sequence[inventory.Kernel], targets: Sequence[str], out: TextIO, color: bool) -> None:
    console = Console(file=out, force_terminal=color, no_color=not color, highlight=False, width=None if color else 160)
    if not found:
        console.print("No custom kernels found.")
        return
    table = Table(title="Custom kernels", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("kernel", "kind", "where", "lines", "calls", "fallback"):
        table.add_column(column, justify="right" if column in ("lines", "calls") else "left", overflow="fold")
    for kernel in found:
        table.add_row(
            kernel.name,
            kernel.kind,
            kernel.place + (f" ({kernel.origin})" if kernel.origin else ""),
            str(kernel.lines_of_code or "-"),
            str(len(kernel.call_sites)),
            kernel.fallback or "none found",
        )
    console.print(table)
    work = Table(title="To port, per target", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("target", "kernels", "lines", "without fallback", "how"):
        work.add_column(column, justify="left" if column in ("target", "how") else "right", overflow="fold")
    for row in inventory.work(found, targets):
        kinds = sorted({k.kind for k in found if k.to_port(row.target)})
        how = "; ".join(f"{kind}: {found_kind_path(found, kind, row.target)}" for kind in kinds) or "nothing to port"
        work.add_row(row.target, str(row.kernels), str(row.lines_of_code), str(row.without_fallback), how)
    console.print(work)
    uncounted = sum(1 for k in found if not k.counted)
    if uncounted:
        console.print(
            f"{uncounted} kernel{'s' if uncounted != 1 else ''} in tests or vendored code "
            "not counted as kernels to port (--all-kernels counts them)."
        )


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
