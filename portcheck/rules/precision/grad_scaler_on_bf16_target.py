from __future__ import annotations

import libcst as cst

from portcheck import targets as target_data
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid

_SCALERS = frozenset(
    {
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cpu.amp.GradScaler",
    }
)


class GradScalerOnBf16Target(Rule):
    """## What it does
    Reports creating a `GradScaler` (`torch.amp.GradScaler`, `torch.cuda.amp.GradScaler`) when
    a selected target trains natively in bfloat16.

    ## Why is this bad?
    Loss scaling exists because float16 gradients underflow. bfloat16 has float32's exponent
    range, so on TPU, Trainium, XLA and Gaudi a scaler only adds work (an inf/NaN check and a
    host sync every step), and GradScaler support on PrivateUse1 backends is not guaranteed.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("tpu")
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    ```

    ## Use instead
    ```python
    loss.backward()
    optimizer.step()
    ```
    or keep the code path and construct the scaler with `enabled=False`.

    ## Targets
    A warning on the bfloat16-native targets (tpu, neuron, xla, hpu, cpu); off on targets
    that train in float16 and need it.

    ## Fix safety
    No automatic fix yet (disabling the scaler changes numerics; it will be an unsafe fix).
    """

    code = "PC304"
    name = "grad-scaler-on-bf16-target"
    message = "a GradScaler is not needed with bfloat16, which the target uses natively"
    hint = "drop the scaler (scale/step/update become backward/step), or construct it with enabled=False"
    severity = {name: OFF if t.needs_grad_scaler else WARNING for name, t in target_data.all_targets().items()}
    triggers = (b"GradScaler",)

    VALID = [
        Valid("import torch\nscaler = torch.amp.GradScaler('cuda')\n", options={"targets": ["mps", "xpu", "rocm"]}),
        Valid("import torch\nscaler = torch.amp.GradScaler('tpu', enabled=False)\n"),
        Valid("def f(torch):\n    return torch.amp.GradScaler()\n"),
        Valid("class GradScaler:\n    pass\nscaler = GradScaler()\n"),
    ]
    INVALID = [
        Invalid("import torch\nscaler = torch.amp.GradScaler('tpu')\n", lines=[2]),
        Invalid("import torch as T\nscaler = T.cuda.amp.GradScaler()\n", lines=[2]),
        Invalid("from torch import amp\nscaler = amp.GradScaler(enabled=use_amp)\n", lines=[2]),
        Invalid("from torch.cuda.amp import GradScaler as Scaler\ns = Scaler()\n", lines=[2]),
        Invalid("import torch.amp\ns = torch.amp.grad_scaler.GradScaler('neuron')\n", lines=[2]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & _SCALERS:
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "enabled" and isinstance(arg.value, cst.Name):
                if arg.value.value == "False":
                    return
        self.report(node)
