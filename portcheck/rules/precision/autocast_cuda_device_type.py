from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target
from portcheck.rules.placement.cuda_device_string import describe


class AutocastCudaDeviceType(Rule):
    """## What it does
    Reports the device-generic AMP API called with a hard-coded `"cuda"` device type:
    `torch.autocast("cuda")`, `torch.amp.autocast(device_type="cuda")`,
    `torch.amp.GradScaler("cuda")`, `torch.amp.custom_fwd(device_type="cuda")`,
    `torch.get_autocast_dtype("cuda")` and similar.

    ## Why is this bad?
    Autocast for `"cuda"` does not apply to tensors on another device: on a TPU the region
    silently runs in float32. `torch.autocast("cuda")` itself does not raise without CUDA, so
    nothing points at the problem.

    ## Example
    ```python
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Use instead
    ```python
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Targets
    A warning on every target but ROCm, where HIP answers to `"cuda"`.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC302"
    name = "autocast-cuda-device-type"
    message = "{call} is given the CUDA device type {literal}: it does nothing for other devices"
    hint = "pass the target's device type, e.g. device.type from the one device variable"
    severity = per_target(WARNING, rocm=OFF)
    triggers = (b"cuda",)

    VALID = [
        Valid('import torch\nwith torch.autocast("cpu", dtype=torch.bfloat16):\n    pass\n'),
        Valid("import torch\nwith torch.autocast(device.type):\n    pass\n"),
        Valid('def f(torch):\n    return torch.autocast("cuda")\n'),
        # the literal is bound to a device name: cuda-device-string (PC101) reports it there
        Valid(
            'import torch\ndevice_type = "cuda"\nwith torch.autocast(device_type):\n    pass\n',
            options={"select": ["PC302"]},
        ),
        Valid('import torch\nwith torch.autocast("cuda"):\n    pass\n', options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid('import torch\nwith torch.autocast("cuda", dtype=torch.float16):\n    pass\n', lines=[2]),
        Invalid('import torch as T\nwith T.amp.autocast(device_type="cuda"):\n    pass\n', lines=[2]),
        Invalid('from torch import amp\nscaler = amp.GradScaler("cuda")\n', lines=[2]),
        Invalid(
            'from torch.amp import custom_fwd as fwd\n@fwd(device_type="cuda")\ndef f(ctx, x):\n    return x\n',
            lines=[2],
        ),
        Invalid('import torch.amp\nKIND = "cuda"\nd = torch.get_autocast_dtype(KIND)\n', lines=[2]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func) & patterns.AMP_DEVICE_CALLS
        if not names:
            return
        arg = patterns.argument(node, 0, "device_type")
        if arg is None:
            return
        for literal in patterns.device_literals_through_names(arg.value, self.ctx.assigned_value):
            self.report(literal, call=f"`{min(names)}`", literal=describe(literal))
