from __future__ import annotations

import libcst as cst

from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.rewrites.calls import block_without, removable_line
from portcheck.rewrites.edits import Edit
from portcheck.rule import INFO, OFF, Invalid, Rule, Valid

_MARKERS = frozenset(
    {
        "torch.compiler.cudagraph_mark_step_begin",
        "torch._inductor.cudagraph_mark_step_begin",
        "torch._inductor.cudagraph_trees.mark_step_begin",
    }
)


class CudagraphStepMarker(Rule):
    """## What it does
    Reports `torch.compiler.cudagraph_mark_step_begin()` and its private spellings
    `torch._inductor.cudagraph_mark_step_begin` and
    `torch._inductor.cudagraph_trees.mark_step_begin`.

    ## Why is this bad?
    The call tells CUDA-graph trees (torch.compile's "reduce-overhead" mode) that a new
    iteration starts, so the outputs of the previous one may be overwritten. Where
    torch.compile captures no CUDA graphs it only bumps a counter: it is harmless, but it
    marks code written around CUDA-graph semantics (outputs cloned before the next step, the
    mode chosen elsewhere) that the port should review together with PC801.

    ## Example
    ```python
    for batch in loader:
        torch.compiler.cudagraph_mark_step_begin()
        out = compiled(batch)
    ```

    ## Use instead
    ```python
    for batch in loader:
        out = compiled(batch)
    ```
    or keep the call where CUDA runs still compile with mode="reduce-overhead".

    ## Targets
    Info wherever the target data's `compile-modes` lacks "reduce-overhead" (every target but
    ROCm and XPU); off where the mode, and so the marker, has an effect.

    ## Fix safety
    Safe: a statement that is only the call, with no arguments, goes (`pass` stays where it
    was a block's only statement). The call does nothing but move a counter that CUDA-graph
    trees read, and the target compiles no CUDA graphs. A statement with a comment line
    above it, a call inside an expression, a bare reference and one-line blocks
    (`if x: mark()`) are left alone. No fix for `--device auto`: on a CUDA host the marker
    still matters wherever the file compiles with mode="reduce-overhead".
    """

    code = "PC803"
    name = "cudagraph-step-marker"
    message = "`{name}` only matters to CUDA graphs, which torch.compile does not capture on {targets}"
    hint = 'drop the call on {targets}, or keep it only where CUDA runs use mode="reduce-overhead"'
    severity = {
        name: OFF if "reduce-overhead" in t.compile_modes else INFO for name, t in target_data.all_targets().items()
    }
    fix_safety = FixSafety.SAFE
    triggers = (b"mark_step_begin",)
    watched_names = tuple(sorted(_MARKERS))

    VALID = [
        Valid("import torch\ntorch.compiler.cudagraph_mark_step_begin()\n", options={"targets": ["rocm", "xpu"]}),
        Valid("def step(torch):\n    torch.compiler.cudagraph_mark_step_begin()\n"),
        Valid("import torch_xla.core.xla_model as xm\nxm.mark_step()\n"),
        Valid("import torch\nout = torch.compile(model)(x).clone()\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nfor batch in loader:\n    torch.compiler.cudagraph_mark_step_begin()\n    out = step(batch)\n",
            lines=[3],
            message="cudagraph",
            fixed="import torch\nfor batch in loader:\n    out = step(batch)\n",
        ),
        Invalid(
            "import torch\nfor batch in loader:\n    torch.compiler.cudagraph_mark_step_begin()\n    out = step(batch)\n",
            lines=[3],
            device="auto",
        ),
        Invalid(
            "import torch as T\n\nT._inductor.cudagraph_mark_step_begin()\nT._inductor.cudagraph_mark_step_begin()\ny = 1\n",
            lines=[3, 4],
            device="cpu",
            fixed="import torch as T\n\ny = 1\n",
        ),
        Invalid("from torch import compiler\nmark = compiler.cudagraph_mark_step_begin\n", lines=[2]),
        Invalid(
            "from torch.compiler import cudagraph_mark_step_begin as new_step\n"
            "def run(xs):\n    for x in xs:\n        new_step()\n",
            lines=[4],
            device="neuron",
            fixed="from torch.compiler import cudagraph_mark_step_begin as new_step\n"
            "def run(xs):\n    for x in xs:\n        pass\n",
        ),
        Invalid(
            "import torch._inductor.cudagraph_trees\ntorch._inductor.cudagraph_trees.mark_step_begin()\n",
            lines=[2],
            device="xla",
            fixed="import torch._inductor.cudagraph_trees\n",
        ),
        Invalid(  # a comment above the call may be about what follows: kept
            "import torch\nfor b in data:\n    x = prep(b)\n\n    # new iteration\n"
            "    torch.compiler.cudagraph_mark_step_begin()\n    out = model(x)\n",
            lines=[6],
        ),
        Invalid(
            "import torch\nfor b in data:\n    x = prep(b)\n\n"
            "    torch.compiler.cudagraph_mark_step_begin()\n    out = model(x)\n",
            lines=[5],
            device="mps",
            fixed="import torch\nfor b in data:\n    x = prep(b)\n\n    out = model(x)\n",
        ),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if qualified_name in _MARKERS:
            where = "/".join(t for t in self.ctx.targets if self.severity[t] > OFF) or "the selected targets"
            self.report(node, name=qualified_name, targets=where, edit=self._edit(node))

    def _edit(self, node: cst.Name | cst.Attribute) -> Edit | None:
        """Remove the statements of this block that only call the marker; the block is the
        node replaced, so markers side by side go in one edit."""
        target = self.ctx.fix_target
        if not target.device_type or target.keeps_cuda_api or "reduce-overhead" in target.compile_modes:
            return None
        ancestors = self.ctx.ancestors
        if len(ancestors) < 4 or not isinstance(ancestors[-4], (cst.IndentedBlock, cst.Module)):
            return None  # not a statement of its own in a block (`if x: mark()`, an expression)
        call, expression, line, block = ancestors[-1], ancestors[-2], ancestors[-3], ancestors[-4]
        if not (isinstance(call, cst.Call) and call.func is node and isinstance(expression, cst.Expr)):
            return None
        if not removable_line(line, self._only_marks):
            return None
        return Edit(block, block_without(block, self._only_marks), FixSafety.SAFE, "CUDA-graph step marker removed")

    def _only_marks(self, line: cst.SimpleStatementLine) -> bool:
        statement = line.body[0]
        return (
            isinstance(statement, cst.Expr)
            and isinstance(statement.value, cst.Call)
            and not statement.value.args
            and bool(self.ctx.qualified_names(statement.value.func) & _MARKERS)
        )
