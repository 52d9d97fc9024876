from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
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
    Only `is_bf16_supported()` (called without arguments) is fixed:
    - safe: `True` where bfloat16 is native (tpu, neuron, xla, hpu), and `False` where there is
      never an accelerator (`--device cpu`), which is what the CUDA call answers there;
    - unsafe elsewhere: `torch.bfloat16 in torch.accelerator.get_device_capability()["supported_dtypes"]`
      (torch 2.13; under `--device auto` guarded by `torch.accelerator.is_available()`, else
      `False`), since "supported" there means the device can hold bfloat16, not that it
      computes it fast.
    Not fixed: device names and properties, capability gates such as `>= (8, 0)` (the
    replacement returns a dict, not `(major, minor)`), and the NVML queries: each needs a person.
    """

    code = "PC206"
    name = "cuda-device-properties"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\ncaps = torch.accelerator.get_device_capability()\n"),
        Valid("def name(torch):\n    return torch.cuda.get_device_name()\n"),
        Valid("import platform\nprint(platform.processor())\n"),
    ]
    INVALID = [
        Invalid("import torch\nprint(torch.cuda.get_device_name(0))\n", lines=[2]),
        Invalid("import torch as T\nif T.cuda.get_device_capability() >= (8, 0):\n    pass\n", lines=[2]),
        Invalid(
            "from torch import cuda\nbf16 = cuda.is_bf16_supported()\n",
            lines=[2],
            message="is_bf16_supported",
            fixed="from torch import cuda\nbf16 = True\n",
        ),
        Invalid(
            "import torch as T\ndtype = T.bfloat16 if T.cuda.is_bf16_supported() else T.float16\n",
            lines=[2],
            device="cpu",
            fixed="import torch as T\ndtype = T.bfloat16 if False else T.float16\n",
        ),
        Invalid(
            "import torch as T\ndtype = T.bfloat16 if T.cuda.is_bf16_supported() else T.float16\n",
            lines=[2],
            device="auto",
            unsafe=True,
            fixed="import torch as T\ndtype = T.bfloat16 if ((T.bfloat16 in "
            'T.accelerator.get_device_capability()["supported_dtypes"]) if T.accelerator.is_available() else False)'
            " else T.float16\n",
        ),
        Invalid(
            "from torch.cuda import is_bf16_supported as bf16_ok\nuse_bf16 = bf16_ok()\n",
            lines=[2],
            device="xpu",
            unsafe=True,
            fixed="from torch.cuda import is_bf16_supported as bf16_ok\nimport torch\n"
            'use_bf16 = torch.bfloat16 in torch.accelerator.get_device_capability()["supported_dtypes"]\n',
        ),
        # Not fixed: unsafe without --unsafe-fixes, too old a torch for the capability query,
        # an argument.
        Invalid("from torch import cuda\nbf16 = cuda.is_bf16_supported()\n", lines=[2], device="xpu"),
        Invalid(
            "from torch import cuda\nbf16 = cuda.is_bf16_supported()\n",
            lines=[2],
            device="xpu",
            unsafe=True,
            options={"torch-version": "2.12"},
        ),
        Invalid("from torch import cuda\nbf16 = cuda.is_bf16_supported(including_emulation=False)\n", lines=[2]),
        Invalid(
            "from torch.cuda import get_device_properties as props\nsm = props(0).multi_processor_count\n", lines=[2]
        ),
        Invalid("import torch.cuda\nload = torch.cuda.utilization()\n", lines=[2]),
        # llama-recipes' bf16 test: the port rewrites the whole test, this line with its check
        Invalid(
            "import torch\nimport torch.distributed as dist\nbf16_ready = (\n    torch.version.cuda\n"
            "    and torch.cuda.is_bf16_supported()\n    and dist.is_nccl_available()\n)\n",
            lines=[5],
            message="a port that rewrites the check rewrites this too",
            fixed="import torch\nimport torch.distributed as dist\nbf16_ready = (\n    torch.version.cuda\n"
            "    and True\n    and dist.is_nccl_available()\n)\n",
        ),
    ]
