from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaVersionCheck(CudaApiRule):
    """## What it does
    Reports version and build checks tied to CUDA: `torch.version.cuda`,
    `torch.backends.cuda.is_built()` and `torch.backends.cudnn.version()`.

    ## Why is this bad?
    Without CUDA they are None or False. Feature gates written as
    `if torch.version.cuda and float(torch.version.cuda) >= 11.8:` silently take their fallback
    path, and comparisons on None raise `TypeError`.

    ## Example
    ```python
    if torch.version.cuda is not None:
        use_fused_kernels()
    ```

    ## Use instead
    Gate on what you need, not on the CUDA toolkit:
    ```python
    if torch.accelerator.current_accelerator() is not None:
        use_fused_kernels()
    ```

    ## Targets
    A warning on every target, ROCm included: `torch.version.cuda` is None on ROCm builds,
    where `torch.version.hip` is the string to check. For TorchTPU and TorchNeuron read the
    plugin's version with `importlib.metadata.version()`.

    ## Fix safety
    No automatic fix: what a CUDA version gate stands for (a feature, a kernel, a bug
    workaround) decides what to check instead, and `torch.backends.cuda.is_built()` asks about
    the build, not about a device being there.
    """

    code = "PC210"
    name = "cuda-version-check"

    VALID = [
        Valid("import torch\nprint(torch.__version__)\n"),
        Valid("def check(torch):\n    return torch.version.cuda\n"),
        Valid("import torch\nhip = torch.version.hip\n"),
    ]
    INVALID = [
        Invalid("import torch\nif torch.version.cuda:\n    pass\n", lines=[2]),
        Invalid("import torch as T\nbuilt = T.backends.cuda.is_built()\n", lines=[2]),
        Invalid("from torch import version\nv = version.cuda\n", lines=[2]),
        Invalid("from torch.version import cuda as cuda_version\nprint(cuda_version)\n", lines=[2]),
        Invalid("import torch.backends.cudnn\nv = torch.backends.cudnn.version()\n", lines=[2]),
        Invalid("import torch\nv = torch.version.cuda\n", lines=[2], options={"targets": ["rocm"]}),
    ]
