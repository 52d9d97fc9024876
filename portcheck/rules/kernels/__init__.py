"""PC6: custom kernels: Triton, CUDA C++ extensions and sources, CUDA-only op registrations, CUDA Python libraries."""

from __future__ import annotations

import libcst as cst

from portcheck import patterns


def built_module(call: cst.Call) -> str | None:
    """The module an extension build names: `load("fused", ...)`, `CUDAExtension(name=...)`,
    stylegan3's `get_plugin(module_name="bias_act_plugin", ...)`; a name formatted at run time
    as written (RWKV's `load(name=f"wkv_{T_MAX}", ...)`: `wkv_{T_MAX}`), which only the name
    the module binds the build to reaches."""
    named = patterns.argument(call, 0, "name") or patterns.keyword(call, "module_name")
    if named is None:
        return None
    if type(named.value) is cst.FormattedString:
        return "".join(
            part.value if type(part) is cst.FormattedStringText else cst.Module([]).code_for_node(part)
            for part in named.value.parts
        )
    return patterns.string_value(named.value)
