from __future__ import annotations

import libcst as cst

from portcheck import patterns, project
from portcheck.rule import ERROR, Invalid, Rule, Valid, per_target
from portcheck.targets import packages


class CudaOnlyPackageImport(Rule):
    """## What it does
    Reports imports of third-party packages that only work on NVIDIA GPUs (or a few vendors):
    flash_attn, xformers, apex, bitsandbytes, deepspeed.ops, transformer_engine, mamba_ssm,
    causal_conv1d, liger_kernel, unsloth, flashinfer, pynvml, nvidia.dali, tensorrt, RAPIDS,
    quantisation kernels and more (the table is `portcheck/targets/packages.toml`).

    ## Why is this bad?
    They ship CUDA kernels (or Triton kernels, or talk to NVML): on TPU, Trainium, Apple and
    most other targets they fail to install, fail to import, or fail at the first call. Each
    one is a dependency the port must replace.

    ## Example
    ```python
    from flash_attn import flash_attn_func

    out = flash_attn_func(q, k, v, causal=True)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```
    Each package's portable alternative is named in the finding.

    ## Targets
    An error where the package has no backend; a warning where a partial one exists (several
    have ROCm builds, bitsandbytes has CPU, XPU and Gaudi backends); off where it runs (Liger's
    Triton kernels on ROCm).

    ## Fix safety
    No automatic fix.
    """

    code = "PC701"
    name = "cuda-only-package-import"
    message = "imports `{module}`: {what}"
    hint = "instead: {instead}"
    severity = per_target(ERROR)
    triggers = tuple(sorted({name.split(".")[-1].encode() for p in packages.packages() for name in p.imports}))

    VALID = [
        Valid("import torch\nimport torch.nn.functional as F\n"),
        Valid("import deepspeed\nengine = deepspeed.initialize(model=model)\n"),
        Valid("from .flash_attn import attention\nfrom mypkg.apex_utils import helper\n"),
        Valid("def f(torch, apex):\n    return apex.amp\n"),
    ]
    INVALID = [
        Invalid("from flash_attn import flash_attn_func\n", lines=[1], message="FlashAttention"),
        Invalid("import torch\nimport xformers.ops as xops\n", lines=[2]),
        Invalid("import torch as T\nfrom apex.optimizers import FusedAdam\n", lines=[2]),
        Invalid("from torch import nn\nfrom deepspeed.ops.adam import FusedAdam\n", lines=[2]),
        Invalid(
            "from torch.cuda import synchronize as sync\nimport torch.cuda\nimport bitsandbytes as bnb\n", lines=[3]
        ),
        Invalid("import pynvml\n", lines=[1], options={"targets": ["tpu"]}),
        Invalid("import bitsandbytes\n", lines=[1], options={"targets": ["cpu"]}, message="bitsandbytes"),
    ]

    def visit_Import(self, node: cst.Import) -> None:
        self._check(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._check(node)

    def _check(self, node: cst.Import | cst.ImportFrom) -> None:
        for module in patterns.imported_modules(node, lambda m: packages.by_import(m) is not None):
            if self.ctx.project.is_local(module):
                continue  # the repository's own package (e.g. scanning mamba_ssm itself)
            package = packages.by_import(module)
            assert package is not None
            self.record(project.DEPENDENCY, package.key, node, written=module.split(".", 1)[0])
            self.report(node, severity=package.severities(), module=module, what=package.what, instead=package.instead)
