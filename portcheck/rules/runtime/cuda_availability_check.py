from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
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
    Safe: `is_available()` and `device_count()` become `torch.accelerator.is_available()` and
    `torch.accelerator.device_count()` (torch 2.6; not offered for an older `torch-version`),
    written with the file's own `torch` binding. They ask the same question of whatever
    accelerator is present, and neither raises on a host without one (False and 0, as the CUDA
    calls answer there), so every target gets them, cpu and auto included. The branch they
    guard now runs on the accelerator: what is CUDA-only inside it is reported (and fixed) by
    the other rules. Not fixed: `is_initialized()` and `init()` (no equivalent), and XLA,
    which has no `torch.accelerator` backend (use `torch_xla.runtime`).
    """

    code = "PC201"
    name = "cuda-availability-check"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\nok = torch.accelerator.is_available()\n"),
        Valid("def f(torch):\n    return torch.cuda.is_available()\n"),
        Valid("cuda = object()\nn = cuda.device_count()\n"),
        Valid("import torch\nok = torch.cuda.is_available()\n", options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    pass\n",
            lines=[2],
            message="torch.cuda.is_available",
            fixed="import torch\nif torch.accelerator.is_available():\n    pass\n",
        ),
        Invalid(
            "import torch as T\nn = T.cuda.device_count()\n",
            lines=[2],
            device="cpu",
            fixed="import torch as T\nn = T.accelerator.device_count()\n",
        ),
        Invalid(
            "import torch as T\nn = T.cuda.device_count()\n",
            lines=[2],
            device="auto",
            fixed="import torch as T\nn = T.accelerator.device_count()\n",
        ),
        Invalid(
            "from torch import cuda\nuse_gpu = cuda.is_available()\n",
            lines=[2],
            device="auto",
            fixed="from torch import cuda\nimport torch\nuse_gpu = torch.accelerator.is_available()\n",
        ),
        Invalid(
            "from torch.cuda import is_available as has_gpu\nif has_gpu():\n    pass\n",
            lines=[2],
            device="mps",
            fixed="from torch.cuda import is_available as has_gpu\nimport torch\n"
            "if torch.accelerator.is_available():\n    pass\n",
        ),
        Invalid(
            "import torch\ncheck = torch.cuda.is_available\nprint(check())\n",
            lines=[2],
            device="cpu",
            fixed="import torch\ncheck = torch.accelerator.is_available\nprint(check())\n",
        ),
        # Not fixed: no equivalent, too old a torch, no torch.accelerator backend (xla), and
        # `torch` meaning something else here.
        Invalid("import torch.cuda\nready = torch.cuda.is_initialized()\ntorch.cuda.init()\n", lines=[2, 3]),
        Invalid("import torch\nok = torch.cuda.is_available()\n", lines=[2], options={"torch-version": "2.5"}),
        Invalid("import torch\nok = torch.cuda.is_available()\n", lines=[2], device="xla"),
        Invalid("from torch.cuda import device_count\ndef f(torch):\n    return device_count()\n", lines=[3]),
    ]
