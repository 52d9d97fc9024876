from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import calls, cuda_api, placement
from portcheck.rewrites.edits import Edit
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid, per_target

_CLASSES = frozenset(name.rpartition(".")[2] for name in patterns.TENSOR_METHOD_NAMES)


class TensorCudaCall(Rule):
    """## What it does
    Reports `.cuda()` and `.cuda(i)` calls on tensors, modules and other objects.

    ## Why is this bad?
    `.cuda()` only ever moves to a CUDA device. Without CUDA it raises `AssertionError: Torch
    not compiled with CUDA enabled`; on a TPU or Trainium host it does not reach the
    accelerator at all.

    ## Example
    ```python
    model = Net().cuda()
    batch = batch.cuda(non_blocking=True)
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    batch = batch.to(device, non_blocking=True)
    ```

    ## Targets
    An error on every target but ROCm, where `.cuda()` reaches the AMD GPU. TorchTPU and
    TorchNeuron also generate `.tpu()` and `.neuron()`, but `.to(device)` is the portable form.

    ## Fix safety
    Safe: `.cuda(...)` becomes `.to(device=<the target's device>)`, keeping `non_blocking=` and
    `memory_format=`; for `--device cpu` it becomes `.cpu()` (keeping `memory_format=`). The device is passed by keyword because storages (`UntypedStorage.to`)
    take it only that way; tensors, modules and packed sequences accept it too. An index is
    kept where the target keeps indices (`.cuda(1)` -> `.to(device="xpu:1")`) and dropped where
    a process owns one device, as cuda-device-string does. With `--device auto` the device is
    the module's device binding (`DEVICE`, added when missing). Like the rule, the fix takes
    the receiver for a tensor, module or storage: a class of your own with a `.cuda()` method
    and no `.to(device=...)` would need its own port.

    An argument that holds an index (a rank, `args.gpu`, `self.gpu_id`: see
    integer-device-index) keeps it where indices are kept (`f"xpu:{args.gpu}"`,
    `f"{DEVICE.type}:{args.gpu}"`), so cpu, auto and the accelerators agree.

    Not fixed: a call with `*args` or `**kwargs`, the unbound `torch.nn.Module.cuda(model)`,
    and, where indices are kept, a device argument whose kind cannot be told (`.cuda(args.where)`
    may hold an int, None or a device, and no one spelling fits them all).
    """

    code = "PC102"
    name = "tensor-cuda-call"
    message = "`.cuda()` only moves to a CUDA device"
    hint = "use `.to(device)` with one device chosen once (keep non_blocking=)"
    severity = per_target(ERROR, rocm=OFF)
    fix_safety = FixSafety.SAFE
    triggers = (b".cuda",)
    cuda_only = True

    VALID = [
        Valid("import torch\nx = torch.randn(3).to(device)\n"),
        Valid("from numba import cuda\n@cuda.jit\ndef kernel(a):\n    pass\n"),
        Valid("import torch as T\ndevice_module = T.cuda\n"),
        Valid("def f(cuda):\n    return cuda(3)\n"),
        Valid("import cupy\nwith cupy.cuda.Device(0):\n    pass\n"),
        Valid('import torch\nstate = torch.load("ckpt.pt", map_location=lambda storage, loc: storage.cuda())\n'),
    ]
    INVALID = [
        Invalid(
            "import torch\nx = torch.randn(3).cuda()\n",
            lines=[2],
            fixed='import torch\nx = torch.randn(3).to(device="tpu")\n',
        ),
        Invalid(
            "import torch as T\nmodel = T.nn.Linear(2, 2).cuda(0)\n",
            lines=[2],
            fixed='import torch as T\nmodel = T.nn.Linear(2, 2).to(device="tpu")\n',
        ),
        Invalid(
            "import torch as T\nmodel = T.nn.Linear(2, 2).cuda(0)\n",
            lines=[2],
            device="xpu",
            fixed='import torch as T\nmodel = T.nn.Linear(2, 2).to(device="xpu:0")\n',
        ),
        Invalid(
            "import torch\nx = torch.ones(2).cuda(0, non_blocking=True)\ny = x.cuda(memory_format=torch.channels_last)\n",
            lines=[2, 3],
            device="cpu",
            fixed="import torch\nx = torch.ones(2).cpu()\ny = x.cpu(memory_format=torch.channels_last)\n",
        ),
        Invalid(
            # On the CPU target the CUDA branch is left for GPUs (portcheck.coherence).
            "from torch import cuda\nimport torch\nif cuda.is_available():\n    net = net.cuda()\n",
            lines=[4],
            device="cpu",
            message="reached only under a CUDA check",
        ),
        Invalid(
            "from torch.cuda import device_count as n\nimport torch.cuda\n"
            "batch = [t.cuda(non_blocking=True) for t in batch]\n",
            lines=[3],
            device="auto",
            fixed="from torch.cuda import device_count as n\nimport torch.cuda\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            "batch = [t.to(device=DEVICE, non_blocking=True) for t in batch]\n",
        ),
        Invalid(
            "class M:\n    def setup(self):\n        self.net.half().cuda()\n",
            lines=[3],
            fixed='class M:\n    def setup(self):\n        self.net.half().to(device="tpu")\n',
        ),
        Invalid(
            '"""Train."""\nimport torch\n\nrank = 1\nx = torch.ones(2).cuda(rank, True)\ny = x.cuda(device=0)\n',
            lines=[5, 6],
            device="auto",
            fixed='"""Train."""\nimport torch\n\n'
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            'rank = 1\nx = torch.ones(2).to(device=f"{DEVICE.type}:{rank}", non_blocking=True)\n'
            'y = x.to(device=f"{DEVICE.type}:0")\n',
        ),
        Invalid(
            "import torch\nrank = 1\nx = torch.ones(2).cuda(rank, True)\n",
            lines=[3],
            device="npu",
            fixed='import torch\nrank = 1\nx = torch.ones(2).to(device=f"npu:{rank}", non_blocking=True)\n',
        ),
        Invalid(
            'import torch\ndev = torch.device("cuda", 1)\ny = torch.ones(2).cuda(dev)\n',
            lines=[3],
            device="xpu",
            fixed='import torch\ndev = torch.device("cuda", 1)\ny = torch.ones(2).to(device=dev)\n',
        ),
        # `args.gpu` may be an int, None or a device: fixed only where a process owns one device.
        Invalid(
            "import torch\ndef place(m, args):\n    return m.cuda(args.gpu)\n",
            lines=[3],
            device="xpu",
            fixed='import torch\ndef place(m, args):\n    return m.to(device=f"xpu:{args.gpu}")\n',
        ),
        Invalid(
            "import torch\ndef place(m, args):\n    return m.cuda(args.gpu)\n",
            lines=[3],
            device="auto",
            fixed="import torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'def place(m, args):\n    return m.to(device=f"{DEVICE.type}:{args.gpu}")\n',
        ),
        Invalid("import torch\ndef place(m, args):\n    return m.cuda(args.where)\n", lines=[3], device="xpu"),
        Invalid(
            "import torch\ndef place(m, args):\n    return m.cuda(args.gpu)\n",
            lines=[3],
            fixed='import torch\ndef place(m, args):\n    return m.to(device="tpu")\n',
        ),
        Invalid("import torch\nx = torch.ones(2).cuda(*placement)\n", lines=[2]),
        Invalid("model = torch.nn.Module.cuda(model)\n", lines=[1]),
        Invalid('import torch\nx = torch.ones(2)\nprint(f"{x.cuda()}")\n', lines=[3]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if patterns.method_name(node) != "cuda":
            return
        names = self.ctx.qualified_names(node.func)
        if patterns.resolves_outside_torch_classes(names):
            return
        if placement.moves_storage_in_map_location(self.ctx, node):
            return  # `map_location=lambda storage, loc: storage.cuda()` is cuda-map-location's
        self.report(node, edit=None if names else self._edit(node))

    def _edit(self, node: cst.Call) -> Edit | None:
        """`.to(device=...)` in place of `.cuda(...)`."""
        assert isinstance(node.func, cst.Attribute)
        if patterns.dotted(node.func.value).rpartition(".")[2] in _CLASSES:
            return None  # `torch.nn.Module.cuda(model)`: the unbound method
        if placement.inside_fstring(self.ctx.ancestors):
            return None
        readable, device, non_blocking = placement.cuda_call_device(node)
        if not readable:
            return None
        if self.ctx.fix_target.device_type == "cpu":
            return _to_cpu(node, [arg for arg in (device, non_blocking) if arg is not None])
        moved = placement.moved_to(self.ctx, device.value if device else None)
        if moved is None:
            return None
        spelling, safety = moved
        spelling = placement.device_object(self.ctx, spelling)
        args = [
            calls.as_keyword(arg, "device", spelling.node)
            if arg is device
            else calls.as_keyword(arg, "non_blocking")
            if arg is non_blocking
            else arg
            for arg in node.args
        ]
        if device is None:
            args.insert(0, calls.keyword_arg("device", spelling.node))
        fixed = node.with_changes(func=node.func.with_changes(attr=cst.Name("to")), args=args)
        title = f".cuda() -> .to(device={cst.Module([]).code_for_node(spelling.node)})"
        return Edit(node, fixed, safety, title, spelling.imports, spelling.prelude)


def _to_cpu(node: cst.Call, dropped: list[cst.Arg]) -> Edit | None:
    """`.cpu()` for `.cuda(...)`: the device and non_blocking go (there is one device, and no
    copy to overlap), `memory_format=` stays. Not where dropping an argument loses an effect."""
    assert isinstance(node.func, cst.Attribute)
    if not all(cuda_api.reads_only(arg.value) for arg in dropped):
        return None
    kept = [
        arg
        for arg in node.args
        if arg not in dropped and arg.keyword is not None and arg.keyword.value != "non_blocking"
    ]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    fixed = node.with_changes(func=node.func.with_changes(attr=cst.Name("cpu")), args=kept)
    return Edit(node, fixed, FixSafety.SAFE, ".cuda() -> .cpu()")
