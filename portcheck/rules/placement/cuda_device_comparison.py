from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target


class CudaDeviceComparison(Rule):
    """## What it does
    Reports checks of a device against `"cuda"`: `x.device.type == "cuda"`,
    `device != "cuda"`, `"cuda" in str(device)`, `str(device).startswith("cuda")`.

    ## Why is this bad?
    On any other target the check is silently false, so code meant for the accelerator (mixed
    precision, pinned memory, non-blocking copies, synchronisation for timing) is skipped
    without a sound. `torch.autocast(enabled=device.type == "cuda")` trains a TPU model in
    float32 and nobody notices.

    ## Example
    ```python
    use_amp = x.device.type == "cuda"
    ```

    ## Use instead
    ```python
    use_amp = x.device.type != "cpu"
    ```

    ## Targets
    A warning on every target but ROCm: it runs, but may run differently from what was meant.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC105"
    name = "cuda-device-comparison"
    message = 'compares a device with "cuda", which is false on every other device'
    hint = 'ask what the check means: "any accelerator" is `device.type != "cpu"`; a target is `== "<type>"`'
    severity = per_target(WARNING, rocm=OFF)
    triggers = (b"cuda",)

    VALID = [
        Valid('import torch\nif x.device.type != "cpu":\n    pass\n'),
        Valid('import torch\nif args.backend == "cuda":\n    pass\n'),
        Valid('if "cuda" in message:\n    print(message)\n'),
        Valid('def f(torch, device):\n    return device == "mps"\n'),
    ]
    INVALID = [
        Invalid('import torch\nuse_amp = x.device.type == "cuda"\n', lines=[2]),
        Invalid('import torch as T\ndev = T.device("cpu")\nif dev.type != "cuda":\n    pass\n', lines=[3]),
        Invalid('from torch import cuda\nif "cuda" in str(device) and cuda.is_available():\n    pass\n', lines=[2]),
        Invalid(
            'from torch.cuda import synchronize as sync\nif str(args.device).startswith("cuda"):\n    sync()\n',
            lines=[2],
        ),
        Invalid('import torch.cuda\npin = device == "cuda:0"\n', lines=[2]),
        Invalid(
            'def step(batch, device):\n    if device in ("cuda", "mps"):\n        batch = batch.pin_memory()\n',
            lines=[2],
        ),
    ]

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if patterns.compares_literal_with(node, _is_cuda, _is_device_like):
            self.report(node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("startswith", "endswith"):
            prefix = patterns.positional(node, 0)
            if prefix is not None and _is_cuda(prefix.value) and _is_device_like(func.value):
                self.report(node)


def _is_cuda(node: cst.CSTNode) -> bool:
    return patterns.string_value(node) is not None and patterns.is_cuda_device_literal(node)


def _is_device_like(node: cst.BaseExpression) -> bool:
    """`device`, `x.device`, `x.device.type`, `args.device`, `str(device)`, `torch.device(...)`."""
    if isinstance(node, cst.Name):
        return patterns.is_device_name(node.value)
    if isinstance(node, cst.Attribute):
        return node.attr.value == "type" and _is_device_like(node.value) or patterns.is_device_name(node.attr.value)
    if isinstance(node, cst.Call) and node.args:
        func = node.func
        if isinstance(func, cst.Name) and func.value in ("str", "repr"):
            return _is_device_like(node.args[0].value)
        return isinstance(func, cst.Attribute) and func.attr.value == "device"
    return False
