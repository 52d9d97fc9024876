from __future__ import annotations

import libcst as cst

from portcheck.rule import Invalid, Valid
from portcheck.rules.shapes import SYNC_SEVERITY, TensorRule, in_forward, tests_tensor_value

_KINDS = {cst.If: "`if`", cst.While: "`while`", cst.IfExp: "conditional expression", cst.Assert: "`assert`"}


class TensorDependentControlFlow(TensorRule):
    """## What it does
    Reports `if`, `while`, conditional-expression and `assert` tests in a module's `forward`
    that depend on tensor values: `mask.any()`, `x.all()`, `t.item()`, comparisons of
    reductions (`x.sum() > 0`, `x.max() < t`), `torch.any` / `torch.all` / `torch.equal` /
    `torch.is_nonzero`, `bool(t.max())`, or a name bound once to one of those.

    Shape and Python-value checks are static under tracing and are not reported:
    `if self.training:`, `x.dim() == 3`, `x.shape[0] > 1`, `x.size(1)`, `len(x)`,
    `x is None`, `isinstance(...)`.

    ## Why is this bad?
    Python needs a real bool, so the device must finish and copy the value to the host. Dynamo
    breaks the graph ("generic_jump TensorVariable()", even with capture_scalar_outputs), XLA
    compiles one graph per combination of branches, and Trainium's ahead-of-time compiler
    cannot follow the branch at all.

    ## Example
    ```python
    def forward(self, x):
        if (x < 0).any():
            x = x.clamp(min=0)
        return x
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return torch.where(x < 0, 0, x)  # or torch.cond(pred, true_fn, false_fn, (x,))
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; info elsewhere (a host sync).

    ## Fix safety
    No automatic fix: both branches must be rewritten as tensor operations.
    """

    code = "PC504"
    name = "tensor-dependent-control-flow"
    message = "{kind} in forward() depends on tensor values: a host sync and a graph break"
    hint = (
        "compute both branches and select with torch.where, or use torch.cond(pred, true_fn, false_fn, (x,)); "
        "move input checks out of forward"
    )
    severity = SYNC_SEVERITY
    triggers = (b"forward",)

    VALID = [
        Valid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, mask=None):\n"
            "        if self.training and mask is not None:\n            x = x * mask\n"
            "        if x.dim() == 3 or x.shape[0] > 1 or x.size(1) > 2 or len(x) > 4:\n            x = x[0]\n"
            "        assert isinstance(x, torch.Tensor)\n        return x\n"
        ),
        Valid("import torch\ndef check(x):\n    if x.sum() > 0:\n        return x\n"),
        Valid(
            "import numpy as np\nimport torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x if np.any(self.flags) else -x\n"
        ),
        Valid("class M:\n    def forward(self, torch, x):\n        if torch.any(x):\n            return x\n"),
        Valid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, xs):\n"
            "        if any(x is None for x in xs):\n            return None\n        return xs\n"
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if (x < 0).any():\n"
            "            x = x.clamp(min=0)\n        return x\n",
            lines=[4],
            message="`if` in forward()",
        ),
        Invalid(
            "import torch as T\nclass M(T.nn.Module):\n    def forward(self, x):\n"
            "        while x.abs().max() > 1:\n            x = x / 2\n        return x\n",
            lines=[4],
        ),
        Invalid(
            "from torch import equal\nclass M:\n    def forward(self, a, b):\n        return a if equal(a, b) else b\n",
            lines=[4],
        ),
        Invalid(
            "from torch.nn import Module as Base\nimport torch.nn\nclass M(Base):\n    def forward(self, x):\n"
            "        has_nan = torch.isnan(x).any()\n        assert not has_nan\n"
            "        if bool(x.sum()) and x.item() != 0:\n            pass\n        return x\n",
            lines=[6, 7],
        ),
    ]

    def visit_If(self, node: cst.If) -> None:
        self._check(node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._check(node)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._check(node)

    def _check(self, node: cst.If | cst.While | cst.IfExp | cst.Assert) -> None:
        if in_forward(self.ctx.ancestors) and tests_tensor_value(self.ctx, node.test):
            self.report(node.test, kind=_KINDS[type(node)])
