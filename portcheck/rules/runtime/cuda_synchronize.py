from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaSynchronize(CudaApiRule):
    """## What it does
    Reports `torch.cuda.synchronize()`.

    ## Why is this bad?
    Without CUDA it raises `AssertionError: Torch not compiled with CUDA enabled`. It is most
    often used to time steps, so benchmarking code breaks first.

    ## Example
    ```python
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    ```

    ## Use instead
    ```python
    step()
    torch.accelerator.synchronize()
    ```

    ## Targets
    An error on every target but ROCm. `torch.accelerator.synchronize()` raises on a host with
    no accelerator: guard it there. On XLA use `torch_xla.sync()`. On TPU it is not a step
    boundary: TorchTPU materialises results on `.cpu()` and `.item()`.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC203"
    name = "cuda-synchronize"

    VALID = [
        Valid("import torch\ntorch.accelerator.synchronize()\n"),
        Valid("def wait(torch):\n    torch.cuda.synchronize()\n"),
        Valid(
            "import torch\nstream = torch.cuda.current_stream\nstream().synchronize()\n", options={"select": ["PC203"]}
        ),
        Valid("import torch\ntorch.cuda.synchronize()\n", options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid("import torch\ntorch.cuda.synchronize()\n", lines=[2]),
        Invalid("import torch as T\nT.cuda.synchronize()\n", lines=[2]),
        Invalid("from torch import cuda\ncuda.synchronize()\n", lines=[2]),
        Invalid("from torch.cuda import synchronize as sync\nsync()\n", lines=[2]),
        Invalid("import torch.cuda\ndef timed(f):\n    f()\n    torch.cuda.synchronize()\n", lines=[4]),
        Invalid(
            "try:\n    import torch\nexcept ImportError:\n    torch = None\nif torch:\n    torch.cuda.synchronize()\n",
            lines=[6],
        ),
    ]
