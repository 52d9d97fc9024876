from __future__ import annotations

from dataclasses import replace
from functools import partial

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.resolve import Scope
from portcheck.rewrites import placement
from portcheck.rewrites.edits import Edit
from portcheck.rule import (
    ERROR,
    INFO,
    OFF,
    WARNING,
    FileContext,
    Invalid,
    Report,
    Rule,
    Valid,
    at_most_info,
    per_target,
)

_OWNED_ELSEWHERE = patterns.AMP_DEVICE_CALLS | patterns.DEVICE_MESH_CALLS


_FSDP = frozenset(
    {
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)
_FUNCTOOLS_PARTIAL = frozenset({"functools.partial"})
_DEVICE = frozenset({"torch.device"})
_AGAIN = (
    "the same integer as this function's first placement with `{name}`: decide the device once, where `{name}` is set"
)


class IntegerDeviceIndex(Rule):
    """## What it does
    Reports an integer given where a device goes: `.to(0)`, `.to(rank)`,
    `torch.zeros(3, device=local_rank)`, `model.to(self.gpu_id)`, `torch.device(i % n_gpus)`,
    FSDP's `device_id=local_rank` (also through `functools.partial(FSDP, ...)`). The integer is followed
    through the module: `device = 0`, the `rank` that `mp.spawn` passes to its function,
    `int(os.environ["LOCAL_RANK"])`, what a function of the module returns where it returns
    one (AnimateDiff's `local_rank = init_dist(...)`), a parameter every caller passes an index
    to, an attribute set from one (`self.gpu_id = gpu_id`), a parameter named for one (`rank`, `gpu_id`)
    that the module never calls, or an item of a list of them (`gpu_ids[0]`, where `gpu_ids`
    is `[0, 1]`, a parameter that defaults to one, or `opt.gpu_ids`).

    ## Why is this bad?
    PyTorch reads an integer device as an index of the current accelerator: `.to(0)` is
    `.to("cuda:0")` on a CUDA host (and was CUDA's whatever the host in older torch). Without
    an accelerator it raises `RuntimeError: Cannot access accelerator device when none is
    available`, so a program ported to run on the CPU too still fails there; where a process
    owns one device (TPU), another index than its own is refused. Nothing in the line says
    "cuda", so it is the placement a port most often misses.

    ## Example
    ```python
    def main(rank, world_size):
        model = Net().to(rank)
    ```

    ## Use instead
    ```python
    def main(rank, world_size):
        model = Net().to(torch.device(device_type, rank))  # or the one device chosen once
    ```

    ## Targets
    An error on cpu (and so for `--device auto`, which must run there too); a warning on tpu
    and xla, where only the process's own device is valid; info on the accelerators that take
    an index as CUDA does (it runs, but says nothing of the device); off on ROCm. Info for each
    later placement with the same name in a function (`device = rank % n`, then `.to(device)`
    throughout `main()`): one decision, reported where it is first used, fixed everywhere.

    ## Fix safety
    Safe: the integer becomes the target's device, as cuda-device-string writes `"cuda:N"`:
    `"tpu"` where a process owns one device (tpu, xla, cpu), `f"xpu:{rank}"` where indexes are
    kept, and with `--device auto` `f"{DEVICE.type}:{rank}"` (`"cpu:1"` is the CPU on a host
    without an accelerator). The integer itself is kept everywhere else the program uses it
    (ranks, logging, `set_device`).
    """

    code = "PC107"
    name = "integer-device-index"
    message = "`{expression}` is an integer device: an index of the current accelerator (`cuda:{index}` on CUDA), which fails where there is none"
    hint = "pass a device: the one chosen once, or `torch.device(<device type>, {expression})`"
    severity = per_target(INFO, cpu=ERROR, tpu=WARNING, xla=WARNING, rocm=OFF)
    fix_safety = FixSafety.SAFE
    # `.to(0)` and `device=rank` contain no word that says CUDA; these are the least a file
    # with such a placement must contain.
    triggers = (b".to(", b"device")
    cuda_only = True

    VALID = [
        Valid(  # gptq: a parameter named for GPUs that the later call gives torch.device objects
            "import torch\ndef spread(model, gpus):\n    model.head = model.head.to(gpus[-1])\n"
            "if __name__ == '__main__':\n    gpus = [torch.device(f'cuda:{i}') for i in range(2)]\n"
            "    spread(model, gpus)\n"
        ),
        Valid('import torch\nx = torch.ones(2).to("cpu")\n'),
        Valid("import torch\nx = torch.ones(2).to(torch.float16)\n"),
        Valid("import torch\ndef f(x, dtype):\n    return x.to(dtype)\n"),
        Valid("import torch\ndef f(name, n):\n    return torch.device(name), torch.device(f'cuda:{n % 2}')\n"),
        Valid("import torch\ndef f(x, device):\n    return x.to(device)\n\nf(torch.ones(1), torch.device('cpu'))\n"),
        Valid('import torch\ndevice = "cpu"\nx = torch.ones(2).to(device)\n'),
        Valid("import torch\nx = torch.ones(2).to(0)\n", options={"targets": ["rocm"]}),
        Valid("rank = 0\nprint(rank)\nlevels = [1, 2]\nlevels.index(rank)\n"),
        Valid("def f(torch, x):\n    return x.to(torch.distributed.get_rank())\n"),
        Valid(  # an item of a list of devices by name is a device
            "import torch\ndevices = ['cpu', 'cpu']\ndef place(x, gpu_ids=('cpu',)):\n"
            "    return x.to(devices[0]), x.to(gpu_ids[0])\n"
        ),
    ]
    INVALID = [
        Invalid(  # AnimateDiff: the local rank a helper of the module computes and returns
            "import os\nimport torch\ndef init_dist():\n    local_rank = int(os.environ['RANK']) % torch.cuda.device_count()\n"
            "    return local_rank\ndef main(vae):\n    local_rank = init_dist()\n    vae.to(local_rank)\n",
            lines=[8],
            fixed="import os\nimport torch\ndef init_dist():\n"
            "    local_rank = int(os.environ['RANK']) % torch.cuda.device_count()\n"
            '    return local_rank\ndef main(vae):\n    local_rank = init_dist()\n    vae.to("tpu")\n',
        ),
        Invalid(  # dinov2: FSDP's device_id names a CUDA device by its index
            "import os\nfrom functools import partial\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "local_rank = int(os.environ['LOCAL_RANK'])\nwrap = partial(FSDP, device_id=local_rank, use_orig_params=True)\n",
            lines=[5],
            device="cpu",
            fixed="import os\nfrom functools import partial\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "local_rank = int(os.environ['LOCAL_RANK'])\nwrap = partial(FSDP, device_id=\"cpu\", use_orig_params=True)\n",
        ),
        Invalid(
            "import torch\nx = torch.ones(2).to(0)\n",
            lines=[2],
            message="cuda:0",
            fixed='import torch\nx = torch.ones(2).to("tpu")\n',
        ),
        Invalid(
            "import torch\ndevice = 0\nmodel = torch.nn.Linear(2, 2).to(device)\n",
            lines=[3],
            device="cpu",
            fixed='import torch\ndevice = 0\nmodel = torch.nn.Linear(2, 2).to("cpu")\n',
        ),
        Invalid(
            "import torch\nimport torch.multiprocessing as mp\n\ndef main(rank, world):\n"
            "    x = torch.zeros(3, device=rank)\n\nmp.spawn(main, args=(2,), nprocs=2)\n",
            lines=[5],
            device="xpu",
            fixed="import torch\nimport torch.multiprocessing as mp\n\ndef main(rank, world):\n"
            '    x = torch.zeros(3, device=f"xpu:{rank}")\n\nmp.spawn(main, args=(2,), nprocs=2)\n',
        ),
        Invalid(
            "import os\nimport torch\n\nclass Trainer:\n    def __init__(self, model, gpu_id):\n"
            "        self.gpu_id = gpu_id\n        self.model = model.to(gpu_id)\n\n"
            "    def step(self, batch):\n        return batch.to(self.gpu_id)\n\n"
            'Trainer(torch.nn.Linear(2, 2), int(os.environ["LOCAL_RANK"]))\n',
            lines=[7, 10],
            device="auto",
            fixed="import os\nimport torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "class Trainer:\n    def __init__(self, model, gpu_id):\n"
            '        self.gpu_id = gpu_id\n        self.model = model.to(f"{DEVICE.type}:{gpu_id}")\n\n'
            '    def step(self, batch):\n        return batch.to(f"{DEVICE.type}:{self.gpu_id}")\n\n'
            'Trainer(torch.nn.Linear(2, 2), int(os.environ["LOCAL_RANK"]))\n',
        ),
        Invalid(  # LPIPS: the first of the GPUs a parameter lists, also through an attribute set from it
            "import torch\nclass DistModel:\n    def initialize(self, net, use_gpu=True, gpu_ids=[0]):\n"
            "        self.gpu_ids = gpu_ids\n        if use_gpu:\n            self.net = net.to(gpu_ids[0])\n"
            "    def set_input(self, ref):\n        self.ref = ref.to(device=self.gpu_ids[0])\n",
            lines=[6, 8],
            message="gpu_ids[0]` is an integer device",
            fixed="import torch\nclass DistModel:\n    def initialize(self, net, use_gpu=True, gpu_ids=[0]):\n"
            '        self.gpu_ids = gpu_ids\n        if use_gpu:\n            self.net = net.to("tpu")\n'
            '    def set_input(self, ref):\n        self.ref = ref.to(device="tpu")\n',
        ),
        Invalid(
            "import torch as T\ndef place(x, local_rank):\n    return x.to(local_rank, non_blocking=True)\n",
            lines=[3],
            fixed='import torch as T\ndef place(x, local_rank):\n    return x.to("tpu", non_blocking=True)\n',
        ),
        Invalid(  # Real-ESRGAN's video workers: a remainder by the device count is one of the devices
            "import torch\ndef run(device):\n    return torch.ones(1, device=device)\ndef main(jobs):\n"
            "    gpus = torch.cuda.device_count()\n    for i in range(jobs):\n        run(torch.device(i % gpus))\n",
            lines=[7],
            fixed="import torch\ndef run(device):\n    return torch.ones(1, device=device)\ndef main(jobs):\n"
            '    gpus = torch.cuda.device_count()\n    for i in range(jobs):\n        run(torch.device("tpu"))\n',
        ),
        Invalid(
            "from torch import nn\nfrom torch.distributed import get_rank as rank_of\n"
            "net = nn.Linear(2, 2).to(rank_of() % 8)\n",
            lines=[3],
            device="cpu",
            fixed='from torch import nn\nfrom torch.distributed import get_rank as rank_of\nnet = nn.Linear(2, 2).to("cpu")\n',
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        # what only the module's later calls decide: (value, scope, chain, order)
        self._pending: list[tuple[cst.BaseExpression, Scope, tuple[cst.CSTNode, ...], int]] = []
        self._seen = 0  # placements visited, in source order
        self._placed: list[tuple[int, tuple[str, int] | None, Report]] = []  # (order, name in scope, report)

    def visit_Call(self, node: cst.Call) -> None:
        device = patterns.keyword(node, "device")
        if device is None and patterns.method_name(node) == "to":
            device = patterns.positional(node, 0)
        if device is None and self._wraps_fsdp(node):
            device = patterns.keyword(node, "device_id")  # FSDP's CUDA device, by index
        if device is None and len(node.args) == 1 and self.ctx.qualified_names(node.func) & _DEVICE:
            device = patterns.positional(node, 0)  # `torch.device(rank)`: the index alone
        if device is None or not _may_be_index(device.value):
            return
        names = self.ctx.qualified_names(node.func)
        if isinstance(device.value, cst.Call):  # `.to(torch.cuda.current_device())` is PC202's
            names |= self.ctx.qualified_names(device.value.func)
        if names & _OWNED_ELSEWHERE or any(name.startswith("torch.cuda.") for name in names):
            return
        flow = self.ctx.flow
        assert flow is not None, "a Python rule"
        value = device.value
        self._seen += 1
        chain = self.ctx.chain(value)
        if not self._given(value) and flow.holds_index(value, flow.scope):  # known here
            self.ctx.count_report(value)
            self._place(value, flow.scope, chain, self._seen, self._edit(value))
        elif isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):  # a parameter or attribute: callers may say
            self._pending.append((value, flow.scope, chain, self._seen))

    def _given(self, value: cst.BaseExpression) -> bool:
        """Whether the value is (an item of) a parameter: what it holds is what the module's
        calls pass, which may come after it (gptq's `opt_multigpu(model, gpus)`, given devices)."""
        while type(value) is cst.Subscript:
            value = value.value
        return (
            type(value) is cst.Name
            and self.ctx.resolver is not None
            and self.ctx.resolver.parameter_of(value) is not None
        )

    def _place(
        self, value: cst.BaseExpression, scope: Scope, chain: tuple[cst.CSTNode, ...], order: int, edit: Edit | None
    ) -> None:
        report = self.report_here(value, edit=edit, chain=chain, **_fields(value))
        self._placed.append((order, (_code(value), id(scope)) if isinstance(value, cst.Name) else None, report))

    def _wraps_fsdp(self, call: cst.Call) -> bool:
        """`FSDP(model, device_id=...)`, or `partial(FSDP, device_id=...)` (dinov2)."""
        names = self.ctx.qualified_names(call.func)
        if names & _FUNCTOOLS_PARTIAL and call.args and call.args[0].keyword is None:
            names = self.ctx.qualified_names(call.args[0].value)
        return bool(names & _FSDP)

    def leave_Module(self, node: cst.Module) -> None:
        """Values the module's later code decides (a callee defined before its callers)."""
        flow = self.ctx.flow
        assert flow is not None
        for value, scope, chain, order in self._pending:
            if flow.holds_index(value, scope):
                self._place(value, scope, chain, order, flow.as_walked(chain, scope, partial(self._edit, value)))
        first: set[tuple[str, int]] = set()
        for _, name, report in sorted(self._placed, key=lambda placed: placed[0]):
            if name is not None and name in first:
                # the same integer again (DiT's `device = rank % n` at each `.to(device)`): one
                # decision, reported where the function first places something with it
                report = replace(report, severity=at_most_info(report.severity), hint=_AGAIN.format(name=name[0]))
            elif name is not None:
                first.add(name)
            self.reports.append(report)

    def _edit(self, value: cst.BaseExpression) -> Edit | None:
        if placement.inside_fstring(self.ctx.ancestors):
            return None
        literal = placement.indexed_cuda_literal(value)
        spelled = placement.device_spelling(self.ctx, literal) if literal is not None else None
        if spelled is None:
            return None
        spelling, safety = spelled
        title = f"{_code(value)} -> {_code(spelling.node)}"
        return Edit(value, spelling.node, safety, title, spelling.imports, spelling.prelude)


def _fields(value: cst.BaseExpression) -> dict[str, str]:
    """The message's `expression` and `index`: `0` and `0`, `rank` and `<rank>`."""
    code = _code(value)
    return {"expression": code, "index": code if isinstance(value, cst.Integer) else f"<{code}>"}


def _may_be_index(value: cst.BaseExpression) -> bool:
    """What could hold an integer: literals, names, attributes, calls, arithmetic."""
    return isinstance(
        value, (cst.Integer, cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.BinaryOperation, cst.UnaryOperation)
    )


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
