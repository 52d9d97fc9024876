import libcst as cst

from portcheck import patterns
from portcheck.api_rule import CudaApiRule
from portcheck.rule import INFO, OFF, Invalid, SeverityMap, Valid
from portcheck.targets import api


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
    where `torch.version.hip` is the string to check. Info where the value is only told
    (`print(f"CUDA {torch.version.cuda}")`, `logger.info(...)`, `print0(...)`): the message
    says None, nothing else changes. For TorchTPU and TorchNeuron read the
    plugin's version with `importlib.metadata.version()`.

    ## Fix safety
    No automatic fix: what a CUDA version gate stands for (a feature, a kernel, a bug
    workaround) decides what to check instead, and `torch.backends.cuda.is_built()` asks about
    the build, not about a device being there.
    """

    code = "PC210"
    name = "cuda-version-check"

    def severities(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> SeverityMap:
        usual = super().severities(node, entry)
        return {t: min(level, INFO) if level > OFF else OFF for t, level in usual.items()} if self._told() else usual

    def effect(self, node: cst.Name | cst.Attribute, name: str, entry: api.ApiEntry) -> str:
        return "is None, which here only shows in a message" if self._told() else super().effect(node, name, entry)

    def _told(self) -> bool:
        """Only printed or logged: the message says None, nothing else changes."""
        return any(isinstance(a, cst.Call) and patterns.is_logging_call(a) for a in self.ctx.ancestors)

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
        Invalid(
            "import torch\nprint0(f'PyTorch {torch.__version__} for CUDA {torch.version.cuda}')\n",
            lines=[2],
            message="only shows in a message",
        ),
    ]
