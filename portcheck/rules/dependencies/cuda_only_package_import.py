from __future__ import annotations

import libcst as cst

from portcheck import patterns, project
from portcheck.rule import ERROR, FileContext, Invalid, Rule, Valid, at_most_info, at_most_warning, per_target
from portcheck.rules.dependencies import by_choice, optional_import
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
    Triton kernels on ROCm). An optional import is at most a warning (info on the CPU), and
    `portcheck report` lists it apart without counting it as a blocker: one inside `try:`
    whose `except` catches ImportError (or ModuleNotFoundError, Exception, a bare `except:`)
    and neither raises nor exits, so the program has a path without the package, or one under
    an availability check (`if is_flash_attn_2_available():`, any `is_..._available()`, or
    `importlib.util.find_spec(...)`): the target silently takes that other path, without the
    package's fast kernels, and the port gives it the target's own or drops the import. Info
    where the import runs only by the user's choice: under a test that selects the package
    (`if args.deepspeed:`), or inside a function named for exporting (`export_onnx`,
    `to_tensorrt`, `build_trt_engine`: a word `export`/`exporter` or an export format: onnx,
    tensorrt, trt, coreml, tflite, openvino), which runs only when a model is exported for
    another runtime, not when it trains or serves on the target. A handler that only logs (`logging.error("install
    xformers")`) is no path without the package where the module reads those names: they
    stay unbound and the first use raises NameError. Each import statement is reported once, as each is a line the port
    removes; a guarded import of a package the module also imports unguarded is not reported
    apart. What code calls through a guarded import, cuda-only-package-call (PC707) reports:
    the guard lets it run wherever the package is installed.

    ## Fix safety
    No automatic fix.
    """

    code = "PC701"
    name = "cuda-only-package-import"
    message = "imports `{module}`: {what}"
    hint = "instead: {instead}"
    severity = per_target(ERROR)
    triggers = tuple(sorted({name.split(".")[-1].encode() for p in packages.packages() for name in p.imports}))
    cuda_only = True

    VALID = [
        Valid("import torch\nimport torch.nn.functional as F\n"),
        Valid("import deepspeed\nengine = deepspeed.initialize(model=model)\n", options={"targets": ["xpu", "hpu"]}),
        Valid("from .flash_attn import attention\nfrom mypkg.apex_utils import helper\n"),
        Valid("def f(torch, apex):\n    return apex.amp\n"),
    ]
    INVALID = [
        Invalid(  # flux's TensorRT path: polygraphy's TensorRT backend
            "import torch\nfrom polygraphy.backend.trt import engine_from_bytes\n",
            lines=[2],
            message="TensorRT",
        ),
        Invalid(
            "import torch\nfrom torch2trt import TRTModule\n", lines=[2], message="TensorRT"
        ),  # efficientvit's GazeSAM
        Invalid(  # ResNeSt's detectron2 backbone: detectron2 is portable, its deformable convolutions are not
            "import torch\nfrom detectron2.layers import Conv2d, DeformConv, get_norm\n",
            lines=[2],
            message="detectron2's deformable convolutions",
        ),
        # lit-llama: DeepSpeed's checkpoint converter, imported where the strategy is DeepSpeed's;
        # TinyLlama: flash-attn under a CUDA check, with SDPA after it
        Invalid(
            "import torch\nfrom lightning.fabric.strategies import DeepSpeedStrategy\n"
            "def save(fabric, path):\n    if isinstance(fabric.strategy, DeepSpeedStrategy):\n"
            "        from deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_fp32_state_dict\n"
            "def attend(q, k, v):\n    if q.device.type == 'cuda':\n        from flash_attn import flash_attn_func\n"
            "        return flash_attn_func(q, k, v)\n    return torch.nn.functional.scaled_dot_product_attention(q, k, v)\n",
            lines=[5, 8],
        ),
        Invalid("from flash_attn import flash_attn_func\n", lines=[1], message="FlashAttention"),
        Invalid(  # LLaVA: a fallback between two versions' names needs the package all the same
            "try:\n    from flash_attn.flash_attn_interface import flash_attn_unpadded_qkvpacked_func as attend\n"
            "except ImportError:\n    from flash_attn.flash_attn_interface import flash_attn_varlen_qkvpacked_func as attend\n",
            lines=[2, 4],
        ),
        Invalid(  # TinyLlama: the extensions built from flash-attn's and apex's sources
            "import torch\nimport xentropy_cuda_lib\nimport dropout_layer_norm\nfrom amp_C import multi_tensor_l2norm\n",
            lines=[2, 3, 4],
        ),
        Invalid("import torch\nimport xformers.ops as xops\n", lines=[2]),
        Invalid("import torch as T\nfrom apex.optimizers import FusedAdam\n", lines=[2]),
        Invalid("from torch import nn\nfrom deepspeed.ops.adam import FusedAdam\n", lines=[2]),
        Invalid(  # GFPGAN: BasicSR's ops import without their build, and fail when called
            "import torch\nimport basicsr.archs.arch_util\nfrom basicsr.ops.fused_act import FusedLeakyReLU\n",
            lines=[3],
            message="BasicSR's CUDA ops",
        ),
        Invalid(
            "from torch.cuda import synchronize as sync\nimport torch.cuda\nimport bitsandbytes as bnb\n", lines=[3]
        ),
        Invalid("import pynvml\n", lines=[1], options={"targets": ["tpu"]}),
        Invalid("import bitsandbytes\n", lines=[1], options={"targets": ["cpu"]}, message="bitsandbytes"),
        # optional: a warning (info by the user's choice), with where it is guarded
        Invalid(
            "try:\n    from flash_attn import flash_attn_func\nexcept ImportError:\n    flash_attn_func = None\n",
            lines=[2],
            message="optional: guarded by try/except ImportError",
        ),
        Invalid(  # ConvNeXt: a handler that only prints, where nothing reads what the import binds
            "try:\n    import apex\nexcept:\n    print('apex is not installed')\n"
            "def save(state):\n    return state  # apex.amp.state_dict()\n",
            lines=[2],
            message="optional: guarded by try/except ImportError",
        ),
        Invalid(
            "def to_tensorrt(model):\n    import tensorrt as trt\n    return trt.Builder(model)\n",
            lines=[2],
            message="optional: only in the export function `to_tensorrt`",
        ),
        # not optional: the handler re-raises, the function is no export
        Invalid(
            "try:\n    import apex\nexcept ImportError as e:\n    raise RuntimeError('pip install apex') from e\n",
            lines=[2],
        ),
        Invalid(
            "def build_model():\n    import xformers.ops\n    return xformers.ops\n", lines=[2], message="xFormers"
        ),
        Invalid(
            "try:\n    import apex\nexcept (ImportError, OSError): sys.exit(1)\n", lines=[2], message="NVIDIA Apex"
        ),
        # one finding per import statement: each is a line the port removes
        Invalid(
            "import torch\nimport cutlass\nimport cutlass.cute as cute, cutlass.utils\nfrom cutlass import Float32\n",
            lines=[2, 3, 4],
        ),
        Invalid("import deepspeed\nfrom deepspeed.ops.adam import FusedAdam\n", lines=[1, 2], message="DeepSpeed"),
        Invalid(  # LLaVA's xformers patch: a handler that only logs leaves `xformers` unbound
            "import logging\ntry:\n    import xformers.ops\nexcept ImportError:\n"
            '    logging.error("xformers not found! Please install it.")\n',
            lines=[3],
            message="xFormers",
        ),
        Invalid(  # guarded by an availability check: optional; unguarded below: not
            "from transformers.utils import is_flash_attn_2_available\nif is_flash_attn_2_available():\n"
            "    from flash_attn import flash_attn_func\n",
            lines=[3],
            message="optional: only under `if is_flash_attn_2_available():`",
        ),
        Invalid(
            "import importlib.util\nif importlib.util.find_spec('apex') and use_apex:\n    import apex\n",
            lines=[3],
            message="optional: only under `if importlib.util.find_spec('apex') and use_apex:`",
        ),
        Invalid(
            "try:\n    import xformers.ops\nexcept ImportError:\n    pass\nimport xformers\n",
            lines=[5],
            message="xFormers",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[tuple[str, int]] = set()  # (package, import statement)
        self._optional: dict[str, list[int]] = {}  # package -> its optional imports' reports
        self._required: set[str] = set()  # packages imported unguarded somewhere

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
            optional = optional_import(self.ctx.ancestors, self.ctx, package, node)
            written = module.split(".", 1)[0]
            self.record(project.DEPENDENCY, package.key, node, written=written, optional=optional)
            if (package.key, id(node)) in self._reported:
                continue  # `import cutlass.cute, cutlass.utils`: one line to change
            self._reported.add((package.key, id(node)))
            severity, what = package.severities(), package.what
            if optional:
                self._optional.setdefault(package.key, []).append(len(self.reports))
                severity = at_most_info(severity) if by_choice(optional) else at_most_warning(severity)
                what = f"{what} (optional: {optional})"
            else:
                self._required.add(package.key)
            self.report(node, severity=severity, module=module, what=what, instead=package.instead)

    def leave_Module(self, node: cst.Module) -> None:
        """A package the module also imports unguarded is not optional there: its guarded
        imports are not reported apart."""
        dropped = {index for key in self._required for index in self._optional.get(key, ())}
        self.reports[:] = [report for index, report in enumerate(self.reports) if index not in dropped]
