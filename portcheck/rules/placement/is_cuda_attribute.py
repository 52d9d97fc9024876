from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target


class IsCudaAttribute(Rule):
    """## What it does
    Reports reads of `tensor.is_cuda` (and `module.is_cuda`-style flags named the same).

    ## Why is this bad?
    `is_cuda` is `False` for a tensor on a TPU, Trainium, MPS or any other device. Code that
    uses it to mean "on the accelerator" silently takes its CPU path there: pinned memory off,
    mixed precision off, an assertion that fails.

    ## Example
    ```python
    if x.is_cuda:
        x = x.half()
    ```

    ## Use instead
    ```python
    if x.device.type != "cpu":
        x = x.half()
    ```

    ## Targets
    A warning on every target but ROCm: the program runs, but the branch it takes may not be
    the one meant for the accelerator. Check what the branch does.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC103"
    name = "is-cuda-attribute"
    message = "`.is_cuda` is False on every other device"
    hint = 'compare the device type instead: `x.device.type != "cpu"` (or == the target\'s type)'
    severity = per_target(WARNING, rocm=OFF)
    triggers = (b"is_cuda",)

    VALID = [
        Valid('import torch\nif x.device.type != "cpu":\n    pass\n'),
        Valid("import torch\nis_cuda = torch.cuda.is_available()\nprint(is_cuda)\n"),
        Valid("import config\nif config.is_cuda:\n    pass\n"),
        Valid(
            "class Loader:\n    def __init__(self, device):\n        self.is_cuda = device.type == 'cuda'\n"
            "    def __iter__(self):\n        if self.is_cuda:\n            pass\n",
            options={"select": ["PC103"]},
        ),
        Valid("state.is_cuda = False\n"),
        Valid("def f(torch):\n    is_cuda = torch.cuda.is_available()\n    return is_cuda\n"),
    ]
    INVALID = [
        Invalid("import torch\nx = torch.ones(2)\nassert x.is_cuda\n", lines=[3]),
        Invalid("import torch as T\npin = T.ones(1).is_cuda\n", lines=[2]),
        Invalid("from torch import cuda\nuse_amp = batch.is_cuda and cuda.is_available()\n", lines=[2]),
        Invalid("from torch.cuda import synchronize as sync\nif out.is_cuda:\n    sync()\n", lines=[2]),
        Invalid("import torch.cuda\nflags = [p.is_cuda for p in model.parameters()]\n", lines=[2]),
    ]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "is_cuda" or _is_own_attribute(node, self.ctx.parent):
            return
        if patterns.resolves_outside_torch_classes(self.ctx.qualified_names(node)):
            return
        self.report(node)


def _is_own_attribute(node: cst.Attribute, parent: cst.CSTNode | None) -> bool:
    """`self.is_cuda` is a flag the class defines itself (tensors and modules have no such
    attribute), and `x.is_cuda = ...` defines one."""
    if isinstance(node.value, cst.Name) and node.value.value in ("self", "cls"):
        return True
    return isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and parent.target is node
