from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import INFO, OFF, WARNING, Invalid, Rule, Valid

_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})


def _severity() -> dict:
    """Warning where torch's default autocast dtype is not the one the target wants (PrivateUse1
    backends such as tpu and neuron get float16); info where the default happens to be right on
    a bfloat16-native target (explicit is still safer); off elsewhere."""
    result = {}
    for name, target in target_data.all_targets().items():
        if target.autocast_default_dtype != target.amp_dtype:
            result[name] = WARNING
        elif target.bf16_native and target.device_type != "cpu":
            result[name] = INFO
        else:
            result[name] = OFF
    return result


class AutocastWithoutDtype(Rule):
    """## What it does
    Reports `torch.autocast(...)` and `torch.amp.autocast(...)` without an explicit `dtype`.

    ## Why is this bad?
    Without `dtype`, autocast uses the device type's default. In torch 2.13 that default is
    float16 for PrivateUse1 backends, which is what TorchTPU and TorchNeuron are, although both
    chips compute natively in bfloat16: float16 there means overflow risk and a GradScaler that
    should not be needed. TorchTPU keeps a bfloat16 default on its side that `torch.autocast`
    never reads.

    ## Example
    ```python
    with torch.autocast(device.type):
        loss = model(x)
    ```

    ## Use instead
    ```python
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Targets
    A warning on tpu and neuron (default float16, wanted bfloat16); info on xla and hpu, whose
    default is already bfloat16; off elsewhere.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC303"
    name = "autocast-without-dtype"
    message = "autocast without dtype= uses the device type's default, float16 on tpu and neuron"
    hint = "pass dtype=torch.bfloat16 explicitly on bfloat16-native targets"
    severity = _severity()
    triggers = (b"autocast",)

    VALID = [
        Valid("import torch\nwith torch.autocast('tpu', dtype=torch.bfloat16):\n    pass\n"),
        Valid("import torch as T\nwith T.amp.autocast('tpu', torch.bfloat16):\n    pass\n"),
        Valid("def f(torch):\n    return torch.autocast('tpu')\n"),
        Valid("import torch\nwith torch.autocast('tpu'):\n    pass\n", options={"targets": ["cpu", "mps", "rocm"]}),
        Valid("from torch import cuda\nwith cuda.amp.autocast():\n    pass\n", options={"select": ["PC303"]}),
    ]
    INVALID = [
        Invalid("import torch\nwith torch.autocast(device.type):\n    pass\n", lines=[2]),
        Invalid("import torch as T\nwith T.amp.autocast(device_type='tpu', enabled=True):\n    pass\n", lines=[2]),
        Invalid("from torch import amp\nwith amp.autocast('neuron'):\n    pass\n", lines=[2]),
        Invalid("from torch.amp import autocast as ac\nctx = ac('xla')\n", lines=[2]),
        Invalid("import torch.amp\n@torch.autocast('tpu')\ndef step(x):\n    return x\n", lines=[2]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & _AUTOCAST:
            return
        if any(arg.star for arg in node.args):
            return  # dtype may come through *args or **kwargs
        if patterns.argument(node, 1, "dtype") is None:
            self.report(node)
