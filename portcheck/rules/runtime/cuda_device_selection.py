from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaDeviceSelection(CudaApiRule):
    """## What it does
    Reports `torch.cuda.current_device()`, `torch.cuda.set_device(i)`,
    `with torch.cuda.device(i):` and `torch.cuda.device_of(t)`.

    ## Why is this bad?
    Without CUDA they raise (`Torch not compiled with CUDA enabled`). Distributed scripts call
    `torch.cuda.set_device(local_rank)` first thing, so the whole job dies at start-up.

    ## Example
    ```python
    torch.cuda.set_device(local_rank)
    index = torch.cuda.current_device()
    ```

    ## Use instead
    ```python
    torch.accelerator.set_device_index(local_rank)
    index = torch.accelerator.current_device_index()
    ```

    ## Targets
    An error on every target but ROCm. On TPU a process owns one device: only its own index is
    accepted, and switching devices with a context is impossible. Never call `torch.tpu.*`
    instead: TorchTPU raises on those from user code. The replacements raise on a host without
    an accelerator, so CPU-only code must guard them.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC202"
    name = "cuda-device-selection"

    VALID = [
        Valid("import torch\ntorch.accelerator.set_device_index(0)\n"),
        Valid("def setup(torch, rank):\n    torch.cuda.set_device(rank)\n"),
        Valid("import torch\nwith torch.device('cpu'):\n    pass\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.cuda.set_device(local_rank)\n", lines=[2]),
        Invalid("import torch as T\ni = T.cuda.current_device()\n", lines=[2]),
        Invalid("from torch import cuda\nwith cuda.device(1):\n    pass\n", lines=[2]),
        Invalid("from torch.cuda import set_device as use\nuse(3)\n", lines=[2]),
        Invalid("import torch.cuda\nwith torch.cuda.device_of(x):\n    pass\n", lines=[2]),
    ]
