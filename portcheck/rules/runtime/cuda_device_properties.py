from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaDeviceProperties(CudaApiRule):
    """## What it does
    Reports queries of the CUDA device: `torch.cuda.get_device_name()`,
    `get_device_properties()`, `get_device_capability()`, `is_bf16_supported()`,
    `get_arch_list()`, and the NVML-backed `utilization()`, `temperature()` and friends.

    ## Why is this bad?
    Without CUDA most raise. `is_bf16_supported()` returns False, so code that picks its
    training dtype with it silently falls back to float16 or float32 on TPU and Trainium, where
    bfloat16 is native. Capability gates such as `>= (8, 0)` have no meaning elsewhere.

    ## Example
    ```python
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    ```

    ## Use instead
    ```python
    caps = torch.accelerator.get_device_capability()
    dtype = torch.bfloat16 if torch.bfloat16 in caps["supported_dtypes"] else torch.float16
    ```

    ## Targets
    An error on every target but ROCm. `torch.accelerator.get_device_capability()` (torch 2.13)
    returns a dict of supported dtypes, not `(major, minor)`: SM-version checks need a person.
    `torch.accelerator.get_device_name` does not exist.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC206"
    name = "cuda-device-properties"

    VALID = [
        Valid("import torch\ncaps = torch.accelerator.get_device_capability()\n"),
        Valid("def name(torch):\n    return torch.cuda.get_device_name()\n"),
        Valid("import platform\nprint(platform.processor())\n"),
    ]
    INVALID = [
        Invalid("import torch\nprint(torch.cuda.get_device_name(0))\n", lines=[2]),
        Invalid("import torch as T\nif T.cuda.get_device_capability() >= (8, 0):\n    pass\n", lines=[2]),
        Invalid("from torch import cuda\nbf16 = cuda.is_bf16_supported()\n", lines=[2], message="is_bf16_supported"),
        Invalid(
            "from torch.cuda import get_device_properties as props\nsm = props(0).multi_processor_count\n", lines=[2]
        ),
        Invalid("import torch.cuda\nload = torch.cuda.utilization()\n", lines=[2]),
    ]
