from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, OFF, Invalid, Valid, per_target
from portcheck.setting_rule import SettingValueRule

_BACKEND_FIRST = frozenset(
    {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"}
)
_BACKEND_THIRD = frozenset({"torch.distributed.new_group", "torch.distributed.distributed_c10d.new_group"})


def is_nccl(node: cst.CSTNode) -> bool:
    """`"nccl"`, or a per-device backend string naming it such as `"cpu:gloo,cuda:nccl"`."""
    value = patterns.string_value(node)
    return value is not None and (value == "nccl" or "nccl" in value.split(",") or ":nccl" in value)


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
    return (
        "use the target's backend ("
        + "; ".join(choices)
        + "), or torch.distributed.get_default_backend_for_device(device)"
    )


class NcclBackend(SettingValueRule):
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
        Invalid(
            'import torch as T\nT.distributed.init_process_group(backend="nccl", init_method="env://")\n', lines=[2]
        ),
        Invalid('from torch import distributed as dist\ndist.init_process_group("cpu:gloo,cuda:nccl")\n', lines=[2]),
        Invalid('from torch.distributed import new_group as group\ng = group(ranks, None, "nccl")\n', lines=[2]),
        Invalid("import torch.distributed\nb = torch.distributed.Backend.NCCL\n", lines=[2]),
        Invalid('import torch.distributed as dist\nBACKEND = "nccl"\ndist.init_process_group(BACKEND)\n', lines=[2]),
        Invalid(
            'import argparse\np = argparse.ArgumentParser()\np.add_argument("--dist-backend", default="nccl")\n',
            lines=[3],
        ),
        Invalid('strategy = DDPStrategy(process_group_backend="nccl")\ncfg = {"backend": "nccl"}\n', lines=[1, 2]),
    ]

    def names_setting(self, name: str) -> bool:
        return patterns.is_backend_name(name)

    def literals(self, expression: cst.CSTNode) -> Iterable[cst.CSTNode]:
        return patterns.value_literals(expression, is_nccl)

    def positional_setting(self, call: cst.Call, names: frozenset[str]) -> cst.Arg | None:
        index = 0 if names & _BACKEND_FIRST else 2 if names & _BACKEND_THIRD else None
        return None if index is None else patterns.positional(call, index)

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        self.report_once(node)

    def report_literal(self, literal: cst.CSTNode) -> None:
        self.report(literal, advice=backend_advice(self.ctx.targets))
