import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import cuda_api, edits
from portcheck.rewrites.edits import Edit
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid, per_target


class PinMemoryCall(Rule):
    """## What it does
    Reports `tensor.pin_memory()`.

    ## Why is this bad?
    Pinned host memory only exists for an accelerator: on a host with none, torch 2.13 raises
    `RuntimeError: Cannot access accelerator device when none is available.` CUDA code pins
    every batch before `.to(device, non_blocking=True)`, so the data path is the first thing to
    break on a CPU-only machine (`DataLoader(pin_memory=True)` only warns).

    ## Example
    ```python
    x = batch.pin_memory().to(device, non_blocking=True)
    ```

    ## Use instead
    ```python
    if torch.accelerator.is_available():
        batch = batch.pin_memory()
    x = batch.to(device, non_blocking=True)
    ```

    ## Targets
    An error where the code must run without an accelerator (cpu); every accelerator pins
    memory for itself, so it is not reported for them.

    ## Fix safety
    Safe. For `--device cpu` the call goes (`batch.pin_memory()` becomes `batch`): there is
    nothing to pin for, and the data is the same. For `--device auto` it is pinned only where
    an accelerator is present: `(batch.pin_memory() if torch.accelerator.is_available() else
    batch)`, offered only when the receiver is a plain name or attribute (evaluating it twice
    must not matter). A call with arguments (the deprecated `device=`) is left to a person.
    """

    code = "PC215"
    name = "pin-memory-call"
    message = "`.pin_memory()` raises on a host without an accelerator"
    hint = "pin only where an accelerator is present: `if torch.accelerator.is_available():`"
    severity = per_target(OFF, cpu=ERROR)
    fix_safety = FixSafety.SAFE
    triggers = (b"pin_memory",)

    VALID = [
        Valid("import torch\nloader = torch.utils.data.DataLoader(data, pin_memory=True)\n"),
        Valid("import torch\nx = torch.ones(2).pin_memory()\n", options={"targets": ["tpu", "neuron"]}),
        Valid("def pin_memory(x):\n    return x\ny = pin_memory(3)\n"),
        Valid(
            "import torch\nif torch.accelerator.is_available():\n    x = x.pin_memory()\n"
            "y = z.pin_memory() if torch.cuda.is_available() else z\n"
        ),
        # `torch` is a parameter here: under auto the guard cannot name it, so no fix (see INVALID)
        Valid("def load(torch, batch):\n    return batch\n"),
    ]
    INVALID = [
        Invalid(
            "def load(batch, device):\n    return batch.pin_memory().to(device, non_blocking=True)\n",
            lines=[2],
            device="cpu",
            fixed="def load(batch, device):\n    return batch.to(device, non_blocking=True)\n",
        ),
        Invalid(
            "import torch as T\n\ndef load(batch, device):\n    return batch.pin_memory().to(device, non_blocking=True)\n",
            lines=[4],
            device="auto",
            fixed="import torch as T\n\ndef load(batch, device):\n"
            "    return (batch.pin_memory() if T.accelerator.is_available() else batch).to(device, non_blocking=True)\n",
        ),
        Invalid(
            "def load(batch):\n    x = batch['x'].pin_memory()\n    return x\n",
            lines=[2],
            device="cpu",
            fixed="def load(batch):\n    x = batch['x']\n    return x\n",
        ),
        # evaluated twice under auto: a subscript (or a call) is not offered
        Invalid("def load(batch):\n    return batch['x'].pin_memory()\n", lines=[2], device="auto"),
        Invalid("def load(t, d):\n    return t.pin_memory(d)\n", lines=[2], device="cpu"),
        Invalid(
            "import torch.utils.data\nfrom torch import nn\nfrom torch.utils.data import DataLoader as DL\n\n"
            "def batches(data):\n    for x in DL(data):\n        yield x.pin_memory()\n",
            lines=[7],
            device="auto",
            fixed="import torch.utils.data\nfrom torch import nn\nfrom torch.utils.data import DataLoader as DL\n\n"
            "def batches(data):\n    for x in DL(data):\n        yield (x.pin_memory() if torch.accelerator.is_available() else x)\n",
        ),
        Invalid("def load(torch, batch):\n    return batch.pin_memory()\n", lines=[2], device="auto"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if patterns.method_name(node) != "pin_memory" or self.ctx.qualified_names(node.func):
            return
        if cuda_api.runs_only_with_accelerator(self.ctx, [*self.ctx.ancestors, node]):
            return
        self.report(node, edit=self._edit(node))

    def _edit(self, node: cst.Call) -> Edit | None:
        target = self.ctx.fix_target
        if node.args or not target.runs_without_accelerator or not isinstance(node.func, cst.Attribute):
            return None
        receiver = node.func.value
        if not target.accelerator_api:  # no accelerator, ever: nothing to pin for
            return Edit(node, edits.with_parentheses_of(node, receiver), FixSafety.SAFE, "dropped .pin_memory()")
        torch = edits.torch_name(self.ctx)
        if torch is None or not cuda_api.pure(receiver):
            return None
        code = cst.Module([]).code_for_node
        guarded = cst.parse_expression(
            f"({code(node)} if {code(torch.node)}.accelerator.is_available() else {code(receiver)})"
        )
        return Edit(node, guarded, FixSafety.SAFE, "pinned only with an accelerator", torch.imports)
