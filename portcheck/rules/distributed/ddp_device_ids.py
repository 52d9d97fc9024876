from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.rewrites import edits, versions
from portcheck.rewrites.calls import is_none, without_arguments
from portcheck.rewrites.edits import Edit
from portcheck.rule import ERROR, INFO, OFF, WARNING, Invalid, Rule, Valid

_DDP = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"})
_HOST = "cpu"  # the device type of a module DDP takes no device_ids for
_OWN_INDEX = (2, 7)  # torch.accelerator.current_device_index()


def _severity() -> dict:
    """DDP raises ValueError for device_ids on CPU modules; on one-device-per-process targets the
    list can only name the process's own device; elsewhere it works."""
    result = {}
    for name, target in target_data.all_targets().items():
        if target.keeps_cuda_api:
            result[name] = OFF
        elif target.device_type == _HOST:
            result[name] = ERROR
        else:
            result[name] = WARNING if target.one_device_per_process else INFO
    return result


class DdpDeviceIds(Rule):
    """## What it does
    Reports `DistributedDataParallel(model, device_ids=[...], output_device=...)`.

    ## Why is this bad?
    `device_ids` and `output_device` describe CUDA devices of the process. For a module on the
    CPU, DDP raises `ValueError: DistributedDataParallel device_ids and output_device arguments
    only work with single-device/multiple-device GPU modules or CPU modules`. On a TPU a
    process owns one device, so the list can only name that one.

    ## Example
    ```python
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    ```

    ## Use instead
    Move the model to the process's device first and let DDP use it:
    ```python
    model = DDP(model.to(device))
    ```
    or, where the same code must also run on the CPU, give them only on an accelerator:
    `device_ids=[local_rank] if device.type != "cpu" else None`.

    ## Targets
    An error on cpu (raises); a warning on one-device-per-process targets (tpu, xla, mps); info
    elsewhere; off on ROCm. Info under a CUDA check (`if torch.cuda.is_available(): model =
    DDP(model, device_ids=[rank])`): it runs only on CUDA, and the check is the finding.

    ## Fix safety
    Safe on cpu: `device_ids` and `output_device` go (a positional one that later positional
    arguments need becomes `None`); the original raises for a CPU module, and DDP uses the
    module's device without them. Safe with `--device auto`: each becomes
    `<value> if DEVICE.type != "cpu" else None`, the same arguments on an accelerator and none
    on a host without one.

    Safe on targets with one device per process and `torch.accelerator` (tpu, mps), for a
    one-element `device_ids` and an `output_device`: each names
    `torch.accelerator.current_device_index()`, the process's own device. That is the device
    the CUDA code meant (its `local_rank` after `set_device(local_rank)`), DDP still moves
    forward inputs there, and rank 1 no longer names a device its process does not have.

    Unsafe otherwise on such targets (a `device_ids` list built elsewhere, xla): they go, so
    DDP uses the module's device, but it no longer moves forward inputs to `device_ids[0]`;
    move them yourself. No fix where the arguments work (neuron, xpu, npu, hpu).
    """

    code = "PC403"
    name = "ddp-device-ids"
    message = "DistributedDataParallel is given {what}, which name CUDA devices of the process"
    hint = "move the model to the process's device and drop device_ids/output_device"
    severity = _severity()
    fix_safety = FixSafety.SAFE
    triggers = (b"DistributedDataParallel",)
    cuda_only = True

    VALID = [
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model.to(device))\n"),
        Valid("def wrap(torch, m):\n    return torch.nn.parallel.DistributedDataParallel(m, device_ids=[0])\n"),
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(m, device_ids=None)\n"),
        Valid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            'm = DDP(m, device_ids=[rank] if device.type != "cpu" else None)\n'
        ),
    ]
    INVALID = [
        Invalid(  # guided-diffusion: DDP on CUDA only, behind the check that is the finding
            "import torch as th\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
            "if th.cuda.is_available():\n    model = DDP(model, device_ids=[rank], output_device=rank)\n",
            lines=[4],
            message="reached only under a CUDA check",
            fixed="import torch as th\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
            "if th.cuda.is_available():\n    model = DDP(model, device_ids=[th.accelerator.current_device_index()], "
            "output_device=th.accelerator.current_device_index())\n",
        ),
        Invalid(
            "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[rank])\n",
            lines=[2],
            device="cpu",
            fixed="import torch\nm = torch.nn.parallel.DistributedDataParallel(m)\n",
        ),
        Invalid(
            "import torch\n\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[rank])\n",
            lines=[3],
            device="auto",
            fixed="import torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            'm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[rank] if DEVICE.type != "cpu" else None)\n',
        ),
        Invalid(  # tpu: the process's own device, whatever its rank
            "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[rank], output_device=rank)\n",
            lines=[2],
            fixed="import torch\nm = torch.nn.parallel.DistributedDataParallel("
            "m, device_ids=[torch.accelerator.current_device_index()], "
            "output_device=torch.accelerator.current_device_index())\n",
        ),
        Invalid(  # a list built elsewhere: dropped, and DDP stops moving inputs to the device
            "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=gpus)\n",
            lines=[2],
            unsafe=True,
            fixed="import torch\nm = torch.nn.parallel.DistributedDataParallel(m)\n",
        ),
        Invalid(  # without --unsafe-fixes nothing changes there
            "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=gpus)\n", lines=[2]
        ),
        Invalid(  # the user's alias of torch
            "import torch as T\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, (rank,))\n",
            lines=[3],
            fixed="import torch as T\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
            "m = DDP(m, (T.accelerator.current_device_index(),))\n",
        ),
        Invalid(
            "import torch as T\nm = T.nn.parallel.DistributedDataParallel(m, [rank], rank)\n",
            lines=[2],
            device="cpu",
            fixed="import torch as T\nm = T.nn.parallel.DistributedDataParallel(m)\n",
        ),
        Invalid(
            "import torch as T\nm = T.nn.parallel.DistributedDataParallel(m, [rank], rank, 0)\n",
            lines=[2],
            device="cpu",
            fixed="import torch as T\nm = T.nn.parallel.DistributedDataParallel(m, None, None, 0)\n",
        ),
        Invalid(
            "import torch as T\n\nm = T.nn.parallel.DistributedDataParallel(m, [rank], rank)\n",
            lines=[3],
            device="auto",
            fixed="import torch as T\n\n"
            'DEVICE = T.accelerator.current_accelerator(check_available=True) or T.device("cpu")\n\n'
            "m = T.nn.parallel.DistributedDataParallel("
            'm, [rank] if DEVICE.type != "cpu" else None, rank if DEVICE.type != "cpu" else None)\n',
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, output_device=0)\n",
            lines=[2],
            device="xla",
            unsafe=True,
            fixed="from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m)\n",
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
            "model = DDP(\n    model,\n    device_ids=[local_rank],\n    output_device=local_rank,\n)\n",
            lines=[5],  # at the argument to change
            device="cpu",
            fixed="from torch.nn.parallel import DistributedDataParallel as DDP\n\nmodel = DDP(\n    model,\n)\n",
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\nimport torch\n"
            "device = torch.device('cuda')\n\ndef wrap(model, args):\n"
            "    return DDP(model, device_ids=[args.gpu], find_unused_parameters=True)\n",
            lines=[6],
            device="auto",
            fixed="from torch.nn.parallel import DistributedDataParallel as DDP\nimport torch\n"
            "device = torch.device('cuda')\n\ndef wrap(model, args):\n"
            '    return DDP(model, device_ids=[args.gpu] if device.type != "cpu" else None, find_unused_parameters=True)\n',
        ),
        Invalid(  # neuron: device_ids work there
            "from torch import nn\nm = nn.parallel.DistributedDataParallel(m, device_ids=[args.gpu])\n",
            lines=[2],
            device="neuron",
            unsafe=True,
        ),
        Invalid(
            "import torch.nn.parallel\nimport torch.cuda\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=[0])\n",
            lines=[3],
            device="cpu",
            fixed="import torch.nn.parallel\nimport torch.cuda\nm = torch.nn.parallel.DistributedDataParallel(m)\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & _DDP:
            return
        given = [
            (name, arg)
            for index, name in ((1, "device_ids"), (2, "output_device"))
            if (arg := patterns.argument(node, index, name)) is not None
            and not is_none(arg.value)
            and not _only_on_accelerator(arg.value)
        ]
        if given:
            edit = self._edit(node, [arg for _, arg in given])
            # at the argument, where the call spans lines (`device_ids=[args.gpu]` under `DDP(model,`)
            self.report(given[0][1], edit=edit, what=" and ".join(f"`{name}`" for name, _ in given))

    def _edit(self, call: cst.Call, args: list[cst.Arg]) -> Edit | None:
        target = self.ctx.fix_target
        names = "/".join(arg.keyword.value if arg.keyword else "positional device arguments" for arg in args)
        if target.keeps_cuda_api:
            return None
        if target.device_type == _HOST:
            return Edit(call, without_arguments(call, args), FixSafety.SAFE, f"{names} dropped for a CPU module")
        if not target.device_type and target.runs_without_accelerator:  # auto
            device = edits.target_device_type(self.ctx)
            if device is None:
                return None
            guarded = {id(arg): arg.with_changes(value=_guard(arg.value, device.node)) for arg in args}
            replacement = call.with_changes(args=[guarded.get(id(arg), arg) for arg in call.args])
            title = f"{names} given only on an accelerator"
            return Edit(call, replacement, FixSafety.SAFE, title, device.imports, device.prelude)
        if target.one_device_per_process:
            own = self._own_device(call, args)
            if own is not None:
                return own
            title = f"{names} dropped: the process's one device is the module's"
            return Edit(call, without_arguments(call, args), FixSafety.UNSAFE, title)
        return None

    def _own_device(self, call: cst.Call, args: list[cst.Arg]) -> Edit | None:
        """Each argument naming the process's own device, where the target has torch.accelerator
        and `device_ids` is a one-element list or tuple written out."""
        torch = edits.torch_name(self.ctx)
        if not self.ctx.fix_target.accelerator_api or torch is None or not versions.has(self.ctx, _OWN_INDEX):
            return None
        index = cst.Call(
            func=cst.Attribute(
                value=cst.Attribute(value=torch.node, attr=cst.Name("accelerator")),
                attr=cst.Name("current_device_index"),
            )
        )
        replaced = {}
        for arg in args:
            value = arg.value
            if isinstance(value, (cst.List, cst.Tuple)):
                if len(value.elements) != 1 or not isinstance(value.elements[0], cst.Element):
                    return None
                value = value.with_changes(elements=[value.elements[0].with_changes(value=index)])
            elif _is_device_ids(call, arg):
                return None  # a list built elsewhere: its length is not known here
            else:
                value = index
            replaced[id(arg)] = arg.with_changes(value=value)
        replacement = call.with_changes(args=[replaced.get(id(arg), arg) for arg in call.args])
        names = "/".join(arg.keyword.value if arg.keyword else "device arguments" for arg in args)
        return Edit(call, replacement, FixSafety.SAFE, f"{names} name the process's own device", torch.imports)


def _is_device_ids(call: cst.Call, arg: cst.Arg) -> bool:
    return patterns.argument(call, 1, "device_ids") is arg


def _guard(value: cst.BaseExpression, device_type: cst.BaseExpression) -> cst.IfExp:
    """`value if <device type> != "cpu" else None`."""
    if isinstance(value, (cst.IfExp, cst.Lambda, cst.NamedExpr)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    test = cst.Comparison(
        left=device_type,
        comparisons=[cst.ComparisonTarget(operator=cst.NotEqual(), comparator=cst.SimpleString(f'"{_HOST}"'))],
    )
    return cst.IfExp(test=test, body=value, orelse=cst.Name("None"))


def _only_on_accelerator(node: cst.BaseExpression) -> bool:
    """`[rank] if device.type != "cpu" else None`: None wherever the device is the CPU."""
    if not isinstance(node, cst.IfExp) or not (is_none(node.body) or is_none(node.orelse)):
        return False
    test = node.test
    return isinstance(test, cst.Comparison) and any(
        patterns.string_value(side) == _HOST for side in (test.left, *(link.comparator for link in test.comparisons))
    )
