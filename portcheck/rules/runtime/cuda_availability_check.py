from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaAvailabilityCheck(CudaApiRule):
    """## What it does
    Reports `torch.cuda.is_available()`, `torch.cuda.device_count()`,
    `torch.cuda.is_initialized()` and `torch.cuda.init()`.

    ## Why is this bad?
    Without CUDA, `is_available()` is False and `device_count()` is 0, so the program quietly
    takes its CPU path on a TPU or Trainium host: it runs, slowly, and nothing says why.

    ## Example
    ```python
    device = "cuda" if torch.cuda.is_available() else "cpu"
    world = torch.cuda.device_count()
    ```

    ## Use instead
    ```python
    device = torch.accelerator.current_accelerator() or torch.device("cpu")
    world = torch.accelerator.device_count()
    ```

    ## Targets
    An error on every target but ROCm (where HIP answers through `torch.cuda`).
    `torch.accelerator.is_available()` is True for any accelerator; on XLA use
    `torch_xla.runtime` instead.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC201"
    name = "cuda-availability-check"

    VALID = [
        Valid("import torch\nok = torch.accelerator.is_available()\n"),
        Valid("def f(torch):\n    return torch.cuda.is_available()\n"),
        Valid("cuda = object()\nn = cuda.device_count()\n"),
        Valid("import torch\nok = torch.cuda.is_available()\n", options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    pass\n", lines=[2], message="torch.cuda.is_available"
        ),
        Invalid("import torch as T\nn = T.cuda.device_count()\n", lines=[2]),
        Invalid("from torch import cuda\nuse_gpu = cuda.is_available()\n", lines=[2]),
        Invalid("from torch.cuda import is_available as has_gpu\nif has_gpu():\n    pass\n", lines=[2]),
        Invalid("import torch.cuda\nready = torch.cuda.is_initialized()\ntorch.cuda.init()\n", lines=[2, 3]),
        Invalid("import torch\ncheck = torch.cuda.is_available\nprint(check())\n", lines=[2]),
    ]
