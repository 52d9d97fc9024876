from __future__ import annotations

import libcst as cst

from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target

_DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        # MMCV 1.x's subclass (OpenMMLab's tools/test.py: `MMDataParallel(model, device_ids=[0])`)
        "mmcv.parallel.MMDataParallel",
        "mmcv.parallel.data_parallel.MMDataParallel",
    }
)


class DataParallel(Rule):
    """## What it does
    Reports `torch.nn.DataParallel(model)`, also MMCV's subclass `MMDataParallel(model,
    device_ids=[0])` (OpenMMLab 1.x tools).

    ## Why is this bad?
    DataParallel replicates a module over the visible CUDA GPUs of one process. Without CUDA it
    quietly runs the module on a single device, so a multi-device job silently uses one; it is
    also slower than DistributedDataParallel on CUDA and PyTorch recommends against it.

    ## Example
    ```python
    model = torch.nn.DataParallel(model)
    ```

    ## Use instead
    One process per device with DistributedDataParallel (or FSDP2), launched by `torchrun`:
    ```python
    model = torch.nn.parallel.DistributedDataParallel(model.to(device))
    ```

    ## Targets
    A warning on every target but ROCm; info under a CUDA check (`if torch.cuda.device_count()
    > 1: model = nn.DataParallel(model)`), which keeps it on CUDA: the check is the finding.

    ## Fix safety
    No automatic fix. Where DataParallel finds no CUDA GPU it just calls the module, but
    unwrapping still changes the program: code reaches the model through `model.module`, and
    checkpoints hold `module.`-prefixed state_dict keys. DistributedDataParallel, the real
    replacement, changes how the program is launched (one process per device).
    """

    code = "PC406"
    name = "data-parallel"
    message = "DataParallel only parallelises over CUDA GPUs; elsewhere it runs on one device"
    hint = "use DistributedDataParallel or FSDP with one process per device"
    severity = per_target(WARNING, rocm=OFF)
    triggers = (b"DataParallel",)
    cuda_only = True

    VALID = [
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model)\n"),
        Valid("def wrap(torch, m):\n    return torch.nn.DataParallel(m)\n"),
        Valid("class DataParallel:\n    pass\nm = DataParallel()\n"),
    ]
    INVALID = [
        Invalid(  # yolov5: several GPUs only
            "import torch\nif torch.cuda.device_count() > 1:\n    model = torch.nn.DataParallel(model)\n",
            lines=[3],
            message="reached only under a CUDA check",
        ),
        Invalid("import torch\nmodel = torch.nn.DataParallel(model)\n", lines=[2]),
        Invalid("import torch as T\nmodel = T.nn.DataParallel(model, device_ids=[0, 1])\n", lines=[2]),
        Invalid("from torch import nn\nmodel = nn.DataParallel(model)\n", lines=[2]),
        Invalid(  # XCiT's detection tools (the OpenMMLab 1.x template)
            "import torch\nfrom mmcv.parallel import MMDataParallel\nmodel = MMDataParallel(model, device_ids=[0])\n",
            lines=[3],
        ),
        Invalid("from torch.nn.parallel import DataParallel as DP\nimport torch.cuda\nmodel = DP(model)\n", lines=[3]),
        Invalid("import torch.nn\nif n > 1:\n    model = torch.nn.parallel.DataParallel(model)\n", lines=[3]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.qualified_names(node.func) & _DATA_PARALLEL:
            self.report(node)
