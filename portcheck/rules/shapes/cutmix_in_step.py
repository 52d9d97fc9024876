from __future__ import annotations

from functools import cached_property, partial

import libcst as cst

from portcheck import flow, patterns, project
from portcheck.rule import UNPLACED, Invalid, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY, StepRule, advice, defined_names

_MIXUPS = frozenset({"timm.data.Mixup", "timm.data.mixup.Mixup"})
_OPTIONAL = frozenset({"typing.Optional", "typing.Union"})


class CutmixInStep(StepRule):
    """## What it does
    Reports a call of timm's `Mixup` (`samples, targets = mixup_fn(samples, targets)`) in a
    step loop, or in a function called from one, where CutMix may be on: a `Mixup(...)` the
    module makes with a `cutmix_alpha` (timm's default is 0: MixUp alone) or `cutmix_minmax`,
    or a parameter annotated as one (`mixup_fn:
    Optional[Mixup]`, the training engine of DeiT, MAE, LeViT, XCiT and their descendants).

    ## Why is this bad?
    CutMix pastes a box of random size from one image into another at every step
    (`x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]` with new bounds each time), so
    each step slices the batch to a new shape: `torch.compile` with `dynamic=False`
    (TorchTPU's and TorchNeuron's default) recompiles until it reaches the recompile limit,
    torch_xla compiles a graph per box size, and Trainium needs every shape ahead of time.
    Older timm releases (0.3, 0.4) also make the mixed one-hot targets on `"cuda"` whatever
    the batch's device, which raises without CUDA.

    ## Example
    ```python
    def train_one_epoch(model, loader, optimizer, mixup_fn: Optional[Mixup] = None):
        for samples, targets in loader:
            samples, targets = mixup_fn(samples, targets)
    ```

    ## Use instead
    ```python
    # mix on the host, in the DataLoader's collate function (timm's FastCollateMixup), or
    # as a blend of whole images with a mask of fixed shape
    loader = DataLoader(dataset, batch_size=64, collate_fn=FastCollateMixup(...), drop_last=True)
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: where to mix (the collate function, the host) is the training recipe's
    choice.
    """

    code = "PC512"
    name = "cutmix-in-step"
    message = "`{name}(...)` runs timm's Mixup in {where}: CutMix slices a box of random size every step, so a compiled step recompiles per box"
    hint = "mix in the DataLoader's collate function (timm's FastCollateMixup) or with a mask of fixed shape{advice}"
    severity = RECOMPILE_SEVERITY
    triggers = (b"Mixup",)

    VALID = [
        # CutMix off (also timm's default): MixUp blends whole images, whose shape stays
        Valid(
            "import torch\nfrom timm.data import Mixup\nmixup_fn = Mixup(mixup_alpha=0.8, cutmix_alpha=0.0)\nmix = Mixup(0.4)\n"
            "for samples, targets in loader:\n    samples, targets = mixup_fn(samples, targets)\n    samples, targets = mix(samples, targets)\n"
            "    model(samples).backward()\n"
        ),
        # mixed once, outside any step
        Valid("import torch\nfrom timm.data.mixup import Mixup\nfn = Mixup(cutmix_alpha=1.0)\nx, y = fn(x, y)\n"),
        # given only MixUp
        Valid(
            "import torch\nfrom timm.data import Mixup\ndef main(model, loader):\n    fn = Mixup(mixup_alpha=0.8)\n"
            "    run(model, loader, fn)\ndef run(model, loader, mix):\n    for x, y in loader:\n"
            "        x, y = mix(x, y)\n        model(x).sum().backward()\n"
        ),
        # not timm's
        Valid(
            "import torch\nfrom mylib import Mixup\nfn = Mixup(cutmix_alpha=1.0)\nfor x, y in loader:\n"
            "    x, y = fn(x, y)\n    model(x).backward()\n"
        ),
        # `torch` and `Mixup` are parameters here
        Valid(
            "import torch.nn\ndef train(torch, Mixup, loader):\n    fn = Mixup(cutmix_alpha=1.0)\n    for x, y in loader:\n"
            "        x, y = fn(x, y)\n        torch.nn.functional.relu(x).sum().backward()\n"
        ),
        # shapes may change freely there
        Valid(
            "import torch\nfrom timm.data import Mixup\nfn = Mixup(cutmix_alpha=1.0)\nfor x, y in loader:\n"
            "    x, y = fn(x, y)\n    model(x).backward()\n",
            options={"targets": ["cpu", "mps"]},
        ),
    ]
    INVALID = [
        # DeiT's engine (also MAE's, LeViT's, XCiT's): the parameter's annotation says what it is
        Invalid(
            "from typing import Optional\nimport torch\nfrom timm.data import Mixup\n\n"
            "def train_one_epoch(model, criterion, data_loader, optimizer, mixup_fn: Optional[Mixup] = None):\n"
            "    for samples, targets in data_loader:\n        if mixup_fn is not None:\n"
            "            samples, targets = mixup_fn(samples, targets)\n"
            "        loss = criterion(model(samples), targets)\n        loss.backward()\n        optimizer.step()\n",
            lines=[8],
            message="`mixup_fn(...)` runs timm's Mixup in a loop over a DataLoader",
        ),
        Invalid(  # timm's train.py (PoolFormer's): the settings in a dict, the Mixup given to the epoch's function
            "import torch\nfrom timm.data import Mixup\ndef main(args, model, loader):\n"
            "    mixup_args = dict(mixup_alpha=args.mixup, cutmix_alpha=args.cutmix)\n    mixup_fn = Mixup(**mixup_args)\n"
            "    train_one_epoch(model, loader, mixup_fn=mixup_fn)\n"
            "def train_one_epoch(model, loader, mixup_fn=None):\n    for input, target in loader:\n"
            "        if mixup_fn is not None:\n            input, target = mixup_fn(input, target)\n"
            "        model(input).sum().backward()\n",
            lines=[10],
        ),
        Invalid(
            "import torch as T\nfrom torch.nn import functional as F\nfrom timm.data.mixup import Mixup as M\n"
            "mix = M(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=10)\n"
            "for x, y in loader:\n    x, y = mix(x, y)\n    F.cross_entropy(model(x), y).backward()\n",
            lines=[6],
        ),
        Invalid(
            "import torch\nfrom torch import nn\nimport torch.cuda\nimport timm.data\n"
            "def run(model, loader, opt, cutmix):\n    mixer = timm.data.Mixup(cutmix_alpha=cutmix)\n"
            "    for x, y in loader:\n        x, y = mixer(x, y)\n        nn.functional.mse_loss(model(x), y).backward()\n"
            "        opt.step()\n",
            lines=[8],
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is not cst.Name or not self._holds_mixup(node.func):
            return
        where = self.step_context(self.ctx.ancestors)
        if where is not None:
            self.report_in_step(node, where, name=node.func.value, advice=advice(self.ctx.targets))

    def _holds_mixup(self, name: cst.Name) -> bool:
        """A parameter annotated as timm's Mixup (also `Optional[Mixup]`), or one the module's
        calls give a Mixup (timm's train.py: `train_one_epoch(..., mixup_fn=mixup_fn)`), or a
        name bound to a `Mixup(...)` made with CutMix possibly on."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        function = module_flow.resolver.parameter_of(name)
        if function is None:
            return self._bound_to_mixup(name)
        params = (*function.params.params, *function.params.kwonly_params)
        param = next((p for p in params if p.name.value == name.value), None)
        if param is not None and param.annotation is not None:
            return self._names_mixup(param.annotation.annotation)
        return any(
            type(value) is cst.Name and module_flow.in_scope(scope, partial(self._bound_to_mixup, value))
            for value, scope in module_flow.passed_arguments(function, name.value) or ()
        )

    def _bound_to_mixup(self, name: cst.Name) -> bool:
        """Bound to a `Mixup(...)` with CutMix possibly on, or to what a function of another
        module returns as one (Swin's `..., mixup_fn = build_loader(config)`)."""
        if any(self._makes_mixup(value) for value in self.ctx.assigned_values(name)):
            return True
        known = self.ctx.project.mixup_returns
        mixed = self.ctx.flow.resolver.values_and_unpacking(name) if known and self.ctx.flow is not None else None
        return mixed is not None and any(
            (self.ctx.module.absolute(callee), str(index)) in known
            for call, index in mixed[1]
            if type(call) is cst.Call
            for callee in self.ctx.qualified_names(call.func)
        )

    def _makes_mixup(self, value: cst.BaseExpression) -> bool:
        return (
            type(value) is cst.Call and bool(self.ctx.qualified_names(value.func) & _MIXUPS) and not _cutmix_off(value)
        )

    def visit_Return(self, node: cst.Return) -> None:
        """In the first pass, note a module-level function that returns a Mixup (alone or in a
        tuple): the module that calls it may run it in its step."""
        module_flow = self.ctx.flow
        function = flow.enclosing_function(self.ctx.ancestors)
        if self.ctx.project.complete or module_flow is None or function is None or node.value is None:
            return
        if module_flow.module_functions().get(function.name.value) is not function:
            return
        value = node.value
        items = [(str(i), e.value) for i, e in enumerate(value.elements)] if type(value) is cst.Tuple else [("", value)]
        for index, item in items:
            if self._makes_mixup(item) or (type(item) is cst.Name and self._bound_to_mixup(item)):
                for name in defined_names(self.ctx, function):  # also as its package re-exports it
                    self.record(project.MIXUP_RETURN, name, UNPLACED, index=index)

    @cached_property
    def _retyped(self) -> bool:
        """In the second pass, the module's own step loops are judged again where another
        module's function returns a Mixup, as where other modules pass tensors."""
        known = self.ctx.project
        return known.complete and bool(known.mixup_returns or known.tensor_parameters_in(self.ctx.module.name))

    @classmethod
    def in_second_pass(cls, known: project.Project, path: str, module: str) -> bool:
        """Also over the files that may call a function returning a Mixup (its name narrows them)."""
        return bool(known.mixup_returns) or super().in_second_pass(known, path, module)

    @classmethod
    def project_triggers(cls, known: project.Project) -> tuple[bytes, ...]:
        """Also the names of the functions that return a Mixup, where another file calls one."""
        returned = {name.rpartition(".")[2].encode() for name, _ in known.mixup_returns}
        return (*super().project_triggers(known), *sorted(returned))

    def _names_mixup(self, annotation: cst.BaseExpression) -> bool:
        if type(annotation) is cst.Subscript and self.ctx.qualified_names(annotation.value) & _OPTIONAL:
            return any(
                type(element.slice) is cst.Index and self._names_mixup(element.slice.value)
                for element in annotation.slice
            )
        return bool(self.ctx.qualified_names(annotation) & _MIXUPS)


def _cutmix_off(call: cst.Call) -> bool:
    """`Mixup(mixup_alpha=0.8)` or `cutmix_alpha=0.`, with no `cutmix_minmax` (timm's defaults:
    CutMix off): MixUp alone, which blends whole images."""
    if any(arg.star == "**" for arg in call.args):
        return False  # `Mixup(**mixup_args)`: the settings may turn it on
    alpha = patterns.argument(call, 1, "cutmix_alpha")
    minmax = patterns.argument(call, 2, "cutmix_minmax")
    off = alpha is None or (type(alpha.value) in (cst.Integer, cst.Float) and float(alpha.value.value) == 0)
    return off and (minmax is None or (type(minmax.value) is cst.Name and minmax.value.value == "None"))
