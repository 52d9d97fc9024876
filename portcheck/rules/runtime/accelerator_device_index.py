from __future__ import annotations

import libcst as cst

from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.rewrites.cuda_api import Use, drop
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid

_SET = "torch.accelerator.set_device_index"
_SELECTORS = (_SET, "torch.accelerator.device_index")


def _severity() -> dict:
    """Another index raises where a process owns one device; elsewhere selecting one is how a
    process picks its own."""
    return {
        name: ERROR if target.one_device_per_process and target.accelerator_api else OFF
        for name, target in target_data.all_targets().items()
    }


class AcceleratorDeviceIndex(Rule):
    """## What it does
    Reports `torch.accelerator.set_device_index(i)` and `with torch.accelerator.device_index(i):`
    where `i` is an index that may not be 0: a rank, a local rank, `args.gpu`, a parameter
    that callers give one (portcheck.flow follows them).

    ## Why is this bad?
    Code already written for `torch.accelerator` (or ported by `fix` on a target with several
    devices per process) selects the process's device by its local rank. Where a process owns
    exactly one device (TorchTPU, MPS), that device is index 0 in every process: rank 1 asks
    for a device it does not have, and TorchTPU raises.

    ## Example
    ```python
    torch.accelerator.set_device_index(local_rank)
    ```

    ## Use instead
    Nothing: the process's one device is already current. Keep the call only where the code
    also runs on targets with several devices per process, behind a check of
    `torch.accelerator.device_count() > 1`.

    ## Targets
    An error on tpu and mps (one device per process); off elsewhere, where selecting the local
    rank's device is right. Off on xla, which has no `torch.accelerator` backend.

    ## Fix safety
    Safe on tpu and mps: a bare `set_device_index(i)` statement is removed (there is nothing to
    select, and the process's device stays current). A `with device_index(i):` is left to a
    person.
    """

    code = "PC219"
    name = "accelerator-device-index"
    message = (
        "`{name}({index})` selects a device by index; where a process owns one device, that is index 0 in every process"
    )
    hint = "drop the call: the process's one device is already current"
    severity = _severity()
    fix_safety = FixSafety.SAFE
    # Under a CUDA check it does not run on the target as written; a fix that rewrites the
    # check for the target must drop it too, or it raises there (portcheck.coherence).
    cuda_only = True
    triggers = (b"device_index",)
    watched_names = _SELECTORS

    VALID = [
        Valid("import torch\ntorch.accelerator.set_device_index(0)\n"),
        Valid("import torch\ntorch.accelerator.set_device_index(rank)\n", options={"targets": ["neuron"]}),
        Valid("import torch\ntorch.accelerator.set_device_index(device)\n"),  # a torch.device: its own index
        Valid("def f(torch, rank):\n    torch.accelerator.set_device_index(rank)\n"),
    ]
    INVALID = [
        Invalid(
            "import os\nimport torch\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            "torch.accelerator.set_device_index(local_rank)\n",
            lines=[4],
            fixed="import os\nimport torch\nlocal_rank = int(os.environ['LOCAL_RANK'])\n",
        ),
        Invalid(
            "import torch as T\ndef worker(gpu, args):\n    if args.gpu is not None:\n"
            "        T.accelerator.set_device_index(args.gpu)\n",
            lines=[4],
            fixed="import torch as T\ndef worker(gpu, args):\n    pass\n",
        ),
        Invalid(
            "from torch.accelerator import set_device_index as select\nimport torch.distributed as dist\n"
            "select(dist.get_rank())\n",
            lines=[3],
            fixed="from torch.accelerator import set_device_index as select\nimport torch.distributed as dist\n",
        ),
        Invalid(
            "from torch import accelerator\nimport torch.multiprocessing as mp\ndef run(rank):\n"
            "    with accelerator.device_index(rank):\n        pass\nmp.spawn(run, nprocs=2)\n",
            lines=[4],
            device="mps",
        ),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        use = Use.of(self.ctx, node)
        flow = self.ctx.flow
        if use.call is None or not use.call.args or flow is None:
            return
        index = use.call.args[0].value
        if isinstance(index, cst.Integer) and int(index.value, 0) == 0:
            return
        if not flow.holds_index(index, flow.scope):
            return
        target = self.ctx.fix_target
        edit = None
        if qualified_name == _SET and use.bare and target.one_device_per_process and target.accelerator_api:
            edit = drop(use, "drop set_device_index(): the process's one device is current")
        index_code = cst.Module([]).code_for_node(index)
        self.report(use.call, edit=edit, name=qualified_name, index=index_code)
