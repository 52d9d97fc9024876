from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid
from portcheck.rules.runtime.cuda_default_tensor_type import sets_default_type
from portcheck.targets import api
from portcheck.walk import descendants


class CudaLegacyTensorType(CudaApiRule):
    """## What it does
    Reports the legacy CUDA tensor and storage types: `torch.cuda.FloatTensor`,
    `torch.cuda.LongTensor`, `torch.cuda.HalfTensor`, `torch.cuda.FloatStorage` and the rest.
    Given to `torch.set_default_tensor_type(...)`, they are cuda-default-tensor-type's (PC216).
    Also a test of `x.type()` against one's name (`x.type() == "torch.cuda.HalfTensor"`),
    and each `x.type(Tensor)` where `Tensor` is bound to one (PyTorch-GAN's `Tensor =
    torch.cuda.FloatTensor if cuda else torch.FloatTensor`): each such call is where the data
    moves to the GPU, and each needs its own `.to(device)`.

    ## Why is this bad?
    Without CUDA, constructing one raises `TypeError: type torch.cuda.FloatTensor not available`,
    and `isinstance(x, torch.cuda.FloatTensor)` is always False. Old code also writes
    `dtype = torch.cuda.FloatTensor if cuda else torch.FloatTensor`: without CUDA every
    `imgs.type(dtype)` then leaves the batch in host memory, and no legacy type names the
    target's device, so rebinding the name cannot move it there.

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
        Valid("import torch\nTensor = torch.FloatTensor\nreal = imgs.type(Tensor)\nkind = imgs.type()\n"),
        Valid("import torch\nif x.type() == 'torch.FloatTensor':\n    x = x.half()\nok = x.type() == name\n"),
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
        # WaveGlow: the half-precision path asks for the CUDA type by name
        Invalid(
            "import torch\ndef infer(self, spect):\n    if spect.type() == 'torch.cuda.HalfTensor':\n"
            "        spect = spect.half()\n    return spect\n",
            lines=[3],
            message="is never true",
        ),
        # PyTorch-GAN: the binding, and each `.type(Tensor)` that moves a batch with it
        Invalid(
            "import torch\ncuda = torch.cuda.is_available()\n"
            "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
            "for imgs, _ in loader:\n    real = imgs.type(Tensor)\n    z = Tensor(imgs.shape[0], 100).normal_()\n",
            lines=[3, 5],
        ),
        Invalid(
            "from torch.cuda import LongTensor\nLT = LongTensor\nlabels = labels.type(LT)\n",
            lines=[2, 3],
            message="raises TypeError",
        ),
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

    def visit_Call(self, node: cst.Call) -> None:
        """`x.type(Tensor)` where `Tensor` is bound to a legacy CUDA type."""
        if patterns.method_name(node) != "type" or len(node.args) != 1 or type(node.args[0].value) is not cst.Name:
            return
        alias = node.args[0].value
        values = self.ctx.assigned_values(alias)
        legacy = next(filter(None, map(self._legacy_type, values)), None)
        if legacy is None:
            return
        name, entry = legacy
        fallback = any(type(value) is cst.IfExp for value in values)
        effect = (
            f"leaves the tensor in host memory (`{alias.value}` is `{name}` only where CUDA is present)"
            if fallback
            else entry.off_cuda.replace(entry.name, name)
        )
        moved = cst.Module([]).code_for_node(node)
        self.report(
            node, severity=self.severities(alias, entry), hint="move it with .to(device)", name=moved, effect=effect
        )

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """`x.type() == "torch.cuda.HalfTensor"`: the legacy type by its name."""
        named = legacy_type_test(node)
        if named is None:
            return
        match = api.lookup(named)
        assert match is not None
        test = cst.Module([]).code_for_node(node)
        self.report(
            node,
            severity=self.severities(node, match[1]),
            hint="compare x.dtype (and x.device.type) instead",
            name=test if len(test) <= 60 else test[:57] + "...",
            effect=f"is never true: `.type()` returns `{named}` only for a tensor on a CUDA device",
        )

    def _legacy_type(self, value: cst.BaseExpression) -> tuple[str, api.ApiEntry] | None:
        """The legacy CUDA type a bound value is or may be (`torch.cuda.FloatTensor if cuda else
        torch.FloatTensor`), with its table entry."""
        for node in (value, *descendants(value)):
            if type(node) not in (cst.Name, cst.Attribute):
                continue
            for qualified in self.ctx.qualified_names(node):
                match = api.lookup(qualified)
                if match is not None and match[1].rule == self.code and match[0] == qualified:
                    return match
        return None


def legacy_type_test(test: cst.Comparison) -> str | None:
    """The legacy CUDA type a comparison asks `x.type()` for by name (WaveGlow's `if z.type() ==
    'torch.cuda.HalfTensor':`), None for any other comparison."""
    if len(test.comparisons) != 1 or type(test.comparisons[0].operator) not in (cst.Equal, cst.NotEqual):
        return None
    for asked, named in ((test.left, test.comparisons[0].comparator), (test.comparisons[0].comparator, test.left)):
        value = patterns.string_value(named)
        if value is None or type(asked) is not cst.Call or asked.args or patterns.method_name(asked) != "type":
            continue
        match = api.lookup(value)
        if match is not None and match[1].rule == CudaLegacyTensorType.code:
            return value
    return None
