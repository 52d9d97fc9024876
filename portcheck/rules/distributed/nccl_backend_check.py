from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target
from portcheck.rules.distributed.nccl_backend import is_nccl

_GET_BACKEND = frozenset({"torch.distributed.get_backend", "torch.distributed.distributed_c10d.get_backend"})


class NcclBackendCheck(Rule):
    """## What it does
    Reports code that asks whether NCCL is in use: `backend == "nccl"`,
    `dist.get_backend() != "nccl"`, `backend in ("nccl", ...)`,
    `torch.distributed.is_nccl_available()`.

    ## Why is this bad?
    On another target the answer is silently no, so the branch written for the accelerator's
    collectives (bucket sizes, `device_ids`, moving tensors to the device before `all_reduce`)
    is skipped. Ascend's `transfer_to_npu` documents exactly this as the code it cannot migrate.

    ## Example
    ```python
    if dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor)
    ```

    ## Use instead
    ```python
    if device.type != "cpu":
        tensor = tensor.to(device)
    dist.all_reduce(tensor)
    ```

    ## Targets
    A warning on every target but ROCm.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC402"
    name = "nccl-backend-check"
    message = 'checks for the "nccl" backend, which is never in use on this target'
    hint = 'decide on the device (device.type != "cpu") or on the backend your target uses'
    severity = per_target(WARNING, rocm=OFF)
    triggers = (b"nccl",)
    watched_names = ("torch.distributed.is_nccl_available",)

    VALID = [
        Valid('import torch.distributed as dist\nif dist.get_backend() == "gloo":\n    pass\n'),
        Valid('if "nccl" in message:\n    pass\n'),
        Valid("def f(torch):\n    return torch.distributed.is_nccl_available()\n"),
    ]
    INVALID = [
        Invalid('import torch\nif torch.distributed.get_backend() == "nccl":\n    pass\n', lines=[2]),
        Invalid("import torch as T\nok = T.distributed.is_nccl_available()\n", lines=[2]),
        Invalid('from torch import distributed as dist\nuse = args.backend != "nccl"\n', lines=[2]),
        Invalid(
            'from torch.distributed import get_backend as backend_of\nif backend_of(g) in ("nccl", "xccl"):\n    pass\n',
            lines=[2],
        ),
        Invalid('import torch.distributed\nif dist_backend == "nccl":\n    pass\n', lines=[2]),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        self.report(node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if patterns.compares_literal_with(node, is_nccl, self._is_backend):
            self.report(node)

    def _is_backend(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Call):
            return (
                bool(self.ctx.qualified_names(node.func) & _GET_BACKEND) or patterns.method_name(node) == "get_backend"
            )
        name = patterns.target_name(node)
        return name is not None and patterns.is_backend_name(name)
