"""PC6: custom kernels: Triton, CUDA C++ extensions and sources, CUDA-only op registrations, CUDA Python libraries."""

from __future__ import annotations

import libcst as cst

from portcheck import patterns


def built_module(call: cst.Call) -> str | None:
    """The module an extension build names: `load("fused", ...)`, `CUDAExtension(name=...)`,
    stylegan3's `get_plugin(module_name="bias_act_plugin", ...)`."""
    named = patterns.argument(call, 0, "name") or patterns.keyword(call, "module_name")
    return patterns.string_value(named.value) if named is not None else None
