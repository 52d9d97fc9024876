from __future__ import annotations

import libcst as cst

from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid
from portcheck.rules.runtime.cuda_default_tensor_type import sets_default_type


class CudaLegacyTensorType(CudaApiRule):
    """## What it does
    Reports the legacy CUDA tensor and storage types: `torch.cuda.FloatTensor`,
    `torch.cuda.LongTensor`, `torch.cuda.HalfTensor`, `torch.cuda.FloatStorage` and the rest.
    Given to `torch.set_default_tensor_type(...)`, they are cuda-default-tensor-type's (PC216).

    ## Why is this bad?
    Without CUDA, constructing one raises `TypeError: type torch.cuda.FloatTensor not available`,
    and `isinstance(x, torch.cuda.FloatTensor)` is always False. Old code also writes
    `dtype = torch.cuda.FloatTensor if cuda else torch.FloatTensor`.

    ## Example
    ```python
    mask = torch.cuda.LongTensor(batch_size).fill_(0)
    ```

    ## Use instead
    ```python
    mask = torch.zeros(batch_size, dtype=torch.long, device=device)
    ```

    ## Targets
    An error on every target but ROCm.

    ## Fix safety
    No automatic fix: a legacy type stands for a dtype and a device at once, and is used as a
    constructor, a `.type()` argument or an `isinstance` check, each of which needs its own
    rewrite with the device the code runs on.
    """

    code = "PC213"
    name = "cuda-legacy-tensor-type"

    VALID = [
        Valid("import torch\nx = torch.zeros(3, dtype=torch.float32)\n"),
        Valid("import torch\nx = torch.FloatTensor(3)\n"),
        Valid("def make(torch):\n    return torch.cuda.FloatTensor(3)\n"),
        Valid("import torch\ndef f(x: torch.cuda.FloatTensor) -> torch.cuda.LongTensor:\n    return x.long()\n"),
    ]
    INVALID = [
        Invalid("import torch\nx = torch.cuda.FloatTensor(3)\n", lines=[2]),
        Invalid("import torch as T\nTensor = T.cuda.FloatTensor if cuda else T.FloatTensor\n", lines=[2]),
        Invalid("from torch import cuda\nok = isinstance(x, cuda.LongTensor)\n", lines=[2]),
        Invalid(
            "from torch.cuda import HalfTensor as HT\ny = x.type(HT)\n",
            lines=[2],
            message="type torch.cuda.HalfTensor not available",
        ),
        Invalid("import torch.cuda\ns = torch.cuda.FloatStorage(10)\n", lines=[2]),
        # the argument of set_default_tensor_type is PC216's; the binding is still a legacy type
        Invalid(
            "import torch\nT = torch.cuda.HalfTensor\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)\n"
            "torch.set_default_tensor_type(T)\n",
            lines=[2],
        ),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if not sets_default_type(self.ctx):
            super().visit_watched_name(node, qualified_name)
