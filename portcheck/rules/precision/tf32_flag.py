from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid
from portcheck.targets import api

# What a switch set to ask for full float32 precision is set to: TF32 off, or IEEE float32.
_FULL_PRECISION = ("False", "ieee")


class Tf32Flag(CudaApiRule):
    """## What it does
    Reports the CUDA TF32 switches: `torch.backends.cuda.matmul.allow_tf32`,
    `torch.backends.cudnn.allow_tf32` and their `fp32_precision` successors.

    ## Why is this bad?
    They set cuBLAS and cuDNN flags. On any other target nothing reads them, so the intended
    faster float32 matmuls silently do not happen (or, reading them, code draws conclusions
    about precision that do not hold).

    ## Example
    ```python
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    ```

    ## Use instead
    ```python
    torch.set_float32_matmul_precision("high")
    ```
    and where the switch turns TF32 off (`allow_tf32 = False`, `fp32_precision = "ieee"`),
    which asks for full float32 precision, `torch.set_float32_matmul_precision("highest")`.

    ## Targets
    A warning on every target but ROCm. TorchTPU patches `set_float32_matmul_precision`:
    "high" means multi-pass bfloat16 and "highest" full precision; on TPU, float32 matmuls
    run at bfloat16 precision by default. On XLA use `torch_xla.backends.set_mat_mul_precision`.

    ## Fix safety
    No automatic fix: nothing here is provably behaviour-keeping. Setting
    `torch.backends.cuda.matmul.allow_tf32` also sets the process-wide
    `torch.get_float32_matmul_precision()` ("high" for True, "highest" for False, in torch
    2.13), which code and non-CUDA backends may read, so deleting the line is not a no-op off
    CUDA; and `torch.set_float32_matmul_precision("high")` also switches oneDNN (CPU) matmuls
    to TF32 and on TPU selects multi-pass bfloat16, which changes numerics.
    """

    code = "PC305"
    name = "tf32-flag"

    VALID = [
        Valid('import torch\ntorch.set_float32_matmul_precision("high")\n'),
        Valid("def configure(torch):\n    torch.backends.cuda.matmul.allow_tf32 = True\n"),
        Valid("import torch\ntorch.backends.mps.is_available()\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", lines=[2]),
        Invalid("import torch as T\nT.backends.cudnn.allow_tf32 = True\n", lines=[2]),
        Invalid("from torch import backends\nbackends.cuda.matmul.fp32_precision = 'tf32'\n", lines=[2]),
        Invalid(  # TF32 off asks for full float32 precision: "highest", not "high"
            "from torch.backends import cudnn as cudnn_backend\ncudnn_backend.allow_tf32 = False\n", lines=[2]
        ),
        Invalid("import torch.backends.cuda\nprint(torch.backends.cuda.matmul.allow_tf32)\n", lines=[2]),
    ]

    def hint_for(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> str:
        """TF32 switched off (`allow_tf32 = False`, `fp32_precision = "ieee"`) asks for full
        float32 precision: its portable spelling is "highest" ("high" would allow TF32, and
        multi-pass bfloat16 on TPU)."""
        parent = self.ctx.parent
        assigned = self.ctx.ancestors[-2] if type(parent) is cst.AssignTarget and len(self.ctx.ancestors) > 1 else None
        if type(assigned) is cst.Assign and _asks_full_precision(assigned.value):
            return (
                'instead: torch.set_float32_matmul_precision("highest"), which keeps float32 matmuls at full precision'
            )
        return super().hint_for(node, entry)


def _asks_full_precision(value: cst.BaseExpression) -> bool:
    written = value.value if type(value) is cst.Name else patterns.string_value(value)
    return written in _FULL_PRECISION
