"""`portcheck run` output: a short report on stderr after the program, and with --report one
JSON document with a versioned, documented schema (portcheck/smoke/run.schema.json)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TextIO

from portcheck import __version__
from portcheck import targets as target_data
from portcheck.smoke.launch import ProcessRun, RunResult

RUN_SCHEMA_VERSION = 1
NOTE = "emulated: numerics computed on the CPU, not measured on hardware"


def render_json(result: RunResult, out: TextIO) -> None:
    document = {
        "schema_version": RUN_SCHEMA_VERSION,
        "tool": {"name": "portcheck", "version": __version__},
        "emulated": True,
        "note": NOTE,
        **result.to_json(),
    }
    json.dump(document, out, indent=2, sort_keys=True, allow_nan=False)
    out.write("\n")


def render_text(result: RunResult, out: TextIO) -> None:
    target = target_data.get(result.target)
    count = f", {result.nproc} processes" if result.nproc > 1 else ""
    out.write(f"portcheck run: {target.name} ({target.title}){count}; {NOTE}\n")
    for process in result.processes:
        indent = "  "
        if result.nproc > 1:
            out.write(f"  rank {process.rank}: exit code {process.exit_code}\n")
            indent = "    "
        for line in _lines(process, target.device_type):
            out.write(f"{indent}{line}\n")
    out.write(f"  exit code {result.exit_code}\n")


def _lines(process: ProcessRun, device_type: str) -> list[str]:
    emulation = process.emulation
    if emulation is None:
        return ["no report: the process ended before it could write one (killed, crashed, or os._exit)"]
    lines = [
        f"compilations: {emulation['compilations']} ({emulation['recompilations']} recompilations: "
        "one graph per distinct input shape or Python number of each outermost module)",
        f"data-dependent ops: {_counts(emulation['data_dependent_ops'])}",
        f"host syncs: {_counts(emulation['host_syncs'])}",
        f"float64 ops: {_counts(emulation['float64_ops'])}",
        f"autocast: {_autocast(emulation['autocast'], device_type)}",
        f"CUDA calls: {_cuda_calls(emulation.get('cuda_calls', ()))}",
    ]
    if process.error:
        error = process.error
        rule = f" ({error['rule']})" if error["rule"] else ""
        lines.append(f"ended by {error['op'] or error['kind']}{rule} at {error['where'] or 'an unknown place'}")
    return lines


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} x{count}" for name, count in sorted(counts.items())) or "none"


def _autocast(entries: list[dict[str, Any]], device_type: str) -> str:
    """Each kind of region entered, and whether it ran on the emulated device: a region left
    on "cuda" or "cpu" does not lower the device's precision."""
    parts = []
    for entry in entries:
        state = "" if entry["enabled"] else ", disabled"
        elsewhere = "" if entry["device_type"] == device_type else f", not on {device_type}"
        parts.append(f"{entry['device_type']} {entry['dtype']} x{entry['count']}{state}{elsewhere}")
    return "; ".join(parts) or "never entered"


def _cuda_calls(calls: Any) -> str:
    """Each place that called torch.cuda, with its rule: without CUDA most such calls pass
    silently (a no-op, a 0, autocast turned off), so the run alone would not show them."""
    return "; ".join(f"{c['op']} ({c['rule']}) at {c['path']}:{c['line']} x{c['count']}" for c in calls) or "none"
