from __future__ import annotations

from functools import cached_property, partial

import libcst as cst

from portcheck import patterns
from portcheck.flow import Home
from portcheck.resolve import Scope
from portcheck.rule import ERROR, OFF, WARNING, FileContext, Invalid, Rule, Valid, per_target

_DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        # MMCV 1.x's subclass (OpenMMLab's tools/test.py: `MMDataParallel(model, device_ids=[0])`)
        "mmcv.parallel.MMDataParallel",
        "mmcv.parallel.data_parallel.MMDataParallel",
    }
)
# An input left in host memory raises beside a model on the device; on the CPU both are there.
_HOST_INPUT = per_target(ERROR, rocm=OFF, cpu=OFF)


class DataParallel(Rule):
    """## What it does
    Reports `torch.nn.DataParallel(model)`, also MMCV's subclass `MMDataParallel(model,
    device_ids=[0])` (OpenMMLab 1.x tools) and the module's own subclasses (yolact's
    `CustomDataParallel`); and a call of the wrapped model (also where a
    function is given it) on an input the program leaves in host memory (TSM's
    `output = model(input_var)`, the batch never moved), which only DataParallel's scatter
    put on the GPU.

    ## Why is this bad?
    DataParallel replicates a module over the visible CUDA GPUs of one process. Without CUDA it
    quietly runs the module on a single device, so a multi-device job silently uses one; it is
    also slower than DistributedDataParallel on CUDA and PyTorch recommends against it.
    Its scatter also moves each input to the first GPU: code that never moves its batches
    relies on that, and without CUDA (or without DataParallel) they stay in host memory while
    the model is on the device, and the call raises.

    ## Example
    ```python
    model = torch.nn.DataParallel(model)
    ```

    ## Use instead
    One process per device with DistributedDataParallel (or FSDP2), launched by `torchrun`:
    ```python
    model = torch.nn.parallel.DistributedDataParallel(model.to(device))
    ```

    ## Targets
    A warning on every target but ROCm; info under a CUDA check (`if torch.cuda.device_count()
    > 1: model = nn.DataParallel(model)`), which keeps it on CUDA: the check is the finding.
    An input left in host memory is an error on every target but ROCm and the CPU.

    ## Fix safety
    No automatic fix. Where DataParallel finds no CUDA GPU it just calls the module, but
    unwrapping still changes the program: code reaches the model through `model.module`, and
    checkpoints hold `module.`-prefixed state_dict keys. DistributedDataParallel, the real
    replacement, changes how the program is launched (one process per device).
    """

    code = "PC406"
    name = "data-parallel"
    message = "DataParallel only parallelises over CUDA GPUs; elsewhere it {effect}"
    hint = "use DistributedDataParallel or FSDP with one process per device"
    severity = per_target(WARNING, rocm=OFF)
    triggers = (b"DataParallel",)
    cuda_only = True

    VALID = [
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model)\n"),
        Valid("def wrap(torch, m):\n    return torch.nn.DataParallel(m)\n"),
        Valid("class DataParallel:\n    pass\nm = DataParallel()\n"),
    ]
    INVALID = [
        Invalid(  # yolov5: several GPUs only
            "import torch\nif torch.cuda.device_count() > 1:\n    model = torch.nn.DataParallel(model)\n",
            lines=[3],
            message="reached only under a CUDA check",
        ),
        Invalid("import torch\nmodel = torch.nn.DataParallel(model)\n", lines=[2]),
        Invalid(  # TSM: the batch is never moved; DataParallel's scatter put it on the GPU
            "import torch\ndef main(args):\n    model = torch.nn.DataParallel(build(args), device_ids=args.gpus).cuda()\n"
            "    train(loader, model)\ndef train(loader, model):\n    for i, (input, target) in enumerate(loader):\n"
            "        target = target.cuda()\n        output = model(torch.autograd.Variable(input))\n"
            "        loss = output.sum()\n",
            lines=[3, 8],
        ),
        Invalid(  # the loop moves the batch itself: only the wrap
            "import torch\nmodel = torch.nn.DataParallel(net).cuda()\nfor x, y in loader:\n"
            "    x, y = x.cuda(), y.cuda()\n    out = model(x)\n",
            lines=[2],
            message="runs on one device",
        ),
        Invalid("import torch as T\nmodel = T.nn.DataParallel(model, device_ids=[0, 1])\n", lines=[2]),
        Invalid("from torch import nn\nmodel = nn.DataParallel(model)\n", lines=[2]),
        Invalid(  # XCiT's detection tools (the OpenMMLab 1.x template)
            "import torch\nfrom mmcv.parallel import MMDataParallel\nmodel = MMDataParallel(model, device_ids=[0])\n",
            lines=[3],
        ),
        Invalid("from torch.nn.parallel import DataParallel as DP\nimport torch.cuda\nmodel = DP(model)\n", lines=[3]),
        Invalid(  # yolact: its own subclass, which scatters its batches itself
            "import torch.nn as nn\nclass CustomDataParallel(nn.DataParallel):\n    def scatter(self, inputs, kwargs, ids):\n"
            "        return inputs, kwargs\nnet = CustomDataParallel(NetLoss(net, criterion))\n",
            lines=[5],
        ),
        Invalid("import torch.nn\nif n > 1:\n    model = torch.nn.parallel.DataParallel(model)\n", lines=[3]),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._runs: list[tuple[cst.Call, tuple[cst.CSTNode, ...], Scope]] = []  # calls of a name, judged at the end

    def visit_Call(self, node: cst.Call) -> None:
        if self._makes_data_parallel(node):
            self.report(node, effect="runs on one device")
        elif isinstance(node.func, cst.Name) and node.args and self.ctx.flow is not None:
            self._runs.append((node, tuple(self.ctx.ancestors), self.ctx.flow.scope))

    def leave_Module(self, node: cst.Module) -> None:
        """The calls of a wrapped model on an input in host memory, once every call that passes
        the model to a function is known."""
        module_flow = self.ctx.flow
        for call, ancestors, scope in self._runs if module_flow is not None else ():
            left = module_flow.as_walked(ancestors, scope, partial(self._host_input, call))
            if left is not None:
                effect = f"moves no input: `{cst.Module([]).code_for_node(left)}` stays in host memory for `{call.func.value}(...)`"  # type: ignore[attr-defined]
                self.reports.append(
                    self.report_here(call, severity=_HOST_INPUT, chain=(*ancestors, call), effect=effect)
                )

    def _host_input(self, call: cst.Call) -> cst.BaseExpression | None:
        """The first input of a call of a DataParallel-wrapped model that lies in host memory."""
        assert isinstance(call.func, cst.Name) and self.ctx.flow is not None
        if not self._wrapped(call.func):
            return None
        given = (arg.value for arg in call.args if arg.keyword is None and not arg.star)
        return next((value for value in given if self.ctx.flow.home(value) is Home.HOST), None)

    def _wrapped(self, name: cst.Name) -> bool:
        """Whether the name holds a DataParallel: bound to one (`.cuda()` after it too), or a
        parameter every call of whose function passes one."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        if self.ctx.assigned_values(name):
            return self._bound_to_data_parallel(name)
        function = module_flow.resolver.parameter_of(name)
        passed = module_flow.passed_arguments(function, name.value) if function is not None else None
        return bool(passed) and all(
            isinstance(arg, cst.Name) and module_flow.in_scope(scope, partial(self._bound_to_data_parallel, arg))
            for arg, scope in passed  # type: ignore[union-attr]
        )

    def _bound_to_data_parallel(self, name: cst.Name) -> bool:
        return any(self._is_data_parallel(value) for value in self.ctx.assigned_values(name))

    def _is_data_parallel(self, value: cst.BaseExpression) -> bool:
        # `DataParallel(m).cuda()` is still it; not a subclass, whose scatter is its own
        value = patterns.unchained(value)
        return isinstance(value, cst.Call) and bool(self.ctx.qualified_names(value.func) & _DATA_PARALLEL)

    def _makes_data_parallel(self, call: cst.Call) -> bool:
        """`DataParallel(...)`, or a subclass of it the module defines (yolact's
        `CustomDataParallel(NetLoss(net, criterion))`)."""
        if self.ctx.qualified_names(call.func) & _DATA_PARALLEL:
            return True
        return isinstance(call.func, cst.Name) and call.func.value in self._subclasses

    @cached_property
    def _subclasses(self) -> frozenset[str]:
        """The names of the module's top-level classes that subclass DataParallel."""
        module = self.ctx.ancestors[0]
        assert isinstance(module, cst.Module)
        return frozenset(
            each.name.value
            for each in module.body
            if isinstance(each, cst.ClassDef)
            and any(self.ctx.qualified_names(base.value) & _DATA_PARALLEL for base in each.bases)
        )
