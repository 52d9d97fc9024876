from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudnnFlag(CudaApiRule):
    """## What it does
    Reports cuDNN switches: `torch.backends.cudnn.benchmark`, `.deterministic`, `.enabled`,
    `.is_available()`, and the rest of `torch.backends.cudnn`.

    ## Why is this bad?
    cuDNN exists only on NVIDIA GPUs, and these switches have no effect without it. `benchmark`
    and `enabled` are harmless no-ops elsewhere, but `deterministic = True` is usually there for
    reproducibility: off CUDA it asks nothing of the target's kernels, so whatever determinism
    the run needs must come from `torch.use_deterministic_algorithms(True)`.

    ## Example
    ```python
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    ```

    ## Use instead
    ```python
    torch.use_deterministic_algorithms(True)
    ```

    ## Targets
    Info for the harmless switches and a warning for `deterministic` on mps, xpu, npu and hpu;
    off on ROCm (MIOpen answers to them). `deterministic` is info on the CPU, where most
    kernels are deterministic already, on tpu and xla, whose XLA programs run the same way every
    time, and on Trainium, where deterministic mode disables adaptive eager fusion: asking for
    it there is a trade of speed, not a port.

    ## Fix safety
    No automatic fix. The switches do nothing off CUDA, but deleting an assignment changes
    what later reads of the flag return (`if torch.backends.cudnn.benchmark:`, logging of the
    configuration), and `torch.use_deterministic_algorithms(True)` is stricter than
    `cudnn.deterministic = True` (it raises on operations without a deterministic
    implementation), so neither is provably behaviour-keeping.
    """

    code = "PC306"
    name = "cudnn-flag"

    VALID = [
        Valid("import torch\ntorch.use_deterministic_algorithms(True)\n"),
        Valid("def configure(torch):\n    torch.backends.cudnn.benchmark = True\n"),
        Valid("import torch\ntorch.backends.cudnn.benchmark = True\n", options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid(
            "import torch\ntorch.backends.cudnn.deterministic = True\n",
            lines=[2],
            message="has no effect (it only ever made cuDNN's kernels deterministic)",
        ),
        Invalid("import torch as T\nT.backends.cudnn.benchmark = True\n", lines=[2]),
        Invalid("from torch import backends\nif backends.cudnn.is_available():\n    pass\n", lines=[2]),
        Invalid("from torch.backends import cudnn as cu\ncu.enabled = False\n", lines=[2]),
        Invalid("import torch.backends.cudnn as cudnn\ncudnn.benchmark = True\n", lines=[2]),
    ]
