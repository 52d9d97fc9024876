from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, OFF, FileContext, Invalid, Rule, Valid, per_target

_DEVICE_FIRST_ARGUMENT = frozenset({"torch.device", "torch.set_default_device", "torch.Generator"})
_OWNED_ELSEWHERE = patterns.AMP_DEVICE_CALLS | patterns.DEVICE_MESH_CALLS


class CudaDeviceString(Rule):
    """## What it does
    Reports `"cuda"`, `"cuda:N"` and `f"cuda:{i}"` where they are used as a device: in
    `torch.device(...)`, `.to(...)`, any `device=` keyword, `torch.set_default_device`, the
    default of a `device` parameter or `--device` option, an assignment to a name, attribute or
    dict key called `device`, and a string bound to a name that is later used as a device.

    ## Why is this bad?
    Without CUDA, `torch.zeros(3, device="cuda")` raises `AssertionError: Torch not compiled
    with CUDA enabled`. On TPU, Trainium and the others, every hard-coded `"cuda"` is a place
    the port must touch, and one that is missed fails at run time.

    ## Example
    ```python
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.zeros(3, device="cuda:0")
    ```

    ## Use instead
    One device, chosen once, used everywhere:
    ```python
    device = torch.accelerator.current_accelerator() or torch.device("cpu")
    x = torch.zeros(3, device=device)
    ```

    ## Targets
    An error on every target but ROCm, where `"cuda"` is the right spelling (HIP reuses it).
    On TPU prefer `"tpu"` without an index: a process owns exactly one TPU.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC101"
    name = "cuda-device-string"
    message = "{literal} hard-codes a CUDA device"
    hint = "{advice}"
    severity = per_target(ERROR, rocm=OFF)
    triggers = (b"cuda",)

    VALID = [
        Valid('import torch\nx = torch.zeros(3, device="cpu")\n'),
        Valid('print("running on cuda")\nstats = {"cuda": True, "name": "cuda:0"}\n'),
        Valid('import torch\nbackend = "cuda"\nprint(backend)\n'),
        Valid('cuda = "cuda"\nprint(cuda)\n'),
        Valid('def f(torch):\n    return torch.device("cuda")\n'),
        Valid('import torch as T\nwith T.amp.autocast(device_type="cuda"):\n    pass\n'),
        Valid('import torch\nx = torch.zeros(3, device="cuda_graph_pool")\n'),
        Valid('import torch\ndevice = torch.device("cuda")\n', options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid('import torch\nx = torch.zeros(3, device="cuda")\n', lines=[2]),
        Invalid('import torch as T\ndev = T.device("cuda:0")\n', lines=[2]),
        Invalid('from torch import cuda\ndevice = "cuda" if cuda.is_available() else "cpu"\n', lines=[2]),
        Invalid(
            'import torch\nfrom torch.cuda import is_available as has_cuda\n'
            'DEVICE = torch.device("cuda" if has_cuda() else "cpu")\n',
            lines=[3],
        ),
        Invalid('import torch.cuda\nrank = 0\nx = torch.empty(1, device=f"cuda:{rank}")\n', lines=[3]),
        Invalid('import torch\ntarget = "cuda:1"\nmodel = torch.nn.Linear(2, 2).to(target)\n', lines=[2]),
        Invalid('import torch\nGPU = "cuda"\n\ndef run(m):\n    return m.to(GPU)\n', lines=[2]),
        Invalid('import torch\ndef train(model, device="cuda"):\n    return model.to(device)\n', lines=[2]),
        Invalid(
            'import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument("--device", default="cuda")\n',
            lines=[3],
        ),
        Invalid('cfg = {"device": "cuda:0", "lr": 0.1}\n', lines=[1]),
        Invalid('class Trainer:\n    def __init__(self):\n        self.device = "cuda"\n', lines=[3]),
        Invalid(
            'import torch\nrank = 1\na = torch.device("cuda:" + str(rank))\nb = "cuda:%d" % rank\n'
            'c = torch.device("cuda:{}".format(rank))\nt = torch.ones(1).to(b)\n',
            lines=[3, 4, 5],
        ),
        Invalid('import torch\ntorch.set_default_device("cuda")\nwith torch.device("cuda"):\n    pass\n', lines=[2, 3]),
        Invalid('import torch\nx = torch.ones(2).to(device=args.device or "cuda", non_blocking=True)\n', lines=[2]),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if names & _OWNED_ELSEWHERE or any(name.startswith("torch.cuda.") for name in names):
            return
        if names & _DEVICE_FIRST_ARGUMENT or patterns.method_name(node) == "to":
            first = patterns.positional(node, 0)
            if first is not None:
                self._check(first.value)
        for arg in node.args:
            if arg.keyword is not None and patterns.is_device_name(arg.keyword.value):
                self._check(arg.value)
        if patterns.method_name(node) == "add_argument":
            option = patterns.positional(node, 0)
            default = patterns.keyword(node, "default")
            flag = patterns.string_value(option.value) if option else None
            if default is not None and flag and patterns.is_device_name(flag.lstrip("-").replace("-", "_")):
                self._check(default.value)

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is not None and patterns.is_device_name(node.name.value):
            self._check(node.default)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self._names_device(target.target) for target in node.targets):
            self._check(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and self._names_device(node.target):
            self._check(node.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = patterns.string_value(node.key)
        if key is not None and patterns.is_device_name(key):
            self._check(node.value)

    @staticmethod
    def _names_device(target: cst.BaseExpression) -> bool:
        name = patterns.target_name(target)
        return name is not None and patterns.is_device_name(name)

    def _check(self, expression: cst.BaseExpression) -> None:
        literals = list(patterns.cuda_device_literals(expression))
        if isinstance(expression, cst.Name):
            bound = self.ctx.assigned_value(expression)
            if bound is not None:
                literals.extend(patterns.cuda_device_literals(bound))
        for literal in literals:
            if id(literal) not in self._reported:
                self._reported.add(id(literal))
                self.report(literal, literal=describe(literal), advice=device_advice(self.ctx.targets))


def describe(literal: cst.CSTNode) -> str:
    value = patterns.string_value(literal)
    return repr(value) if value is not None else "'cuda:<index>'"


def device_advice(selected: tuple[str, ...]) -> str:
    """Tell the user what to write on the selected targets."""
    devices = []
    for name in selected:
        device_type = target_data.get(name).device_type
        if device_type != "cuda" and device_type not in devices:
            devices.append(device_type)
    spelled = " / ".join(f'"{device}"' for device in devices)
    return (
        f"use the target's device ({spelled}), or better one device chosen once: "
        'torch.accelerator.current_accelerator() or torch.device("cpu")'
    )
