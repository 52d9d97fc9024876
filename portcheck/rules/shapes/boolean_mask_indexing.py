from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck.rule import Invalid, Valid
from portcheck.rules.shapes import SYNC_SEVERITY, TensorRule, advice, is_bool_mask, tensor_method

_READ = "boolean-mask indexing returns as many elements as the mask has True values"
_WRITE = "assigning a tensor through a boolean mask needs the positions of its True values"
_SCALAR_METHODS = frozenset({"item", "size", "dim", "numel"})
_SCALAR_BUILTINS = frozenset({"float", "int", "bool", "abs", "round", "len", "min", "max"})
_ZERO_DIM = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})


class BooleanMaskIndexing(TensorRule):
    """## What it does
    Reports indexing with a boolean mask, `x[mask]`, where the index is a comparison
    (`x[x > 0]`), a `~`, `&` or `|` combination of masks, a call that makes one (`.bool()`,
    `torch.isnan`, `logical_and`, `.any(dim)`...), or a name bound once to one of those.
    Assignments through a mask are reported when the assigned value is a tensor, and augmented
    assignments (`x[mask] += 1`) always; `x[mask] = 0` is a `masked_fill` and keeps the shape.

    ## Why is this bad?
    The result has as many elements as the mask has True values, which only the data knows.
    Dynamo breaks the graph ("Dynamic shape operator: aten.nonzero"), XLA syncs to the host and
    compiles one graph per count, and Trainium's compiler rejects the dynamic dimension.

    ## Example
    ```python
    loss = losses[valid].mean()
    x[mask] = y[mask]
    ```

    ## Use instead
    ```python
    loss = torch.where(valid, losses, 0).sum() / valid.sum().clamp(min=1)
    x = torch.where(mask, y, x)
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; info elsewhere (a host sync).

    ## Fix safety
    No automatic fix: the masked form changes what later code receives (a full-size tensor).
    """

    code = "PC502"
    name = "boolean-mask-indexing"
    message = "{problem}"
    hint = "keep the shape: {instead}{advice}"
    severity = SYNC_SEVERITY
    # The rule reports only in files that import torch, so "torch" is in every one of them.
    triggers = (b"torch",)

    VALID = [
        Valid("import torch\ny = x[idx]\nz = x[:, 1:3]\nw = x[0, None]\nv = x[..., i]\n"),
        Valid("import torch\nx[x < 0] = 0\nlogits[~valid] = -torch.finfo(logits.dtype).max\n"),
        Valid("import torch\nidx[idx >= p.shape[0]] = p.shape[0] - 1\nalpha[t < 0] = torch.tensor(1.0)\n"),
        Valid("def f(torch, x):\n    return x[torch.isnan(x)]\n"),
        Valid("import torch\nlabel = ('no', 'yes')[score > 0]\n"),
        Valid("import numpy as np\nsmall = arr[arr > 0]\n"),
    ]
    INVALID = [
        Invalid("import torch\npos = x[x > 0]\n", lines=[2], message="as many elements"),
        Invalid("import torch as T\nkeep = (s > 0.5) & (s < 0.9)\nboxes = boxes[keep]\n", lines=[3]),
        Invalid("from torch import isnan\nclean = x[~isnan(x)]\n", lines=[2]),
        Invalid("from torch.nn import functional as F\nvalid = m.bool()\ny = F.relu(x)[:, valid]\n", lines=[3]),
        Invalid("import torch.nn\ntokens[padding_mask.any(-1)] += 1\n", lines=[2]),
        Invalid("import torch\nx[x > 0] = y[x > 0]\n", lines=[2], message="assigning a tensor"),
        Invalid(
            "import torch\ny[top == i] = expert(x[top == i]).to(y.dtype)\n", lines=[2], message="assigning a tensor"
        ),
    ]

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, (cst.Tuple, cst.List, cst.Dict)):
            return  # a literal picked by a Python bool
        if not self._masked(node):
            return
        parent, ancestors = self.ctx.parent, self.ctx.ancestors
        if isinstance(parent, cst.AssignTarget) and len(ancestors) > 1 and isinstance(ancestors[-2], cst.Assign):
            if not self._is_tensor(ancestors[-2].value):
                return  # x[mask] = 0 is masked_fill: no dynamic shape
            problem, instead = _WRITE, "x = torch.where(mask, y, x)"
        elif self._in_reported_store([*ancestors, node]):
            return  # x[m] = f(y[m]): one finding, on the assignment
        else:
            problem, instead = _READ, "torch.where(mask, x, 0) or x.masked_fill(~mask, 0), then masked reductions"
        self.report(node, problem=problem, instead=instead, advice=advice(self.ctx.targets))

    def _masked(self, node: cst.Subscript) -> bool:
        return any(
            isinstance(element.slice, cst.Index) and is_bool_mask(self.ctx, element.slice.value)
            for element in node.slice
        )

    def _in_reported_store(self, chain: Sequence[cst.CSTNode]) -> bool:
        """Whether the last node of `chain` (its ancestors, then itself) is inside the value of
        an assignment through a mask that this rule reports."""
        for index in range(len(chain) - 2, -1, -1):
            statement = chain[index]
            if isinstance(statement, cst.Assign):
                return (
                    chain[index + 1] is statement.value
                    and self._is_tensor(statement.value)
                    and any(isinstance(t.target, cst.Subscript) and self._masked(t.target) for t in statement.targets)
                )
            if isinstance(statement, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False

    def _is_tensor(self, node: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether an assigned value may be a tensor of several elements. Numbers, constants,
        `finfo(...).min`, sizes (`x.shape[0]`, `x.size(1)`, `len(x)`), `.item()` and 0-d
        tensors such as `torch.tensor(1.0)` are not: those assignments are a masked_fill."""
        if isinstance(node, cst.Subscript):
            return not (isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape")
        if isinstance(node, cst.Call):
            return not self._scalar_call(node)
        if isinstance(node, cst.BinaryOperation):
            return self._is_tensor(node.left, depth) or self._is_tensor(node.right, depth)
        if isinstance(node, cst.UnaryOperation):
            return self._is_tensor(node.expression, depth)
        if isinstance(node, cst.Name) and depth < 3:
            bound = self.ctx.assigned_value(node)
            return bound is not None and self._is_tensor(bound, depth + 1)
        return False

    def _scalar_call(self, node: cst.Call) -> bool:
        if isinstance(node.func, cst.Name) and node.func.value in _SCALAR_BUILTINS:
            return not self.ctx.qualified_names(node.func)
        if tensor_method(self.ctx, node, _SCALAR_METHODS):
            return True
        return (
            bool(self.ctx.qualified_names(node.func) & _ZERO_DIM)
            and len(node.args) == 1
            and isinstance(node.args[0].value, (cst.Integer, cst.Float, cst.UnaryOperation))
        )
