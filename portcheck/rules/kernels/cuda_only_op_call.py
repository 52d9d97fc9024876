from __future__ import annotations

import libcst as cst

from portcheck import fallbacks, kernels, project
from portcheck.project import Project
from portcheck.rule import Invalid, Rule, Valid


class CudaOnlyOpCall(Rule):
    """## What it does
    Reports calls of custom operators, `torch.ops.<ns>.<op>(...)`, that the repository
    registers for CUDA and for no other device (no CPU, composite or default implementation;
    see PC604).

    ## Why is this bad?
    On any other device the dispatcher finds no kernel: "Could not run 'ns::op' with arguments
    from the 'PrivateUse1' backend". These call sites are where the model stops working, and
    they are often far from the C++ or Triton code that defines the op.

    ## Example
    ```python
    out = torch.ops.mylib.fused_gelu(x)  # registered only in TORCH_LIBRARY_IMPL(mylib, CUDA, m)
    ```

    ## Use instead
    Register a device-independent implementation of the op (plain PyTorch), or branch on the
    device and call the PyTorch version where the CUDA kernel does not exist.

    ## Targets
    An error on every target but ROCm, where the CUDA implementation is built through hipify.

    ## Fix safety
    No automatic fix: the missing implementation has to be written.
    """

    code = "PC605"
    name = "cuda-only-op-call"
    message = "`torch.ops.{namespace}.{op}` has only a CUDA implementation in this repository"
    hint = "register a PyTorch implementation for other devices; port: {port}"
    severity = kernels.severity(kernels.LIBRARY_OP)
    watched_names = ("torch.ops",)

    VALID = [
        Valid("import torch\ny = torch.ops.aten.relu(x)\n"),
        Valid(
            "import torch\n@torch.library.custom_op('mylib::f', mutates_args=())\ndef f(x):\n    return x\n"
            "y = torch.ops.mylib.f(x)\n"
        ),
        Valid(
            "import torch\nlib = torch.library.Library('mylib', 'IMPL')\nlib.impl('g', g_cuda, 'CUDA')\n"
            "lib.impl('g', g_cpu, 'CPU')\ny = torch.ops.mylib.g(x)\n"
        ),
        Valid("def f(torch):\n    return torch.ops.mylib.g(1)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nlib = torch.library.Library('mylib', 'IMPL')\nlib.impl('g', g_cuda, 'CUDA')\n"
            "y = torch.ops.mylib.g(x)\nz = torch.ops.mylib.g.default(x)\n",
            lines=[4, 5],
        ),
        Invalid(
            "import torch as T\nfrom torch.library import custom_op as op\n"
            "@op('mylib::h', mutates_args=(), device_types='cuda')\ndef h(x):\n    return x\ny = T.ops.mylib.h(x)\n",
            lines=[6],
        ),
        Invalid(
            "from torch import ops, library\nimport torch.library\nlibrary.impl('mylib::k', 'cuda')(k)\nops.mylib.k(1)\n",
            lines=[4],
        ),
    ]

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        return tuple(sorted({op.partition("::")[2].encode() for op in known.cuda_only_ops}))

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        parts = qualified_name.split(".")
        if not self.ctx.project.complete or len(parts) < 4:
            return
        namespace, op = parts[2], parts[3]
        if f"{namespace}::{op}" in self.ctx.project.cuda_only_ops and len(parts) <= 5:
            evidence = fallbacks.fallback_evidence(self.ctx.ancestors)
            self.record(project.CALL, f"torch.ops.{namespace}.{op}", node, fallback=evidence)
            self.report(node, namespace=namespace, op=op, port=kernels.port_hint(kernels.LIBRARY_OP, self.ctx.targets))
