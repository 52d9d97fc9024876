from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, OFF, WARNING, FileContext, Invalid, Rule, Valid

_FLOAT64_NAMES = ("torch.float64", "torch.double", "torch.DoubleTensor", "torch.cdouble", "torch.complex128")
_SEVERITY_BY_SUPPORT = {"unsupported": ERROR, "slow": WARNING, "native": OFF}


class Float64OnTarget(Rule):
    """## What it does
    Reports float64 tensors: `torch.float64` / `torch.double` (and complex128),
    `.double()` calls, `torch.DoubleTensor`, and `dtype="float64"` strings.

    ## Why is this bad?
    MPS has no float64 at all: "Cannot convert a MPS Tensor to float64 dtype as the MPS
    framework doesn't support float64". TPUs and Trainium emulate it slowly, and client Intel
    GPUs raise "Required aspect fp64 is not supported" unless emulation is built in. float64
    is rarely needed for training.

    ## Example
    ```python
    weights = torch.ones(10, dtype=torch.float64)
    probs = logits.double().softmax(-1)
    ```

    ## Use instead
    ```python
    weights = torch.ones(10, dtype=torch.float32)
    probs = logits.float().softmax(-1)
    ```
    or keep float64 math on the CPU where it is really needed.

    ## Targets
    An error on mps; a warning on tpu, neuron, xla, xpu, npu and hpu; off on cpu and rocm.

    ## Fix safety
    No automatic fix: changing a dtype changes numerics.
    """

    code = "PC307"
    name = "float64-on-target"
    message = "{what} creates float64 tensors, {support}"
    hint = "use float32 (or keep the float64 computation on the CPU)"
    severity = {name: _SEVERITY_BY_SUPPORT[t.float64] for name, t in target_data.all_targets().items()}
    triggers = (b"float64", b"double", b"Double", b"complex128")
    watched_names = _FLOAT64_NAMES

    VALID = [
        Valid("import torch\nx = torch.ones(3, dtype=torch.float32)\n"),
        Valid("import numpy as np\nx = np.zeros(3, dtype=np.float64)\n"),
        Valid("def f(torch):\n    return torch.float64\n"),
        Valid("import torch\nx = torch.ones(3).double()\n", options={"targets": ["cpu", "rocm"]}),
        Valid("import torch\nx = 'double'\n"),
        Valid("import torch\nif x.dtype == torch.float64 or x.dtype in (torch.double, torch.half):\n    pass\n"),
        Valid("import torch\nstep = torch.zeros((), device='cpu', dtype=torch.float64)\n"),
    ]
    INVALID = [
        Invalid("import torch\nx = torch.ones(3, dtype=torch.float64)\n", lines=[2], options={"targets": ["mps"]}),
        Invalid("import torch as T\ny = T.randn(2).double()\n", lines=[2]),
        Invalid("from torch import double\nz = torch.zeros(1, dtype=double)\n", lines=[2]),
        Invalid("from torch import float64 as f64\nimport torch.cuda\nw = torch.empty(2, dtype=f64)\n", lines=[3]),
        Invalid(
            "from torch.cuda import is_available as has_gpu\nimport torch\ny = torch.ones(1).double() if has_gpu() else None\n",
            lines=[3],
        ),
        Invalid(
            "import torch\ntorch.set_default_dtype(torch.double)\nx = torch.tensor([1.0], dtype='float64')\n",
            lines=[2, 3],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._on_cpu: set[int] = set()  # dtype arguments of calls that say device="cpu"

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if id(node) not in self._on_cpu and not _in_comparison(self.ctx.ancestors):
            self._report(node, f"`{qualified_name}`")

    def visit_Call(self, node: cst.Call) -> None:
        if patterns.method_name(node) == "double" and not node.args:
            if not self.ctx.qualified_names(node.func):
                self._report(node, "`.double()`")
        dtype = patterns.keyword(node, "dtype")
        if dtype is None:
            return
        device = patterns.keyword(node, "device")
        if device is not None and patterns.string_value(device.value) == "cpu":
            self._on_cpu.add(id(dtype.value))
        elif patterns.string_value(dtype.value) in ("float64", "double", "torch.float64"):
            self._report(dtype.value, 'dtype="float64"')

    def _report(self, node: cst.CSTNode, what: str) -> None:
        self.report(node, what=what, support=_support_text(self.ctx.targets))


def _in_comparison(ancestors: Sequence[cst.CSTNode]) -> bool:
    """A dtype being tested (`x.dtype == torch.float64`, `dt in (torch.float64, ...)`) creates nothing."""
    for ancestor in reversed(ancestors):
        if isinstance(ancestor, (cst.Comparison, cst.ComparisonTarget)):
            return True
        if not isinstance(ancestor, (cst.Element, cst.Tuple, cst.List, cst.Set)):
            return False
    return False


def _support_text(selected: tuple[str, ...]) -> str:
    unsupported = [t for t in selected if target_data.get(t).float64 == "unsupported"]
    slow = [t for t in selected if target_data.get(t).float64 == "slow"]
    parts = []
    if unsupported:
        parts.append(f"which {'/'.join(unsupported)} cannot create")
    if slow:
        parts.append(f"which {'/'.join(slow)} emulate slowly")
    return " and ".join(parts) or "which the target does not need"
