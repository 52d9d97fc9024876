from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, INFO, OFF, WARNING, Invalid, Rule, Valid

_DDP = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"})


def _severity() -> dict:
    """DDP raises ValueError for device_ids on CPU modules; on one-device-per-process targets the
    list can only name the process's own device; elsewhere it works."""
    result = {}
    for name, target in target_data.all_targets().items():
        if target.keeps_cuda_api:
            result[name] = OFF
        elif target.device_type == "cpu":
            result[name] = ERROR
        else:
            result[name] = WARNING if target.one_device_per_process else INFO
    return result


class DdpDeviceIds(Rule):
    """## What it does
    Reports `DistributedDataParallel(model, device_ids=[...], output_device=...)`.

    ## Why is this bad?
    `device_ids` and `output_device` describe CUDA devices of the process. For a module on the
    CPU, DDP raises `ValueError: DistributedDataParallel device_ids and output_device arguments
    only work with single-device/multiple-device GPU modules or CPU modules`. On a TPU a
    process owns one device, so the list can only name that one.

    ## Example
    ```python
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    ```

    ## Use instead
    Move the model to the process's device first and let DDP use it:
    ```python
    model = DDP(model.to(device))
    ```

    ## Targets
    An error on cpu (raises); a warning on one-device-per-process targets (tpu, xla, mps); info
    elsewhere; off on ROCm.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC403"
    name = "ddp-device-ids"
    message = "DistributedDataParallel is given {what}, which name CUDA devices of the process"
    hint = "move the model to the process's device and drop device_ids/output_device"
    severity = _severity()
    triggers = (b"DistributedDataParallel",)

    VALID = [
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model.to(device))\n"),
        Valid("def wrap(torch, m):\n    return torch.nn.parallel.DistributedDataParallel(m, device_ids=[0])\n"),
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(m, device_ids=None)\n"),
    ]
    INVALID = [
        Invalid("import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[rank])\n", lines=[2]),
        Invalid("import torch as T\nm = T.nn.parallel.DistributedDataParallel(m, [rank], rank)\n", lines=[2]),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, output_device=0)\n", lines=[2]
        ),
        Invalid("from torch import nn\nm = nn.parallel.DistributedDataParallel(m, device_ids=[args.gpu])\n", lines=[2]),
        Invalid(
            "import torch.nn.parallel\nimport torch.cuda\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[0])\n",
            lines=[3],
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & _DDP:
            return
        given = [
            name
            for index, name in ((1, "device_ids"), (2, "output_device"))
            if (arg := patterns.argument(node, index, name)) is not None and not _is_none(arg.value)
        ]
        if given:
            self.report(node, what=" and ".join(f"`{name}`" for name in given))


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
