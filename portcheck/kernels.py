"""Custom kernels: their kinds and where each target can take them.

Shared by the PC6 rules (which report and record kernels) and by `portcheck kernels` and
`portcheck report` (which sum them up). Port paths come from the target data. The evidence of
a fallback, read from the tree, is the rules' alone (portcheck.fallbacks).
"""

from __future__ import annotations

from collections.abc import Sequence

from portcheck import targets as target_data
from portcheck.findings import Severity

TRITON = "triton"
CUDA_CPP = "cuda-c++"
EXTENSION = "cuda-extension"
INLINE = "inline-cuda"
LIBRARY_OP = "library-op"
PTX = "inline-ptx"
KINDS = (TRITON, CUDA_CPP, EXTENSION, INLINE, LIBRARY_OP, PTX)
# What builds an extension module when it is called, and returns it.
EXTENSION_LOADERS = frozenset({"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"})


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
