from __future__ import annotations

import libcst as cst

from portcheck import mmconfig, patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, OFF, WARNING, Invalid, Rule, Valid, per_target

# MMEngine's AmpOptimWrapper asserts a GPU, an NPU or an MLU when it is built.
_WRAPPER_SEVERITY = per_target(ERROR, npu=OFF, rocm=OFF)
# MMCV's Fp16OptimizerHook and the Apex hooks: float16 where the chip computes in bfloat16.
_FLOAT16_SEVERITY = {
    name: WARNING if target.amp_dtype == "bfloat16" else OFF for name, target in target_data.all_targets().items()
}
_AMP_WRAPPER = "AmpOptimWrapper"
_FP16_HOOK = "Fp16OptimizerHook"
_CUDA_AMP = "autocasts to float16 through torch.cuda.amp, which leaves tensors on other devices alone: the model trains in float32"


class OpenMMLabFp16Config(Rule):
    """## What it does
    Reports float16 mixed precision turned on in an OpenMMLab config (a Python module that sets
    `_base_`, or builds its settings as `dict(type=...)`): MMEngine's
    `optim_wrapper = dict(type="AmpOptimWrapper", ...)`, MMCV's `fp16 = dict(loss_scale=...)`
    and `dict(type="Fp16OptimizerHook")`, and `use_fp16=True` in an optimizer hook's settings
    (the Apex-based `DistOptimizerHook` of the ConvNeXt, Swin and BEiT detection and
    segmentation configs). The config is read as data; nothing is executed.

    ## Why is this bad?
    `AmpOptimWrapper` asserts a GPU, an NPU or an MLU when it is built ("AmpOptimizerWrapper is
    only available training on gpu, npu or mlu"): the run stops at start-up. MMCV's float16
    hook autocasts with `torch.cuda.amp`, which leaves tensors on another device alone, and
    its GradScaler turns itself off without CUDA: the model silently trains in float32. Apex's
    `amp` needs CUDA. TPU, Trainium, XLA and Gaudi compute in bfloat16, which needs no loss
    scaling.

    ## Example
    ```python
    optim_wrapper = dict(type="AmpOptimWrapper", optimizer=dict(type="AdamW", lr=1e-4))
    fp16 = dict(loss_scale=512.0)
    optimizer_config = dict(type="DistOptimizerHook", use_fp16=True)
    ```

    ## Use instead
    ```python
    optim_wrapper = dict(type="OptimWrapper", optimizer=dict(type="AdamW", lr=1e-4))
    fp16 = None
    optimizer_config = dict(type="DistOptimizerHook", use_fp16=False)
    ```
    and autocast to `torch.bfloat16` where the model runs (`torch.autocast(device_type,
    dtype=torch.bfloat16)`).

    ## Targets
    `AmpOptimWrapper`: an error on every target but NPU and ROCm, which it supports. The
    float16 hooks and `use_fp16`: a warning on targets whose target data gives
    `amp-dtype = "bfloat16"` (tpu, neuron, xla, hpu, cpu); off elsewhere.

    ## Fix safety
    No automatic fix: the precision a config trains in changes its numerics.
    """

    code = "PC310"
    name = "openmmlab-fp16-config"
    message = "{what} {effect}"
    hint = "train without loss scaling and autocast to torch.bfloat16 where the model runs"
    severity = _FLOAT16_SEVERITY
    triggers = (b"fp16", b"Fp16", _AMP_WRAPPER.encode())

    VALID = [
        Valid("_base_ = ['../_base_/default_runtime.py']\nfp16 = None\noptim_wrapper = dict(type='OptimWrapper')\n"),
        Valid(  # no config: a program's own dict and keyword
            "import torch\nimport torch as T\nfrom torch import nn\nimport torch.nn as tnn\n"
            "from torch.cuda import amp as cuda_amp\nfp16 = dict(enabled=True)\ntrain(model, use_fp16=True)\n"
            "def build(torch, dict):\n    return dict(type='AmpOptimWrapper')\n"
        ),
        Valid(  # float16 is the device's own half precision there
            "_base_ = ['./base.py']\nfp16 = dict(loss_scale=512.0)\n"
            "optimizer_config = dict(type='DistOptimizerHook', use_fp16=True)\n",
            options={"targets": ["mps", "xpu"]},
        ),
        Valid("_base_ = './base.py'\noptim_wrapper = dict(type='AmpOptimWrapper')\n", options={"targets": ["npu"]}),
    ]
    INVALID = [
        Invalid(
            "_base_ = ['../_base_/schedule_1x.py']\noptim_wrapper = dict(\n    type='AmpOptimWrapper',\n"
            "    optimizer=dict(type='AdamW', lr=1e-4),\n)\n",
            lines=[3],
            message="only available training on gpu, npu or mlu",
        ),
        Invalid(  # ConvNeXt's segmentation configs
            "_base_ = ['../_base_/models/upernet_convnext.py']\nrunner = dict(type='IterBasedRunnerAmp')\n"
            "fp16 = None\noptimizer_config = dict(\n    type='DistOptimizerHook',\n    update_interval=1,\n"
            "    use_fp16=True,\n)\n",
            lines=[7],
            message="`use_fp16=True` asks the optimizer hook for Apex's float16 AMP",
        ),
        Invalid(
            "model = dict(type='MaskRCNN')\nfp16 = dict(loss_scale=512.0)\n"
            "optimizer_config = dict(type='Fp16OptimizerHook', loss_scale='dynamic')\n",
            lines=[2, 3],
            message="torch.cuda.amp",
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        for target, value in mmconfig.settings(node):
            if patterns.target_name(target) == "fp16" and mmconfig.builds_dict(value):
                self._report_float16(value, "`fp16 = dict(...)`, MMCV's Fp16OptimizerHook,")
            for built in mmconfig.dicts(value):
                self._check_dict(built)

    def _check_dict(self, built: cst.Call) -> None:
        kind = patterns.keyword(built, "type")
        named = mmconfig.kind(built)
        if kind is not None and named == _AMP_WRAPPER:
            effect = 'asserts a GPU, NPU or MLU when it is built ("only available training on gpu, npu or mlu")'
            self.report(kind.value, severity=_WRAPPER_SEVERITY, what="MMEngine's `AmpOptimWrapper`", effect=effect)
        elif kind is not None and named == _FP16_HOOK:
            self._report_float16(kind.value, "MMCV's `Fp16OptimizerHook`")
        flag = patterns.keyword(built, "use_fp16")
        if flag is not None and patterns.is_true(flag.value):
            self._report_float16(
                flag, "`use_fp16=True`", "asks the optimizer hook for Apex's float16 AMP, which needs CUDA"
            )

    def _report_float16(self, node: cst.CSTNode, what: str, effect: str = _CUDA_AMP) -> None:
        self.report(node, what=what, effect=effect)
