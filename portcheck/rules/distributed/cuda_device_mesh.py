from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import edits
from portcheck.rewrites.calls import in_current_statement
from portcheck.rewrites.edits import Edit
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
    Safe: `"cuda"` becomes the target's device type (`"tpu"`, `"xpu"`...); with `--device
    auto`, `DEVICE.type`, the device present (`"cpu"` on a host without an accelerator, where
    a gloo mesh works). Building a `"cuda"` mesh raises without CUDA, so no working behaviour
    is lost. A type with an index (`"cuda:0"`), which `init_device_mesh` rejects on CUDA too,
    is left alone.
    """

    code = "PC405"
    name = "cuda-device-mesh"
    message = "the device mesh is built for the CUDA device type {literal}"
    hint = "{advice}"
    severity = per_target(ERROR, rocm=OFF)
    fix_safety = FixSafety.SAFE
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
        Invalid(
            'import torch\nmesh = torch.distributed.device_mesh.init_device_mesh("cuda", (2, 4))\n',
            lines=[2],
            fixed='import torch\nmesh = torch.distributed.device_mesh.init_device_mesh("tpu", (2, 4))\n',
        ),
        Invalid(
            'import torch\n\nmesh = torch.distributed.device_mesh.init_device_mesh("cuda", (2, 4))\n',
            lines=[3],
            device="auto",
            fixed="import torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "mesh = torch.distributed.device_mesh.init_device_mesh(DEVICE.type, (2, 4))\n",
        ),
        Invalid(
            'import torch as T\nmesh = T.distributed.device_mesh.DeviceMesh("cuda", [[0, 1]])\n',
            lines=[2],
            device="cpu",
            fixed='import torch as T\nmesh = T.distributed.device_mesh.DeviceMesh("cpu", [[0, 1]])\n',
        ),
        Invalid(
            'from torch import distributed as dist\nmesh = dist.device_mesh.init_device_mesh(device_type="cuda", mesh_shape=(8,))\n',
            lines=[2],
            device="neuron",
            fixed="from torch import distributed as dist\n"
            'mesh = dist.device_mesh.init_device_mesh(device_type="neuron", mesh_shape=(8,))\n',
        ),
        Invalid(
            'from torch.distributed.device_mesh import init_device_mesh as mesh_of\nm = mesh_of("cuda", (2,))\n',
            lines=[2],
            device="xpu",
            fixed='from torch.distributed.device_mesh import init_device_mesh as mesh_of\nm = mesh_of("xpu", (2,))\n',
        ),
        Invalid(
            "import torch\nfrom torch.distributed.device_mesh import init_device_mesh\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            'def build(dp, tp):\n    return init_device_mesh("cuda", (dp, tp), mesh_dim_names=("dp", "tp"))\n',
            lines=[6],
            device="auto",
            fixed="import torch\nfrom torch.distributed.device_mesh import init_device_mesh\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            'def build(dp, tp):\n    return init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp"))\n',
        ),
        Invalid(
            'from torch.distributed.device_mesh import init_device_mesh\nMESH_TYPE = "cuda"\nm = init_device_mesh(MESH_TYPE, (2,))\n',
            lines=[2],
            device="xla",
            fixed='from torch.distributed.device_mesh import init_device_mesh\nMESH_TYPE = "xla"\n'
            "m = init_device_mesh(MESH_TYPE, (2,))\n",
        ),
        Invalid(  # a mesh type takes no index, on CUDA either: not this fix's to guess
            'import torch.distributed.device_mesh\nimport torch.cuda\nm = torch.distributed.device_mesh.DeviceMesh("cuda:0", [0])\n',
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
            edit = self._edit(literal)
            self.report(literal, edit=edit, literal=describe(literal), advice=device_advice(self.ctx.targets))

    def _edit(self, literal: cst.CSTNode) -> Edit | None:
        if patterns.string_value(literal) != "cuda":
            return None
        if not self.ctx.fix_target.device_type and not in_current_statement(self.ctx, literal):
            return None  # auto writes names (`DEVICE`) that must be bound where the literal is
        spelling = edits.device_type(self.ctx, literal)  # type: ignore[arg-type]
        if spelling is None:
            return None
        title = f"'cuda' -> {self.ctx.fix_target.device_type or 'the device present'} in a device mesh"
        return spelling.edit(literal, FixSafety.SAFE, title)
