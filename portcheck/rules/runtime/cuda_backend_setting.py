from __future__ import annotations

import libcst as cst

from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rewrites import cuda_api, versions
from portcheck.rewrites.edits import Edit, with_parentheses_of
from portcheck.rule import Invalid, Valid
from portcheck.targets import api

_SDP_KERNEL = "torch.backends.cuda.sdp_kernel"
_SDPA_KERNEL = "torch.nn.attention.sdpa_kernel"
_SDP_BACKEND = "torch.nn.attention.SDPBackend"
_FLAGS = ("enable_flash", "enable_math", "enable_mem_efficient", "enable_cudnn")  # sdp_kernel's parameters
# The backends each flag enables, in the order sdp_kernel itself lists them (torch 2.13).
_BACKENDS = (
    ("enable_flash", "FLASH_ATTENTION"),
    ("enable_mem_efficient", "EFFICIENT_ATTENTION"),
    ("enable_math", "MATH"),
    ("enable_cudnn", "CUDNN_ATTENTION"),
)


class CudaBackendSetting(CudaApiRule):
    """## What it does
    Reports settings of CUDA libraries under `torch.backends.cuda`: the deprecated
    `sdp_kernel()` context, `enable_flash_sdp()` and the other attention switches, attention
    kernel availability checks, `preferred_linalg_library()`, `cufft_plan_cache`, and reduced
    precision reduction flags.

    ## Why is this bad?
    Off CUDA they configure libraries that do not exist: the flags are silently ignored and the
    availability checks answer for kernels the target does not have. `sdp_kernel()` is
    deprecated (FutureWarning) in favour of `torch.nn.attention.sdpa_kernel()`.

    ## Example
    ```python
    with torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False):
        out = F.scaled_dot_product_attention(q, k, v)
    ```

    ## Use instead
    ```python
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = F.scaled_dot_product_attention(q, k, v)
    ```

    ## Targets
    Mostly info (a harmless no-op) or a warning (an answer about CUDA kernels); off on ROCm.
    The flash and memory-efficient SDPA backends are CUDA/ROCm kernels: on tpu, neuron and mps
    restrict `sdpa_kernel` to what the backend implements, or drop it.

    ## Fix safety
    Safe: `torch.backends.cuda.sdp_kernel(...)` becomes
    `torch.nn.attention.sdpa_kernel([...])` with the backends its flags enable (flags left out
    default to True), in the order `sdp_kernel` lists them itself; in torch 2.13 `sdp_kernel`
    is implemented as exactly that call, so only the FutureWarning goes. Offered where every
    flag is a literal `True` or `False` and the torch in use has `sdpa_kernel` (2.3); a
    computed flag or `**kwargs` is left to a person. The other settings are reported only.
    """

    code = "PC211"
    name = "cuda-backend-setting"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("from torch.nn.attention import sdpa_kernel, SDPBackend\nctx = sdpa_kernel([SDPBackend.MATH])\n"),
        Valid("def configure(torch):\n    torch.backends.cuda.enable_flash_sdp(True)\n"),
        Valid("import torch\ntorch.backends.mps.is_available()\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, "
            "enable_mem_efficient=False, enable_cudnn=False):\n    pass\n",
            lines=[2],
            fixed="import torch\nwith torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.FLASH_ATTENTION]):\n"
            "    pass\n",
        ),
        Invalid(
            "import torch as T\nwith T.backends.cuda.sdp_kernel(enable_flash=False, enable_cudnn=False):\n    pass\n",
            lines=[2],
            device="cpu",
            fixed="import torch as T\nwith T.nn.attention.sdpa_kernel([T.nn.attention.SDPBackend.EFFICIENT_ATTENTION, "
            "T.nn.attention.SDPBackend.MATH]):\n    pass\n",
        ),
        Invalid(
            "from torch.backends.cuda import sdp_kernel\nfrom torch.nn.attention import SDPBackend\n"
            "with sdp_kernel(False, True, False, False):\n    pass\n",
            lines=[3],
            device="auto",
            fixed="from torch.backends.cuda import sdp_kernel\nfrom torch.nn.attention import SDPBackend\nimport torch\n"
            "with torch.nn.attention.sdpa_kernel([SDPBackend.MATH]):\n    pass\n",
        ),
        # Not fixed: a computed flag, too old a torch.
        Invalid("import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=use_flash):\n    pass\n", lines=[2]),
        Invalid(
            "import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=True):\n    pass\n",
            lines=[2],
            options={"torch-version": "2.2"},
        ),
        Invalid("import torch as T\nT.backends.cuda.enable_flash_sdp(False)\n", lines=[2]),
        Invalid("from torch import backends\nbackends.cuda.preferred_linalg_library('magma')\n", lines=[2]),
        Invalid("from torch.backends.cuda import flash_sdp_enabled as flash_on\nif flash_on():\n    pass\n", lines=[2]),
        Invalid("import torch.backends.cuda\ntorch.backends.cuda.cufft_plan_cache.max_size = 32\n", lines=[2]),
        Invalid("import torch\ntorch.backends.cuda.some_future_knob = 1\n", lines=[2]),
    ]

    def fix(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> Edit | None:
        if entry.name != _SDP_KERNEL or self.ctx.fix_target.keeps_cuda_api or not versions.has(self.ctx, entry.since):
            return super().fix(node, entry)
        use = cuda_api.Use.of(self.ctx, node)
        flags = _flags(use.call) if use.call is not None else None
        kernel, backend = cuda_api.spell(self.ctx, _SDPA_KERNEL), cuda_api.spell(self.ctx, _SDP_BACKEND)
        if flags is None or kernel is None or backend is None:
            return None
        assert use.call is not None
        enum = cuda_api.code(backend.node)
        listed = ", ".join(f"{enum}.{member}" for flag, member in _BACKENDS if flags[flag])
        call = cst.parse_expression(f"{cuda_api.code(kernel.node)}([{listed}])")
        imports = tuple(dict.fromkeys((*kernel.imports, *backend.imports)))
        title = f"{_SDP_KERNEL}(...) -> {_SDPA_KERNEL}([...])"
        return Edit(use.call, with_parentheses_of(use.call, call), FixSafety.SAFE, title, imports)


def _flags(call: cst.Call) -> dict[str, bool] | None:
    """sdp_kernel's flags when each is a literal True or False (left out: True); else None."""
    flags = dict.fromkeys(_FLAGS, True)
    given: set[str] = set()
    for position, arg in enumerate(call.args):
        if arg.star or position >= len(_FLAGS):
            return None
        flag = arg.keyword.value if arg.keyword is not None else _FLAGS[position]
        if flag not in flags or flag in given:
            return None
        if not (isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False")):
            return None
        given.add(flag)
        flags[flag] = arg.value.value == "True"
    return flags
