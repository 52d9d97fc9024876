from __future__ import annotations

import libcst as cst

from portcheck import targets as target_data
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
    No automatic fix yet.
    """

    code = "PC803"
    name = "cudagraph-step-marker"
    message = "`{name}` only matters to CUDA graphs, which torch.compile does not capture on {targets}"
    hint = 'drop the call on {targets}, or keep it only where CUDA runs use mode="reduce-overhead"'
    severity = {
        name: OFF if "reduce-overhead" in t.compile_modes else INFO for name, t in target_data.all_targets().items()
    }
    triggers = (b"mark_step_begin",)
    watched_names = tuple(sorted(_MARKERS))

    VALID = [
        Valid("import torch\ntorch.compiler.cudagraph_mark_step_begin()\n", options={"targets": ["rocm", "xpu"]}),
        Valid("def step(torch):\n    torch.compiler.cudagraph_mark_step_begin()\n"),
        Valid("import torch_xla.core.xla_model as xm\nxm.mark_step()\n"),
        Valid("import torch\nout = torch.compile(model)(x).clone()\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.compiler.cudagraph_mark_step_begin()\n", lines=[2], message="cudagraph"),
        Invalid("import torch as T\nT._inductor.cudagraph_mark_step_begin()\n", lines=[2]),
        Invalid("from torch import compiler\nmark = compiler.cudagraph_mark_step_begin\n", lines=[2]),
        Invalid(
            "from torch.compiler import cudagraph_mark_step_begin as new_step\nnew_step()\n",
            lines=[2],
        ),
        Invalid(
            "import torch._inductor.cudagraph_trees\ntorch._inductor.cudagraph_trees.mark_step_begin()\n", lines=[2]
        ),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if qualified_name in _MARKERS:
            where = "/".join(t for t in self.ctx.targets if self.severity[t] > OFF) or "the selected targets"
            self.report(node, name=qualified_name, targets=where)
