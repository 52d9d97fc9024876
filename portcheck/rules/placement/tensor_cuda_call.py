from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid, per_target


class TensorCudaCall(Rule):
    """## What it does
    Reports `.cuda()` and `.cuda(i)` calls on tensors, modules and other objects.

    ## Why is this bad?
    `.cuda()` only ever moves to a CUDA device. Without CUDA it raises `AssertionError: Torch
    not compiled with CUDA enabled`; on a TPU or Trainium host it does not reach the
    accelerator at all.

    ## Example
    ```python
    model = Net().cuda()
    batch = batch.cuda(non_blocking=True)
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    batch = batch.to(device, non_blocking=True)
    ```

    ## Targets
    An error on every target but ROCm, where `.cuda()` reaches the AMD GPU. TorchTPU and
    TorchNeuron also generate `.tpu()` and `.neuron()`, but `.to(device)` is the portable form.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC102"
    name = "tensor-cuda-call"
    message = "`.cuda()` only moves to a CUDA device"
    hint = "use `.to(device)` with one device chosen once (keep non_blocking=)"
    severity = per_target(ERROR, rocm=OFF)
    triggers = (b".cuda",)

    VALID = [
        Valid("import torch\nx = torch.randn(3).to(device)\n"),
        Valid("from numba import cuda\n@cuda.jit\ndef kernel(a):\n    pass\n"),
        Valid("import torch as T\ndevice_module = T.cuda\n"),
        Valid("def f(cuda):\n    return cuda(3)\n"),
        Valid("import cupy\nwith cupy.cuda.Device(0):\n    pass\n"),
    ]
    INVALID = [
        Invalid("import torch\nx = torch.randn(3).cuda()\n", lines=[2]),
        Invalid("import torch as T\nmodel = T.nn.Linear(2, 2).cuda(0)\n", lines=[2]),
        Invalid("from torch import cuda\nimport torch\nif cuda.is_available():\n    net = net.cuda()\n", lines=[4]),
        Invalid(
            "from torch.cuda import device_count as n\nimport torch.cuda\n"
            "batch = [t.cuda(non_blocking=True) for t in batch]\n",
            lines=[3],
        ),
        Invalid("class M:\n    def setup(self):\n        self.net.half().cuda()\n", lines=[3]),
        Invalid("model = torch.nn.Module.cuda(model)\n", lines=[1]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if patterns.method_name(node) != "cuda":
            return
        if patterns.resolves_outside_torch_classes(self.ctx.qualified_names(node.func)):
            return
        self.report(node)
