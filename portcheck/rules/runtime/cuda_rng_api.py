from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaRngApi(CudaApiRule):
    """## What it does
    Reports CUDA random-number state calls: `torch.cuda.manual_seed(s)`, `manual_seed_all(s)`,
    `seed()`, `initial_seed()`, `get_rng_state()`, `set_rng_state()`, `default_generators`.

    ## Why is this bad?
    Without CUDA, `manual_seed` queues a seed that is never applied, so the target device's
    generator is not seeded and runs are not reproducible; `get_rng_state()` and
    `initial_seed()` raise.

    ## Example
    ```python
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    ```

    ## Use instead
    ```python
    torch.manual_seed(0)  # seeds the CPU and every registered device
    ```

    ## Targets
    A warning where seeding silently does nothing, an error where the call raises; off on ROCm.
    `torch.accelerator.random` is not in torch 2.13, and TorchTPU raises on
    `torch.tpu.get_rng_state()` from user code: keep a `torch.Generator(device=...)` if you need
    per-device state.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC205"
    name = "cuda-rng-api"

    VALID = [
        Valid("import torch\ntorch.manual_seed(0)\n"),
        Valid("import numpy as np\nnp.random.seed(0)\n"),
        Valid("def seed_all(torch, s):\n    torch.cuda.manual_seed_all(s)\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.cuda.manual_seed_all(0)\n", lines=[2]),
        Invalid("import torch as T\nT.cuda.manual_seed(42)\n", lines=[2]),
        Invalid("from torch import cuda\nstate = cuda.get_rng_state()\n", lines=[2]),
        Invalid("from torch.cuda import manual_seed as cuda_seed\ncuda_seed(1)\n", lines=[2]),
        Invalid("import torch.cuda.random\ns = torch.cuda.random.initial_seed()\n", lines=[2]),
        Invalid("import torch\ng = torch.cuda.default_generators[0]\n", lines=[2], message="default_generators"),
    ]
