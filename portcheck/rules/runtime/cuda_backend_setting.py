from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaBackendSetting(CudaApiRule):
    """## What it does
    Reports settings of CUDA libraries under `torch.backends.cuda`: the deprecated
    `sdp_kernel()` context, `enable_flash_sdp()` and the other attention switches, attention
    kernel availability checks, `preferred_linalg_library()`, `cufft_plan_cache`, and reduced
    precision reduction flags.

    ## Why is this bad?
    Off CUDA they configure libraries that do not exist: the flags are silently ignored and the
    availability checks answer for kernels the target does not have. `sdp_kernel()` is
    deprecated (FutureWarning) in favour of `torch.nn.attention.sdpa_kernel()`.

    ## Example
    ```python
    with torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False):
        out = F.scaled_dot_product_attention(q, k, v)
    ```

    ## Use instead
    ```python
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = F.scaled_dot_product_attention(q, k, v)
    ```

    ## Targets
    Mostly info (a harmless no-op) or a warning (an answer about CUDA kernels); off on ROCm.
    The flash and memory-efficient SDPA backends are CUDA/ROCm kernels: on tpu, neuron and mps
    restrict `sdpa_kernel` to what the backend implements, or drop it.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC211"
    name = "cuda-backend-setting"

    VALID = [
        Valid("from torch.nn.attention import sdpa_kernel, SDPBackend\nctx = sdpa_kernel([SDPBackend.MATH])\n"),
        Valid("def configure(torch):\n    torch.backends.cuda.enable_flash_sdp(True)\n"),
        Valid("import torch\ntorch.backends.mps.is_available()\n"),
    ]
    INVALID = [
        Invalid("import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=True):\n    pass\n", lines=[2]),
        Invalid("import torch as T\nT.backends.cuda.enable_flash_sdp(False)\n", lines=[2]),
        Invalid("from torch import backends\nbackends.cuda.preferred_linalg_library('magma')\n", lines=[2]),
        Invalid("from torch.backends.cuda import flash_sdp_enabled as flash_on\nif flash_on():\n    pass\n", lines=[2]),
        Invalid("import torch.backends.cuda\ntorch.backends.cuda.cufft_plan_cache.max_size = 32\n", lines=[2]),
        Invalid("import torch\ntorch.backends.cuda.some_future_knob = 1\n", lines=[2]),
    ]
