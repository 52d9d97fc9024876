from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid, per_target
from portcheck.rules.placement.cuda_device_string import describe, device_advice


class CudaDeviceMesh(Rule):
    """## What it does
    Reports device meshes built for CUDA: `init_device_mesh("cuda", (2, 4))` and
    `DeviceMesh("cuda", mesh)`.

    ## Why is this bad?
    The mesh's device type decides where DTensor, FSDP2 and tensor-parallel shards live.
    Without CUDA, building a `"cuda"` mesh fails, so the parallelism set-up dies at start-up.

    ## Example
    ```python
    mesh = init_device_mesh("cuda", (dp, tp), mesh_dim_names=("dp", "tp"))
    ```

    ## Use instead
    ```python
    mesh = init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
    ```
    On TPU, `torch.tpu.distributed.topology_aware_mesh(...)` builds meshes that follow the
    chip topology. On Trainium the unit is the NeuronCore.

    ## Targets
    An error on every target but ROCm.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC405"
    name = "cuda-device-mesh"
    message = "the device mesh is built for the CUDA device type {literal}"
    hint = "{advice}"
    severity = per_target(ERROR, rocm=OFF)
    triggers = (b"cuda",)

    VALID = [
        Valid(
            "from torch.distributed.device_mesh import init_device_mesh\nmesh = init_device_mesh(device.type, (2,))\n"
        ),
        Valid('def build(init_device_mesh):\n    return init_device_mesh("cuda", (2,))\n'),
        Valid('def build(torch):\n    return torch.distributed.device_mesh.init_device_mesh("cuda", (2,))\n'),
        Valid('import torch\nmesh = torch.distributed.device_mesh.init_device_mesh("cpu", (2,))\n'),
    ]
    INVALID = [
        Invalid('import torch\nmesh = torch.distributed.device_mesh.init_device_mesh("cuda", (2, 4))\n', lines=[2]),
        Invalid('import torch as T\nmesh = T.distributed.device_mesh.DeviceMesh("cuda", [[0, 1]])\n', lines=[2]),
        Invalid(
            'from torch import distributed as dist\nmesh = dist.device_mesh.init_device_mesh(device_type="cuda", mesh_shape=(8,))\n',
            lines=[2],
        ),
        Invalid(
            'from torch.distributed.device_mesh import init_device_mesh as mesh_of\nm = mesh_of("cuda", (2,))\n',
            lines=[2],
        ),
        Invalid(
            'import torch.distributed.device_mesh\nimport torch.cuda\nm = torch.distributed.device_mesh.DeviceMesh("cuda", [0])\n',
            lines=[3],
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & patterns.DEVICE_MESH_CALLS:
            return
        arg = patterns.argument(node, 0, "device_type")
        if arg is None:
            return
        for literal in patterns.device_literals_through_names(arg.value, self.ctx.assigned_value):
            self.report(literal, literal=describe(literal), advice=device_advice(self.ctx.targets))
