"""Whether a kernel launch, an extension call or a CUDA-only op has a pure-PyTorch alternative
beside it, as the tree shows it: what the PC6 rules note as a kernel's fallback.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

_AVAILABILITY_WORDS = ("triton", "cuda", "avail", "has_", "use_", "fused", "kernel", "enable")


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
        elif isinstance(ancestor, cst.If) and inside is ancestor.body and _mentions_availability(ancestor.test):
            after = _after_early_return(ancestor, chain[depth - 1] if depth else None)
            if after and all(_computes_without_kernels(statement) for statement in after):
                return "in an `if` on availability that returns, before the other path"
        elif isinstance(ancestor, cst.IfExp) and _mentions_availability(ancestor.test):
            other = ancestor.orelse if inside is ancestor.body else ancestor.body
            if _computes_without_kernels(other):
                return "in a conditional expression on availability"
        elif isinstance(ancestor, cst.Try) and ancestor.handlers and inside is ancestor.body:
            if all(_computes_without_kernels(handler) for handler in ancestor.handlers):
                return "in a try/except"
    return ""


def _after_early_return(branch: cst.If, block: cst.CSTNode | None) -> Sequence[cst.CSTNode]:
    """The statements after an `if` without `else` whose body ends in `return` (the other path
    of `if x.is_cuda: ...; return out` then `return reference(x)`); none otherwise."""
    body = branch.body.body
    last = body[-1] if body else None
    returns = isinstance(last, cst.Return) or (
        isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return)
    )
    if not returns or not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return ()
    statements = list(block.body)
    return statements[statements.index(branch) + 1 :] if branch in statements else ()


def _computes_without_kernels(node: cst.CSTNode) -> bool:
    """Whether a branch does work (some call, an import to fall back on, an assignment or a
    returned value: `return x + y`) and launches no kernel (`kernel[grid](...)`): what a
    pure-PyTorch alternative looks like."""
    works = False
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            if isinstance(current.func, cst.Subscript):
                return False
            works = True
        elif isinstance(current, (cst.Import, cst.ImportFrom, cst.Assign)) or (
            isinstance(current, cst.Return) and current.value is not None
        ):
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
