from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid
from portcheck.rules.placement.lightning_cuda_accelerator import (
    GPU_ACCELERATORS,
    is_lightning_entry,
    makes_cuda_accelerator,
)


class LightningWithoutTargetAccelerator(Rule):
    """## What it does
    Reports each Lightning `Trainer` and `Fabric` (`lightning`, `lightning.fabric`,
    `pytorch_lightning`) made for a target that Lightning has no accelerator of its own for:
    TorchTPU's `"tpu"` device and TorchNeuron's `"neuron"` device (and NPU and XPU, whose
    integrations are separate packages). A GPU accelerator (`accelerator="cuda"`, `"gpu"`,
    `CUDAAccelerator()`) is lightning-cuda-accelerator's (PC108).

    ## Why is this bad?
    Lightning places the model and the batches itself, on the device of the accelerator it
    picks, and it picks among CPU, CUDA, MPS and XLA (`"tpu"` means torch_xla's TPUs, not
    TorchTPU). With the default `accelerator="auto"` a TorchTPU or Trainium host has none of
    those, so Lightning picks the CPU: the script runs, on the host, many times slower, and
    nothing says so. `accelerator="tpu"` asks for torch_xla, which a TorchTPU host does not
    have.

    ## Example
    ```python
    fabric = L.Fabric(devices=1, precision="bf16-true")  # "auto": the CPU on a TPU host
    model = fabric.setup(model)
    ```

    ## Use instead
    Drive the device from plain PyTorch (`device = torch.device("tpu")`, a training loop of
    your own), or use the vendor's integration for Lightning where there is one.

    ## Targets
    An error on the targets whose target data gives no Lightning accelerator (tpu, neuron, npu,
    xpu); off where Lightning has one (xla's `"tpu"`, mps, hpu, cpu, and rocm's `"cuda"`).

    ## Fix safety
    No automatic fix: the training loop Lightning runs has to be driven another way.
    """

    code = "PC112"
    name = "lightning-without-target-accelerator"
    message = "`{entry}(...)` places the model with Lightning's accelerators, and Lightning has none for this target: {effect}"
    hint = "run the model on the device from plain PyTorch, or through the vendor's Lightning integration"
    severity = {
        name: OFF if target.lightning_accelerator else ERROR for name, target in target_data.all_targets().items()
    }
    triggers = (b"Trainer", b"Fabric")

    VALID = [
        Valid(
            'import pytorch_lightning as pl\ntrainer = pl.Trainer(accelerator="tpu", devices=8)\n',
            options={"targets": ["xla"]},
        ),
        Valid(
            "import lightning as L\nfabric = L.Fabric(devices=1)\n", options={"targets": ["cpu", "mps", "rocm", "hpu"]}
        ),
        # a GPU accelerator is PC108's; not Lightning: Hugging Face's Trainer, a parameter
        Valid(
            "import torch\nimport torch as T\nfrom torch import nn\nfrom torch.nn import functional as F\n"
            'import torch.nn\nimport lightning as L\nfabric = L.Fabric(accelerator="cuda")\n'
            "from transformers import Trainer\ntrainer = Trainer(model=model, args=args)\n"
            "def fit(Trainer, torch):\n    return Trainer(max_epochs=1)\n"
        ),
    ]
    INVALID = [
        Invalid(  # lit-llama's generation scripts: "auto"
            'import lightning as L\nfabric = L.Fabric(devices=1, precision="bf16-true")\n',
            lines=[2],
            message="`Fabric(...)` places the model with Lightning's accelerators",
        ),
        Invalid(
            "from pytorch_lightning import Trainer\ntrainer = Trainer(accelerator='tpu', devices=8)\n",
            lines=[2],
            message="asks for torch_xla's TPUs",
        ),
        Invalid(
            "import lightning.pytorch as pl\ntrainer = pl.Trainer(accelerator='auto', max_epochs=3)\n",
            lines=[2],
            options={"targets": ["neuron"]},
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if not is_lightning_entry(names):
            return
        accelerator = patterns.keyword(node, "accelerator")
        value = accelerator.value if accelerator is not None else None
        named = patterns.string_value(value) if value is not None else None
        if named is not None and named.lower() in GPU_ACCELERATORS:
            return  # PC108's
        if value is not None and makes_cuda_accelerator(value, self.ctx.qualified_names):
            return
        if value is None or (named is not None and named.lower() == "auto"):
            effect = 'with `accelerator="auto"` it picks the CPU, and the run silently stays there'
        elif named is not None and named.lower() == "tpu":
            effect = 'its `"tpu"` asks for torch_xla\'s TPUs, and raises without torch_xla'
        elif named is not None:
            effect = f'`accelerator="{named}"` is not this device'
        else:
            effect = "none of the accelerators it may be given runs on this device"
        self.report(node.func, entry=min(names).rsplit(".", 1)[-1], effect=effect)
