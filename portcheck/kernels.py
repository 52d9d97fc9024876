"""Custom kernels: their kinds, where each target can take them, and the evidence of a fallback.

Shared by the PC6 rules (which report and record kernels) and by `portcheck kernels` and
`portcheck report` (which sum them up). Port paths come from the target data.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck import targets as target_data
from portcheck.findings import Severity

TRITON = "triton"
CUDA_CPP = "cuda-c++"
EXTENSION = "cuda-extension"
INLINE = "inline-cuda"
LIBRARY_OP = "library-op"
PTX = "inline-ptx"
KINDS = (TRITON, CUDA_CPP, EXTENSION, INLINE, LIBRARY_OP, PTX)

_AVAILABILITY_WORDS = ("triton", "cuda", "avail", "has_", "use_", "fused", "kernel", "enable")


def runs_as_is(kind: str, target: str) -> bool:
    """Whether a kernel of this kind runs on the target without a rewrite."""
    facts = target_data.get(target)
    if kind == TRITON:
        return facts.triton
    return facts.keeps_cuda_api and kind != PTX  # ROCm builds CUDA C++ through hipify


def severity(kind: str) -> dict[str, Severity]:
    """An error wherever the kernel must be rewritten, a warning where it builds after an
    automatic translation (hipify on ROCm), off where it runs as is."""
    result = {}
    for name, facts in target_data.all_targets().items():
        if kind == TRITON and facts.triton:
            result[name] = Severity.OFF
        elif runs_as_is(kind, name):
            result[name] = Severity.WARNING
        else:
            result[name] = Severity.ERROR
    return result


def port_path(kind: str, target: str) -> str:
    facts = target_data.get(target)
    if kind == TRITON and facts.triton:
        return "runs as is (Triton backend)"
    if runs_as_is(kind, target):
        return "hipify (CUDAExtension sources are translated at build time); review warp-size assumptions"
    if kind == PTX:
        return "rewrite without PTX: " + " or ".join(facts.kernel_languages)
    return "rewrite in " + " or ".join(facts.kernel_languages)


def port_hint(kind: str, selected: Sequence[str]) -> str:
    """What porting takes on each selected target, grouped when targets agree."""
    by_path: dict[str, list[str]] = {}
    for target in selected:
        by_path.setdefault(port_path(kind, target), []).append(target)
    return "; ".join(f"{'/'.join(names)}: {path}" for path, names in by_path.items())


def fallback_evidence(ancestors: Sequence[cst.CSTNode]) -> str:
    """Why a call looks guarded by a pure-PyTorch alternative: it sits in one branch of a test
    on availability (or of a try/except) whose other branch launches no kernel. Empty when
    it does not."""
    chain = list(ancestors)
    for depth in range(len(chain) - 1, -1, -1):
        ancestor = chain[depth]
        inside = chain[depth + 1] if depth + 1 < len(chain) else None
        if isinstance(ancestor, cst.If) and ancestor.orelse is not None and _mentions_availability(ancestor.test):
            other = ancestor.orelse if inside is ancestor.body else ancestor.body
            if _computes_without_kernels(other):
                return "in an if/else on availability"
        elif isinstance(ancestor, cst.IfExp) and _mentions_availability(ancestor.test):
            other = ancestor.orelse if inside is ancestor.body else ancestor.body
            if _computes_without_kernels(other):
                return "in a conditional expression on availability"
        elif isinstance(ancestor, cst.Try) and ancestor.handlers and inside is ancestor.body:
            if all(_computes_without_kernels(handler) for handler in ancestor.handlers):
                return "in a try/except"
    return ""


def _computes_without_kernels(node: cst.CSTNode) -> bool:
    """Whether a branch does work (some call, or an import to fall back on) and launches no
    kernel (`kernel[grid](...)`): what a pure-PyTorch alternative looks like."""
    works = False
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            if isinstance(current.func, cst.Subscript):
                return False
            works = True
        elif isinstance(current, (cst.Import, cst.ImportFrom, cst.Assign)):
            works = True
        stack.extend(current.children)
    return works


def _mentions_availability(test: cst.BaseExpression) -> bool:
    words = []
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            words.append(node.value.lower())
        elif isinstance(node, cst.Attribute):
            words.append(node.attr.value.lower())
            stack.append(node.value)
        else:
            stack.extend(node.children)
    return any(word in name for name in words for word in _AVAILABILITY_WORDS)


def looks_like_reference(name: str) -> bool:
    """Function names that usually hold the pure-PyTorch version of a kernel."""
    lowered = name.lower()
    return any(
        part in lowered
        for part in ("_ref", "ref_", "reference", "naive", "torch_", "_torch", "pytorch", "eager", "fallback")
    )
