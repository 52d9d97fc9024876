from __future__ import annotations

import libcst as cst

from portcheck import fallbacks, flow, kernels
from portcheck.project import Project
from portcheck.rule import FileContext, Invalid, Report, Rule, Valid
from portcheck.rules.kernels.triton_kernel import kernel_names, launched_kernel


class TritonKernelLaunch(Rule):
    """## What it does
    Reports each launch of one of the repository's Triton kernels (`kernel[grid](...)`,
    `wrap_triton(kernel)[grid](...)`), also of a kernel another module defines, where no
    check on availability or on the device offers a PyTorch path beside it (`if x.is_cuda:`
    ... `else:`), nor beside each call the module makes of the function it is in.

    ## Why is this bad?
    A launch is where the program meets the kernel: even where `import triton` succeeds
    (Triton installs without a GPU), the launch finds no driver on a TPU or Trainium host
    and raises. triton-kernel (PC601) says which kernels to rewrite; each launch is a call
    site that must then call the port, or a PyTorch path.

    ## Example
    ```python
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        ...

    def add(x, y):
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
    ```

    ## Use instead
    ```python
    def add(x, y):
        if not x.is_cuda:
            return x + y
        ...
    ```
    or call the kernel's port (Pallas through `torch.tpu.pallas.jax_op` on TPU, NKI on
    Trainium).

    ## Targets
    An error where Triton does not run (tpu, neuron, xla, mps, hpu, cpu); off on xpu, rocm and
    npu. The kernels are known once every file of the scan has been read.

    ## Fix safety
    No automatic fix: what the launch becomes depends on the port.
    """

    code = "PC611"
    name = "triton-kernel-launch"
    message = "launches Triton kernel `{kernel}`, which does not run on this target"
    hint = "call its port or a PyTorch path here: {port}"
    severity = kernels.severity(kernels.TRITON)

    VALID = [
        Valid(  # a PyTorch path beside the launch, chosen by the device
            "import torch\nimport triton\n@triton.jit\ndef add_kernel(x, y, out, n):\n    pass\n"
            "def add(x, y):\n    if x.is_cuda:\n        out = torch.empty_like(x)\n"
            "        add_kernel[(1,)](x, y, out, x.numel())\n        return out\n    else:\n        return x + y\n"
        ),
        Valid(  # subscripting what a call returns, or a local of the kernel's name, launches no kernel
            "import torch as T\nimport torch.nn\nfrom torch import nn\nfrom torch.library import wrap_triton as wt\n"
            "import triton\n@triton.jit\ndef k(x):\n    pass\n"
            "table = {'add': T.add}\ndef add(x, y, torch, k):\n    k[0](x)\n    return table['add'](x, y)\n"
        ),
        Valid(
            "import triton\n@triton.jit\ndef k(x):\n    pass\ndef run(x):\n    k[(1,)](x)\n",
            options={"targets": ["xpu", "rocm"]},
        ),
        Valid(  # whisper: the launching function is called only under a CUDA check, with a CPU path after
            "import torch\nimport triton\n@triton.jit\ndef dtw_kernel(cost, n):\n    pass\n"
            "def dtw_cuda(x):\n    dtw_kernel[(1,)](x, x.numel())\n    return x\n"
            "def dtw(x):\n    if x.is_cuda:\n        try:\n            return dtw_cuda(x)\n"
            "        except RuntimeError:\n            print('falling back to the CPU')\n    return torch.cumsum(x, 0)\n"
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport triton\nimport triton.language as tl\n@triton.jit\n"
            "def add_kernel(x, y, out, n, BLOCK: tl.constexpr):\n    pass\n"
            "def add(x, y):\n    out = torch.empty_like(x)\n    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=1024)\n"
            "    return out\n",
            lines=[9],
            message="launches Triton kernel `add_kernel`",
        ),
        Invalid(  # a kernel defined below its launcher, launched through torch.library's wrapper
            "import torch\nfrom torch.library import wrap_triton\nimport triton as T\n"
            "def neg(x):\n    out = torch.empty_like(x)\n    wrap_triton(neg_kernel)[(1,)](x, out)\n    return out\n"
            "@T.jit\ndef neg_kernel(x, out):\n    pass\n",
            lines=[6],
            message="`neg_kernel`",
        ),
    ]

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        return kernel_names(known)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._launches: list[tuple[Report, str]] = []  # each report, with the function it is in
        # how the module calls each of its functions: whether with a PyTorch path beside, per call
        self._calls: dict[str, list[bool]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Name:
            beside = bool(fallbacks.fallback_evidence(self.ctx.ancestors))
            self._calls.setdefault(node.func.value, []).append(beside)
        name = launched_kernel(self.ctx, node)
        if name in self.ctx.project.kernels and not fallbacks.fallback_evidence(self.ctx.ancestors):
            report = self.report_here(
                node.func,
                kernel=name.rpartition(".")[2],
                port=kernels.port_hint(kernels.TRITON, self.ctx.targets),
            )
            function = flow.enclosing_function(self.ctx.ancestors)
            self._launches.append((report, function.name.value if function is not None else ""))

    def leave_Module(self, node: cst.Module) -> None:
        """A launch in a function the module calls only with a PyTorch path beside (whisper's
        `dtw_cuda`, called under `if x.is_cuda:` in a try whose handler goes on to `dtw_cpu`)
        does not run on the target."""
        for report, function in self._launches:
            calls = self._calls.get(function, [])
            if not (calls and all(calls)):
                self.reports.append(report)
