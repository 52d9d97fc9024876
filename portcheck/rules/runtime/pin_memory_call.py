from __future__ import annotations

import libcst as cst

from portcheck import flow, kwargs, patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import cuda_api, edits
from portcheck.rewrites.edits import Edit
from portcheck.rule import ERROR, INFO, OFF, FileContext, Invalid, Rule, Valid, per_target

_LOADER_PIN_MEMORY = (
    7  # DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory)
)
_LOADER_SEVERITY = per_target(OFF, cpu=INFO)


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
    memory for itself, so it is not reported for them. The DataLoader option is info on cpu:
    without an accelerator the loader warns and pins nothing, a harmless leftover (not
    reported where only a CUDA or accelerator check sets it).

    ## Fix safety
    Safe. For `--device cpu` the call goes (`batch.pin_memory()` becomes `batch`): there is
    nothing to pin for, and the data is the same. For `--device auto` it is pinned only where
    an accelerator is present: `(batch.pin_memory() if torch.accelerator.is_available() else
    batch)`, offered only when the receiver is a plain name or attribute (evaluating it twice
    must not matter). A call with arguments (the deprecated `device=`) is left to a person.
    The DataLoader option's `True` becomes `False` for `--device cpu` and
    `torch.accelerator.is_available()` for `--device auto` (pinned where it can be): the
    loader does what it did, without the warning.
    """

    code = "PC215"
    name = "pin-memory-call"
    message = "{subject} {effect}"
    hint = "pin only where an accelerator is present{how}"
    severity = per_target(OFF, cpu=ERROR)
    fix_safety = FixSafety.SAFE
    triggers = (b"pin_memory",)

    VALID = [
        Valid(
            "import torch\nloader = torch.utils.data.DataLoader(data, pin_memory=True)\n", options={"targets": ["tpu"]}
        ),
        # set only where CUDA is present: never on a CPU host
        Valid(
            "import torch\nkw = {'batch_size': 8}\nif torch.cuda.is_available():\n    kw.update(pin_memory=True)\n"
            "loader = torch.utils.data.DataLoader(data, **kw)\n"
            "other = torch.utils.data.DataLoader(data, pin_memory=torch.accelerator.is_available())\n"
        ),
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
        # DataLoader(pin_memory=True): harmless without an accelerator, but it warns; through dicts too
        Invalid(
            "import torch\n\ndef main(train_set):\n    train_kwargs = {'batch_size': 64}\n"
            "    cuda_kwargs = {'num_workers': 1, 'pin_memory': True, 'shuffle': True}\n"
            "    train_kwargs.update(cuda_kwargs)\n    return torch.utils.data.DataLoader(train_set, **train_kwargs)\n",
            lines=[5],
            device="cpu",
            message="DataLoader(pin_memory=True)",
            fixed="import torch\n\ndef main(train_set):\n    train_kwargs = {'batch_size': 64}\n"
            "    cuda_kwargs = {'num_workers': 1, 'pin_memory': False, 'shuffle': True}\n"
            "    train_kwargs.update(cuda_kwargs)\n    return torch.utils.data.DataLoader(train_set, **train_kwargs)\n",
        ),
        Invalid(
            "from torch.utils.data import DataLoader as DL\nloader = DL(data, 8, True, pin_memory=True)\n",
            lines=[2],
            device="auto",
            fixed="from torch.utils.data import DataLoader as DL\nimport torch\n"
            "loader = DL(data, 8, True, pin_memory=torch.accelerator.is_available())\n",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._loader_pinning: list[cst.BaseExpression] = []  # the `True` of each pin_memory option

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if names & flow.DATALOADERS:
            self._loader_pinning += _pin_memory_options(self.ctx, node)
            return
        if patterns.method_name(node) != "pin_memory" or names:
            return
        if cuda_api.runs_only_with_accelerator(self.ctx, [*self.ctx.ancestors, node]):
            return
        self.report(
            node,
            edit=self._edit(node),
            subject="`.pin_memory()`",
            effect="raises on a host without an accelerator",
            how=": `if torch.accelerator.is_available():`",
        )

    def leave_Module(self, node: cst.Module) -> None:
        """The loaders' options, now that every CUDA check of the module is known."""
        seen: set[int] = set()
        for value in self._loader_pinning:
            if id(value) in seen:
                continue  # one dict entry given to several loaders
            seen.add(id(value))
            chain = self.ctx.chain(value)
            if self._set_only_with_accelerator(chain, value):
                continue
            self.report(
                value,
                severity=_LOADER_SEVERITY,
                edit=self._loader_edit(value),
                subject="`DataLoader(pin_memory=True)`",
                effect="pins nothing on a host without an accelerator, and warns each time it starts",
                how=": `pin_memory=torch.accelerator.is_available()`",
            )

    def _set_only_with_accelerator(self, chain: tuple[cst.CSTNode, ...], value: cst.CSTNode) -> bool:
        if cuda_api.runs_only_with_accelerator(self.ctx, [*chain, value]):
            return True
        guards = self.ctx.flow
        return guards is not None and bool(guards.placement(chain, value).protected_by)

    def _loader_edit(self, value: cst.BaseExpression) -> Edit | None:
        target = self.ctx.fix_target
        if not target.runs_without_accelerator:
            return None
        if not target.accelerator_api:
            return Edit(value, value.with_changes(value="False"), FixSafety.SAFE, "pin_memory=False")
        torch = edits.torch_name(self.ctx)
        if torch is None:
            return None
        check = cst.parse_expression(f"{cst.Module([]).code_for_node(torch.node)}.accelerator.is_available()")
        return Edit(value, check, FixSafety.SAFE, "pinned only with an accelerator", torch.imports)

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


def _pin_memory_options(ctx: FileContext, call: cst.Call) -> list[cst.BaseExpression]:
    """The literal `True`s a DataLoader call may get as its pin_memory."""
    positional = patterns.positional(call, _LOADER_PIN_MEMORY)
    values = [positional.value] if positional is not None else kwargs.call_options(ctx, call).values("pin_memory")
    return [value for value in values if isinstance(value, cst.Name) and value.value == "True"]
