"""Trace a model with Dynamo and report, at the user's file:line, what keeps it from compiling
to one static graph: graph breaks, data-dependent operators, host syncs and recompilations,
each with the static rule that covers it, so the static and runtime views agree.

Runs on the CPU with the eager backend (Dynamo's tracing only, no code generation), so it is
fast and needs no accelerator. Breaks are read from Dynamo's own record of them
(`torch._dynamo.utils.graph_break_reasons`) rather than `torch._dynamo.explain`, because
explain drops a break when nothing was captured before it (`torch.unique` as a frame's first
operator) and resets Dynamo before its record can be read.
"""

from __future__ import annotations

import inspect
import linecache
import re
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo
from torch._dynamo import utils as dynamo_utils
from torch._dynamo.output_graph import GraphCompileReason
from torch._dynamo.resume_execution import TORCH_DYNAMO_RESUME_IN_PREFIX

from portcheck.smoke.frames import innermost_outside_tooling, is_tooling

_OPERATOR = re.compile(r"Operator `aten\.(\w+?)\.\w+`")  # Dynamo's "Dynamic shape operator" reason
_EXPLICIT_NONZERO = re.compile(r"\b(nonzero|argwhere|where)\s*\(")  # else aten.nonzero came from x[mask]
_HOST_READ = re.compile(r"Tensor\.(item|tolist)\(\)")  # also int(t), float(t), bool(t): they call item()
_FRAME = re.compile(r'File "(.+)", line (\d+)')  # a line of an fx node's stack_trace
_GUARD = re.compile(r"^\d+/\d+: (.*?)(?:\. expected .*)?$")  # "0/0: tensor 'x' size mismatch ... expected 8, ..."


@dataclass(frozen=True)
class TraceFinding:
    """One thing Dynamo did to the model, where in the user's code, and the static rule for it."""

    kind: str  # graph-break | data-dependent-op | host-sync | recompilation | no-graph
    detail: str  # the reason, in words (Dynamo's reason, shortened; the operator's name)
    path: str  # the user's file, "" when unknown
    line: int  # 0 when unknown
    rule: str  # the static rule that covers it ("PC501"...), "" when none


@dataclass(frozen=True)
class TraceResult:
    """What tracing found; `error` says that tracing itself failed, and why."""

    graphs: int
    graph_breaks: int
    recompilations: int  # extra compilations across the alternate inputs, with dynamic=False
    findings: tuple[TraceFinding, ...]  # sorted by (path, line, kind, detail), no duplicates
    error: str = ""


def trace(model: torch.nn.Module, inputs: tuple, alternate_inputs: Sequence[tuple] = ()) -> TraceResult:
    """Compile `model` with dynamic=False and run it on `inputs`, then on each of
    `alternate_inputs`; a failure of the model or of Dynamo comes back as `error`, not raised."""
    graphs: list[torch.fx.GraphModule] = []

    def counting_eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return gm.forward  # what the "eager" backend returns: the captured graph, run as is

    torch._dynamo.reset()
    limit = max(torch._dynamo.config.recompile_limit, len(alternate_inputs) + 1)  # else Dynamo stops counting
    try:
        with torch._dynamo.config.patch(recompile_limit=limit):
            compiled = torch.compile(model, backend=counting_eager, dynamic=False)
            compiled(*inputs)
            first_graphs, first_breaks = len(graphs), len(dynamo_utils.graph_break_reasons)
            for alternate in alternate_inputs:
                compiled(*alternate)
        break_reasons = list(dynamo_utils.graph_break_reasons)
        guard_failures = dict(dynamo_utils.guard_failures)
    except Exception as error:  # the user's model, or Dynamo on it
        return TraceResult(0, 0, 0, (), error=f"{type(error).__name__}: {_summary(str(error))}")
    finally:
        torch._dynamo.reset()

    captured = {id(gm.compile_subgraph_reason) for gm in graphs}
    breaks = [_break_finding(reason, id(reason) in captured) for reason in break_reasons]
    findings = _distinct(breaks) | {finding for gm in graphs for finding in _graph_findings(gm)}
    if len(graphs) > first_graphs:  # else only frames that captured nothing were traced again
        findings |= {
            _recompilation(code, reason)
            for code, reasons in guard_failures.items()
            if not code.co_name.startswith(TORCH_DYNAMO_RESUME_IN_PREFIX)  # the rest of a frame after a break
            for reason in reasons
        }
    if not graphs and not break_reasons:
        findings.add(_nothing_captured(model))
    return TraceResult(
        graphs=first_graphs,
        graph_breaks=len(_distinct(breaks[:first_breaks])),
        recompilations=len(graphs) - first_graphs,
        findings=tuple(sorted(findings, key=lambda f: (f.path, f.line, f.kind, f.detail))),
    )


def _distinct(breaks: list[TraceFinding]) -> set[TraceFinding]:
    """Each break once: Dynamo records a break in an inlined function twice, in its caller's
    graph and again when it runs the function as a frame of its own, which captures nothing."""
    seen = {(f.path, f.line, f.rule) for f in breaks if f.kind != "no-graph"}
    return {f for f in breaks if f.kind != "no-graph" or (f.path, f.line, f.rule) not in seen}


def _break_finding(reason: GraphCompileReason, captured: bool) -> TraceFinding:
    """A graph break; "no-graph" when Dynamo compiled nothing up to it (it ran that code eagerly)."""
    path, line = innermost_outside_tooling([(frame.filename, frame.lineno or 0) for frame in reason.user_stack])
    kind, detail, rule = _classify(reason.reason, linecache.getline(path, line) if path else "")
    if not captured:
        kind, detail = "no-graph", f"no graph captured: {detail}"
    return TraceFinding(kind, detail, path, line, rule)


def _classify(reason: str, source: str) -> tuple[str, str, str]:
    """(kind, detail, rule) for Dynamo's break reason; `source` is the user's line, which tells
    an explicit nonzero from boolean-mask indexing (both are aten.nonzero to Dynamo)."""
    if operator := _OPERATOR.search(reason):
        name = operator.group(1).strip("_").rstrip("0123456789")  # _unique2 -> unique
        if name != "nonzero":
            return "graph-break", f"dynamic shape operator {name}", "PC501"
        if explicit := _EXPLICIT_NONZERO.search(source):
            return "graph-break", f"dynamic shape operator {explicit.group(1)}", "PC501"
        return "graph-break", "dynamic shape operator nonzero (boolean mask indexing)", "PC502"
    if read := _HOST_READ.search(reason):
        return "host-sync", f"Tensor.{read.group(1)}()", "PC503"
    if reason.startswith("generic_jump"):
        return "graph-break", "branch on a tensor value (generic_jump)", "PC504"
    if "builtin operator `print`" in reason:
        return "host-sync", "print of a tensor", "PC503"
    return "graph-break", reason.strip().splitlines()[0], ""


def _graph_findings(gm: torch.fx.GraphModule) -> list[TraceFinding]:
    """Data-dependent operators Dynamo captured (with capture_dynamic_output_shape_ops or
    capture_scalar_outputs): the graph holds them, but a static-shape backend cannot."""
    findings = []
    for node in gm.graph.nodes:
        if not node.meta.get("unbacked_bindings"):  # only such operators make unbacked sizes or scalars
            continue
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
        path, line = innermost_outside_tooling(
            [(f, int(n)) for f, n in _FRAME.findall(node.meta.get("stack_trace", ""))]
        )
        if name == "getitem":
            findings.append(TraceFinding("data-dependent-op", "boolean mask indexing", path, line, "PC502"))
        elif name == "item":  # also what .tolist(), int(t) and float(t) become
            findings.append(TraceFinding("host-sync", "Tensor.item()", path, line, "PC503"))
        else:
            findings.append(TraceFinding("data-dependent-op", name, path, line, "PC501"))
    return findings


def _recompilation(code: types.CodeType, reason: str) -> TraceFinding:
    """A recompilation of one frame; no static rule covers it (the cause is the varying input)."""
    match = _GUARD.match(reason)
    path = code.co_filename if not is_tooling(code.co_filename) else ""
    return TraceFinding(
        "recompilation", match.group(1) if match else reason, path, code.co_firstlineno if path else 0, ""
    )


def _nothing_captured(model: torch.nn.Module) -> TraceFinding:
    """Dynamo captured nothing and recorded no break: a forward without tensor operations, or one it skips."""
    code = getattr(inspect.unwrap(type(model).forward), "__code__", None)
    path, line = innermost_outside_tooling([(code.co_filename, code.co_firstlineno)] if code else [])
    return TraceFinding("no-graph", "Dynamo captured no graph", path, line, "")


def _summary(message: str) -> str:
    """Dynamo's message cut to its first line and its explanation; other messages to their first line."""
    lines = [line.strip() for line in message.strip().splitlines()] or [""]
    explanation = next((line for line in lines if line.startswith("Explanation: ")), "")
    return f"{lines[0]} ({explanation.removeprefix('Explanation: ')})" if explanation else lines[0]
