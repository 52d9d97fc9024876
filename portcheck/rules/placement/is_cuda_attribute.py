from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.flow import LOSES_EXTRAS
from portcheck.rewrites import edits, placement
from portcheck.rewrites.edits import Edit
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target
from portcheck.rules.placement.cuda_device_comparison import SKIPS_EXTRAS


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
    the one meant for the accelerator. Check what the branch does. Still a warning, but not
    fixed, where the check keeps a CUDA-only library or several-GPU `DataParallel` from other
    devices (as for cuda-device-comparison, PC105): that is what it is for, and the port gives
    the target an equivalent or drops it; info on the CPU.

    ## Fix safety
    Unsafe: `x.is_cuda` becomes `x.device.type == "tpu"` (the target's device type), which is
    what `is_cuda` meant on CUDA. Parentheses are added where a comparison would bind
    differently (`(x.device.type == "tpu") == y`), and `not x.is_cuda` becomes `!=`. With
    `--device auto` it is `x.device.type != "cpu"`: on the accelerator, whichever is present,
    and False for every tensor on a host without one, as `is_cuda` was. It is unsafe because the fix turns on code that never ran on the target: a
    branch guarded by `is_cuda` often holds CUDA-only work (`if x.is_cuda: return
    cuda_ext.op(x)`, else a pure PyTorch path), and that path is the right one on a TPU.
    Read the branch before accepting the fix.

    Not fixed for `--device cpu`: there `is_cuda` is already False for every tensor, which is
    what a CPU port needs; `== "cpu"` would invert it. Nor where the attribute is assigned or
    deleted, or inside an f-string.
    """

    code = "PC103"
    name = "is-cuda-attribute"
    message = "`.is_cuda` is False on every other device{consequence}"
    hint = 'compare the device type instead: `x.device.type != "cpu"` (or == the target\'s type)'
    severity = per_target(WARNING, rocm=OFF)
    fix_safety = FixSafety.UNSAFE
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
        Invalid(
            "import torch\nx = torch.ones(2)\nassert x.is_cuda\n",
            lines=[3],
            unsafe=True,
            fixed='import torch\nx = torch.ones(2)\nassert x.device.type == "tpu"\n',
        ),
        Invalid("import torch\nx = torch.ones(2)\nassert x.is_cuda\n", lines=[3]),  # unsafe: not without opt-in
        Invalid(
            "import torch as T\npin = T.ones(1).is_cuda\n",
            lines=[2],
            device="xpu",
            unsafe=True,
            fixed='import torch as T\npin = T.ones(1).device.type == "xpu"\n',
        ),
        Invalid(
            "from torch import cuda\nuse_amp = batch.is_cuda and cuda.is_available()\n",
            lines=[2],
            unsafe=True,
            fixed='from torch import cuda\nuse_amp = batch.device.type == "tpu" and cuda.is_available()\n',
        ),
        Invalid(
            "from torch.cuda import synchronize as sync\nif out.is_cuda:\n    sync()\n",
            lines=[2],
            device="auto",
            unsafe=True,
            fixed='from torch.cuda import synchronize as sync\nif out.device.type != "cpu":\n    sync()\n',
        ),
        Invalid(
            "import torch.cuda\nflags = [p.is_cuda for p in model.parameters()]\n",
            lines=[2],
            device="neuron",
            unsafe=True,
            fixed='import torch.cuda\nflags = [p.device.type == "neuron" for p in model.parameters()]\n',
        ),
        Invalid(
            "import torch\ndef f(x, y):\n    a = not x.is_cuda\n    b = x.is_cuda == y.is_cuda\n"
            "    return -x.is_cuda, (x + y).is_cuda.real\n",
            lines=[3, 4, 4, 5, 5],
            unsafe=True,
            fixed='import torch\ndef f(x, y):\n    a = x.device.type != "tpu"\n'
            '    b = (x.device.type == "tpu") == (y.device.type == "tpu")\n'
            '    return -(x.device.type == "tpu"), ((x + y).device.type == "tpu").real\n',
        ),
        Invalid(
            '"""Doc."""\nimport torch as T\n\ndef keep(x):\n    return not x.is_cuda\n',
            lines=[5],
            device="auto",
            unsafe=True,
            fixed='"""Doc."""\nimport torch as T\n\ndef keep(x):\n    return x.device.type == "cpu"\n',
        ),
        # dcgan: the check keeps several-GPU DataParallel from other devices; rewritten to the
        # target's type, it would send the target there (info, not fixed)
        Invalid(
            "import torch\nimport torch.nn as nn\nclass G(nn.Module):\n    def forward(self, x):\n"
            "        if x.is_cuda and self.ngpu > 1:\n            return nn.parallel.data_parallel(self.main, x, range(self.ngpu))\n"
            "        return self.main(x)\n",
            lines=[5],
            message="loses the CUDA-only library",
            unsafe=True,
        ),
        # On the CPU `is_cuda` is already False for every tensor: left as it is.
        Invalid("import torch\nx = torch.ones(2)\nassert x.is_cuda\n", lines=[3], device="cpu", unsafe=True),
        Invalid('import torch\nx = torch.ones(2)\nprint(f"{x.is_cuda}")\ndel x.is_cuda\n', lines=[3, 4], unsafe=True),
    ]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "is_cuda" or _is_own_attribute(node, self.ctx.parent):
            return
        if patterns.resolves_outside_torch_classes(self.ctx.qualified_names(node)):
            return
        flow = self.ctx.flow
        check = flow.in_check(self.ctx.ancestors, node) if flow is not None else None
        if (
            check is not None and check.guards_cuda_library
        ):  # dcgan: `if input.is_cuda and ngpu > 1: data_parallel(...)`
            self.report(node, severity=SKIPS_EXTRAS, consequence=f", so each {LOSES_EXTRAS}")
            return
        self.report(node, edit=self._edit(node), consequence="")

    def _edit(self, node: cst.Attribute) -> Edit | None:
        """`x.device.type == <the target's type>` in place of `x.is_cuda`."""
        ancestors = self.ctx.ancestors
        if placement.is_stored(node, ancestors) or placement.inside_fstring(ancestors):
            return None
        device_type = edits.target_device_type(self.ctx)
        if device_type is None:
            return None
        subject = cst.Attribute(cst.Attribute(node.value, cst.Name("device")), cst.Name("type"))
        spelled = placement.on_device_type(subject, device_type)
        if spelled is None:
            return None
        check = spelled.node
        assert isinstance(check, cst.Comparison)
        original: cst.BaseExpression = node
        replacement: cst.BaseExpression = edits.with_parentheses_of(node, check)
        parent = self.ctx.parent
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not) and not node.lpar:
            original, replacement = parent, edits.with_parentheses_of(parent, placement.negated(check))
        elif placement.needs_parentheses(node, parent):
            replacement = placement.parenthesized(replacement)
        title = f"is_cuda -> {cst.Module([]).code_for_node(check)}"
        return Edit(original, replacement, FixSafety.UNSAFE, title, spelled.imports, spelled.prelude)


def _is_own_attribute(node: cst.Attribute, parent: cst.CSTNode | None) -> bool:
    """`self.is_cuda` is a flag the class defines itself (tensors and modules have no such
    attribute), and `x.is_cuda = ...` defines one."""
    if isinstance(node.value, cst.Name) and node.value.value in ("self", "cls"):
        return True
    return isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and parent.target is node
