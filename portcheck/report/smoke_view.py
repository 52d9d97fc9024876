"""`portcheck smoke` output: a table per case (text) or one JSON document with a versioned,
documented schema (portcheck/smoke/report.schema.json)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from portcheck import __version__
from portcheck.smoke.runner import SmokeResult

SMOKE_SCHEMA_VERSION = 1
_STYLE = {"pass": "bold green", "mismatch": "bold red", "blocked": "bold red", "error": "bold magenta"}


def render_json(results: Sequence[SmokeResult], out: TextIO) -> None:
    document = {
        "schema_version": SMOKE_SCHEMA_VERSION,
        "tool": {"name": "portcheck", "version": __version__},
        "results": [result.to_json() for result in results],
    }
    json.dump(document, out, indent=2, sort_keys=True, allow_nan=False)
    out.write("\n")


def render_text(results: Sequence[SmokeResult], out: TextIO, color: bool) -> None:
    console = Console(file=out, force_terminal=color, no_color=not color, highlight=False, width=None if color else 160)
    for result in results:
        where = f"{result.device} (emulated on the CPU)" if result.emulated else result.device
        mode = f"train, {result.steps} step{'s' if result.steps != 1 else ''}" if result.train else "forward"
        console.print(Text(f"{result.spec}: {where} vs {result.reference}, {mode}", style="bold"))
        for run in result.runs:
            versions = ", ".join(f"{name} {version}" for name, version in sorted(run.versions.items()))
            line = f"  {run.role}: {run.device} {run.status}"
            line += f" in {run.seconds:.3f} s" if run.status == "ok" else f": {run.detail}"
            line += f" ({versions})" if versions else ""
            line += f" at {run.where}" if run.where else ""
            console.print(Text(line))
        if result.emulated:
            console.print("  numerics were emulated on the CPU, not measured on the target's hardware")
        precision = (
            "float32 matmuls at full precision (torch.set_float32_matmul_precision('highest'))"
            if result.matmul_precision == "highest"
            else f"float32 matmuls at the target's default precision ({result.matmul_precision}): bf16 tolerances"
        )
        console.print(f"  {precision}")
        if result.checks:
            console.print(_checks_table(result))
        _print_trace(console, result)
        for finding in result.observed:
            console.print(Text(f"  {_located(finding)} {finding['kind']}: {finding['detail']}"))
        for note in result.notes:
            console.print(Text(f"  note: {note}", style="yellow"))
        for reason in result.blocking:
            console.print(Text(f"  blocking: {reason}", style="red"))
        console.print(Text(f"  verdict: {result.verdict}", style=_STYLE.get(result.verdict, "")))


def _checks_table(result: SmokeResult) -> Table:
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column in ("", "tensor", "dtype", "shape", "max abs err", "max rel err", "rtol", "atol"):
        table.add_column(column, justify="right" if "err" in column or "tol" in column else "left")
    for check in result.checks:
        mark = Text("ok", style="green") if check.passed else Text("FAIL", style="red")
        remark = check.problem or check.note  # a problem fails a row, a note qualifies a pass
        name = f"{check.group}: {check.name}" + (f" ({remark})" if remark else "")
        table.add_row(
            mark,
            Text(name),
            check.dtype,
            "x".join(map(str, check.shape)) or "scalar",
            f"{check.max_abs_error:.3g}",
            f"{check.max_rel_error:.3g}",
            f"{check.rtol:g}",
            f"{check.atol:g}",
        )
    return table


def _print_trace(console: Console, result: SmokeResult) -> None:
    trace = result.trace
    if not trace:
        return
    if trace.get("error"):
        console.print(Text(f"  trace failed: {trace['error']}"))
        return
    console.print(
        f"  trace: {trace['graphs']} graph(s), {trace['graph_breaks']} graph break(s), "
        f"{trace['recompilations']} recompilation(s) across the alternate input shapes"
    )
    for finding in trace["findings"]:
        console.print(Text(f"    {_located(finding)} {finding['kind']}: {finding['detail']}"))
    emulation = next((run.emulation for run in result.runs if run.emulation), None)
    if emulation:
        counts = ", ".join(
            f"{label} {emulation.get(key, 0) if isinstance(emulation.get(key, 0), int) else len(emulation[key])}"
            for key, label in (
                ("compilations", "compilations"),
                ("recompilations", "recompilations"),
                ("float64_ops", "float64 ops"),
                ("data_dependent_ops", "data-dependent ops"),
            )
        )
        console.print(Text(f"  emulated {result.device}: {counts}"))


def _located(finding: dict) -> str:
    """`file:line: RULE` (or `unknown location:`), as scan prints a finding."""
    where = f"{finding['path']}:{finding['line']}" if finding["path"] else "unknown location"
    return f"{where}: {finding['rule']}" if finding["rule"] else f"{where}:"
