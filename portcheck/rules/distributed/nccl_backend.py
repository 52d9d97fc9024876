from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, OFF, FileContext, Invalid, Rule, Valid, per_target

_BACKEND_FIRST = frozenset({"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"})
_BACKEND_THIRD = frozenset({"torch.distributed.new_group", "torch.distributed.distributed_c10d.new_group"})


def is_nccl(node: cst.CSTNode) -> bool:
    """`"nccl"`, or a per-device backend string naming it such as `"cpu:gloo,cuda:nccl"`."""
    value = patterns.string_value(node)
    return value is not None and (value == "nccl" or "nccl" in value.split(",") or ":nccl" in value)


def nccl_literals(node: cst.CSTNode) -> list[cst.CSTNode]:
    found = [node] if is_nccl(node) else []
    if isinstance(node, cst.IfExp):
        found += nccl_literals(node.body) + nccl_literals(node.orelse)
    elif isinstance(node, cst.BooleanOperation):
        found += nccl_literals(node.left) + nccl_literals(node.right)
    return found


def backend_advice(selected: tuple[str, ...]) -> str:
    choices = []
    for name in selected:
        target = target_data.get(name)
        if target.keeps_cuda_api:
            continue
        text = f'{name}: "{target.distributed_backend}"'
        if target.distributed_init_method:
            text += f' with init_method="{target.distributed_init_method}"'
        choices.append(text)
    return "use the target's backend (" + "; ".join(choices) + "), or torch.distributed.get_default_backend_for_device(device)"


class NcclBackend(Rule):
    """## What it does
    Reports the `"nccl"` process-group backend: `init_process_group("nccl")`,
    `backend="nccl"` in any call, `torch.distributed.Backend.NCCL`, a `backend` variable,
    attribute, dict entry or `--backend` option defaulting to `"nccl"`, and a `"nccl"` string
    bound to a name later passed as the backend.

    ## Why is this bad?
    NCCL is NVIDIA's collective library. Without it `init_process_group("nccl")` raises at
    start-up, so a distributed job never begins.

    ## Example
    ```python
    dist.init_process_group(backend="nccl")
    ```

    ## Use instead
    ```python
    dist.init_process_group(backend=dist.get_default_backend_for_device(device))
    ```
    or the target's backend: tpu `"tpu"`, neuron `"neuron"`, xla `"xla"` with
    `init_method="xla://"`, xpu `"xccl"`, npu and hpu `"hccl"`, mps and cpu `"gloo"`.

    ## Targets
    An error on every target but ROCm, where RCCL answers to `"nccl"`.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC401"
    name = "nccl-backend"
    message = '"nccl" is NVIDIA\'s collective library, absent on this target'
    hint = "{advice}"
    severity = per_target(ERROR, rocm=OFF)
    triggers = (b"nccl", b"NCCL")
    watched_names = ("torch.distributed.Backend.NCCL",)

    VALID = [
        Valid('import torch.distributed as dist\ndist.init_process_group("gloo")\n'),
        Valid('print("falling back from nccl")\n'),
        Valid('def setup(torch):\n    torch.distributed.init_process_group("nccl")\n'),
        Valid('import torch\ntorch.distributed.init_process_group("nccl")\n', options={"targets": ["rocm"]}),
        Valid('import torch\nlibrary = "nccl"\nprint(library)\n'),
    ]
    INVALID = [
        Invalid('import torch\ntorch.distributed.init_process_group("nccl")\n', lines=[2]),
        Invalid('import torch as T\nT.distributed.init_process_group(backend="nccl", init_method="env://")\n', lines=[2]),
        Invalid('from torch import distributed as dist\ndist.init_process_group("cpu:gloo,cuda:nccl")\n', lines=[2]),
        Invalid('from torch.distributed import new_group as group\ng = group(ranks, None, "nccl")\n', lines=[2]),
        Invalid('import torch.distributed\nb = torch.distributed.Backend.NCCL\n', lines=[2]),
        Invalid('import torch.distributed as dist\nBACKEND = "nccl"\ndist.init_process_group(BACKEND)\n', lines=[2]),
        Invalid('import argparse\np = argparse.ArgumentParser()\np.add_argument("--dist-backend", default="nccl")\n', lines=[3]),
        Invalid('strategy = DDPStrategy(process_group_backend="nccl")\ncfg = {"backend": "nccl"}\n', lines=[1, 2]),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[int] = set()

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        self._report(node)

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        index = 0 if names & _BACKEND_FIRST else 2 if names & _BACKEND_THIRD else None
        if index is not None:
            arg = patterns.positional(node, index)
            if arg is not None:
                self._check(arg.value)
        for arg in node.args:
            if arg.keyword is not None and patterns.is_backend_name(arg.keyword.value):
                self._check(arg.value)
        if patterns.method_name(node) == "add_argument":
            option = patterns.positional(node, 0)
            default = patterns.keyword(node, "default")
            flag = patterns.string_value(option.value) if option else None
            if default is not None and flag and patterns.is_backend_name(flag.lstrip("-").replace("-", "_")):
                self._check(default.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            name = patterns.target_name(target.target)
            if name is not None and patterns.is_backend_name(name):
                self._check(node.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = patterns.string_value(node.key)
        if key is not None and patterns.is_backend_name(key):
            self._check(node.value)

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is not None and patterns.is_backend_name(node.name.value):
            self._check(node.default)

    def _check(self, expression: cst.BaseExpression) -> None:
        literals = nccl_literals(expression)
        if isinstance(expression, cst.Name):
            bound = self.ctx.assigned_value(expression)
            if bound is not None:
                literals += nccl_literals(bound)
        for literal in literals:
            self._report(literal)

    def _report(self, node: cst.CSTNode) -> None:
        if id(node) not in self._reported:
            self._reported.add(id(node))
            self.report(node, advice=backend_advice(self.ctx.targets))
