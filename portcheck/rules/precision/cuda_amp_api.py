from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaAmpApi(CudaApiRule):
    """## What it does
    Reports the CUDA-only mixed-precision API: `torch.cuda.amp.autocast`,
    `torch.cuda.amp.GradScaler`, `torch.cuda.amp.custom_fwd` / `custom_bwd`, and the
    `torch.cuda.amp` module itself.

    ## Why is this bad?
    `torch.cuda.amp` only ever applies to CUDA: off CUDA, `autocast()` warns and disables
    itself, so the model silently trains in float32 on the accelerator, slower and with twice
    the memory. The API has been deprecated since torch 2.4.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast():
        loss = model(x)
    ```

    ## Use instead
    ```python
    with torch.amp.autocast("tpu", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Targets
    A warning on every target but ROCm. Give the target's device type, and on tpu, neuron,
    xla and hpu an explicit `dtype=torch.bfloat16` (PrivateUse1 backends default to float16);
    bfloat16 needs no GradScaler (PC304).

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC301"
    name = "cuda-amp-api"

    VALID = [
        Valid('import torch\nwith torch.amp.autocast("cpu", dtype=torch.bfloat16):\n    pass\n'),
        Valid("def run(torch):\n    with torch.cuda.amp.autocast():\n        pass\n"),
        Valid("from apex import amp\nmodel = amp.initialize(model)\n"),
    ]
    INVALID = [
        Invalid("import torch\nwith torch.cuda.amp.autocast():\n    pass\n", lines=[2]),
        Invalid("import torch as T\nscaler = T.cuda.amp.GradScaler()\n", lines=[2]),
        Invalid("from torch import cuda\nwith cuda.amp.autocast(dtype=cuda_dtype):\n    pass\n", lines=[2]),
        Invalid(
            "from torch.cuda.amp import autocast as ac, GradScaler\nwith ac():\n    s = GradScaler()\n", lines=[2, 3]
        ),
        Invalid("import torch.cuda.amp\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n    return x\n", lines=[2]),
        Invalid("from torch.cuda import amp\nwith amp.autocast():\n    pass\n", lines=[2]),
    ]
