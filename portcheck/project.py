"""What only the whole project can tell: facts from every file, combined after the scan.

Files are scanned independently (in parallel); some findings depend on other files: a call of
`torch.ops.ns.op` matters only if the repository registers `ns::op` for CUDA alone, and
`import pkg._C` only if its setup.py builds `pkg._C` with CUDAExtension. Rules record facts
and conditional findings; this module keeps the conditionals whose facts hold.
"""

from __future__ import annotations

from collections.abc import Iterable

from portcheck.findings import Conditional, Fact, Finding

OP_IMPL = "op-impl"  # name "ns::op", detail device: the dispatch key it is implemented for
CUDA_ONLY_OP = "cuda-only-op"  # derived: ops implemented for CUDA and for no other device
CUDA_EXTENSION = "cuda-extension"  # name: the importable module a CUDAExtension builds
KERNEL = "kernel"  # name: qualified name of a custom kernel
CALL = "call"  # name: qualified name of what a call site calls
REFERENCE = "reference"  # name: a function that looks like a pure-PyTorch reference implementation

_ANY_DEVICE = frozenset({"compositeimplicitautograd", "compositeexplicitautograd", "default"})


def cuda_only_ops(facts: Iterable[Fact]) -> set[str]:
    """Ops registered for CUDA that have no implementation another device could use."""
    devices: dict[str, set[str]] = {}
    for fact in facts:
        if fact.kind == OP_IMPL:
            devices.setdefault(fact.name, set()).add(fact.detail("device").lower())
    return {op for op, keys in devices.items() if "cuda" in keys and not keys - {"cuda", "meta", "autograd"}}


def holding(facts: Iterable[Fact]) -> set[tuple[str, str]]:
    """Every (kind, name) the project holds, derived kinds included."""
    facts = list(facts)
    held = {(fact.kind, fact.name) for fact in facts}
    held |= {(CUDA_ONLY_OP, op) for op in cuda_only_ops(facts)}
    return held


def confirmed(conditionals: Iterable[Conditional], facts: Iterable[Fact]) -> list[Finding]:
    """The conditional findings whose required fact the project holds."""
    held = holding(facts)
    return [c.finding for c in conditionals if c.requires in held]
