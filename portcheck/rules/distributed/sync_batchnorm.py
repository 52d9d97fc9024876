from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.api_rule import in_annotation
from portcheck.rule import ERROR, OFF, WARNING, Invalid, Rule, Valid

_CLASSES = ("torch.nn.SyncBatchNorm", "torch.nn.modules.SyncBatchNorm", "torch.nn.modules.batchnorm.SyncBatchNorm")
_TYPE_TESTS = frozenset({"isinstance", "issubclass"})
_MMCV_NAME = "SyncBN"  # MMCV's registry name for torch.nn.SyncBatchNorm (mmcv/cnn/bricks/norm.py)
_SEVERITY_BY_SUPPORT = {"runs": OFF, "unverified": WARNING, "raises": ERROR}
_EFFECTS = {
    "raises": "raises ValueError on {where} in distributed training (its device check lets only cuda, hpu, xpu "
    "and the PrivateUse1 device through)",
    "unverified": "passes its device check on {where} (a PrivateUse1 device), but its synchronised path runs "
    "batch_norm_stats and batch_norm_gather_stats_with_counts, kernels no source says {where} has",
}


def _support(target: str) -> str:
    return target_data.get(target).sync_batchnorm


class SyncBatchnorm(Rule):
    """## What it does
    Reports `torch.nn.SyncBatchNorm`: built (`nn.SyncBatchNorm(64)`), converted to
    (`nn.SyncBatchNorm.convert_sync_batchnorm(model)`) or passed as a layer factory
    (`norm_layer=nn.SyncBatchNorm`), under any import alias; and MMCV's name for it in OpenMMLab
    configs and defaults (`norm_cfg = dict(type="SyncBN", requires_grad=True)`).

    ## Why is this bad?
    In distributed training SyncBatchNorm checks the input's device: only `cuda`, `hpu`, `xpu`
    and the PrivateUse1 device pass (torch/nn/modules/batchnorm.py); anywhere else (XLA, Apple,
    the CPU) the first training step raises `ValueError: SyncBatchNorm expected input tensor to
    be on GPU or XPU or privateuseone`. TorchTPU and TorchNeuron are PrivateUse1 devices, so
    they pass the check, but the synchronised path then runs `batch_norm_stats`,
    `batch_norm_gather_stats_with_counts` and their backward kernels, which neither documents.

    ## Example
    ```python
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    norm_cfg = dict(type="SyncBN", requires_grad=True)
    ```

    ## Use instead
    ```python
    norm_cfg = dict(type="BN", requires_grad=True)
    ```
    per-device BatchNorm with a per-device batch large enough for stable statistics, or
    GroupNorm/LayerNorm, which need no synchronisation; on XLA devices, statistics reduced
    with `torch.distributed.all_reduce` inside a BatchNorm of your own.

    ## Targets
    From the target data's `sync-batchnorm` fact: an error where it raises (xla, mps, cpu), a
    warning where the device passes the check but no source says the kernels exist (tpu,
    neuron, npu), off where it runs (xpu, hpu, rocm). Info under a CUDA check, which keeps it
    on CUDA.

    ## Fix safety
    No automatic fix: BatchNorm over each device's share of the batch, or another
    normalisation, changes what the model computes.
    """

    code = "PC407"
    name = "sync-batchnorm"
    message = "{what} {effect}"
    hint = "use per-device BatchNorm (a large enough per-device batch) or GroupNorm; on XLA, reduce the statistics yourself"
    severity = {name: _SEVERITY_BY_SUPPORT[_support(name)] for name in target_data.TARGET_ORDER}
    triggers = (b"SyncBatchNorm", _MMCV_NAME.encode())
    watched_names = _CLASSES
    cuda_only = True

    VALID = [
        Valid("import torch\nmodel = torch.nn.BatchNorm2d(64)\nnorm_cfg = dict(type='BN', requires_grad=True)\n"),
        Valid(  # a type test, a collection of types or an annotation makes none
            "import torch\nfrom torch import nn\nimport torch.nn as tnn\nfrom torch.nn import SyncBatchNorm as SBN\n"
            "def frozen(m: nn.SyncBatchNorm) -> bool:\n    return isinstance(m, (tnn.BatchNorm2d, SBN))\n"
            "BN_TYPES = (nn.BatchNorm2d, torch.nn.SyncBatchNorm)\n"
        ),
        Valid("def build(torch, dict):\n    return torch.nn.SyncBatchNorm(64), dict(type='SyncBN')\n"),
        Valid("import torch\nlayer = torch.nn.SyncBatchNorm(64)\n", options={"targets": ["xpu", "hpu", "rocm"]}),
        Valid("norm_cfg = dict(type='SyncBN', requires_grad=True)\n", options={"targets": ["xpu"]}),
    ]
    INVALID = [
        Invalid(
            "import torch\nmodel = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n",
            lines=[2],
            message="`torch.nn.SyncBatchNorm.convert_sync_batchnorm` raises ValueError on xla/mps/cpu",
        ),
        Invalid(
            "import torch.nn as nn\nlayer = nn.SyncBatchNorm(64)\n",
            lines=[2],
            message="raises ValueError on xla in distributed training",
            options={"targets": ["xla"]},
        ),
        Invalid("from torch import nn\nnorm = nn.SyncBatchNorm if args.sync_bn else nn.BatchNorm2d\n", lines=[2]),
        Invalid(
            "from torch.nn import SyncBatchNorm as SBN\nimport torch as T\nblock = Block(norm_layer=SBN)\n", lines=[3]
        ),
        Invalid(  # ConvNeXt's and Swin's detection and segmentation configs
            "_base_ = ['../_base_/default_runtime.py']\nnorm_cfg = dict(type='SyncBN', requires_grad=True)\n"
            "model = dict(\n    roi_head=dict(bbox_head=[dict(type='ConvFCBBoxHead', norm_cfg=dict(type='SyncBN'))]),\n)\n",
            lines=[2, 4],
            message="MMCV's `SyncBN` (torch.nn.SyncBatchNorm)",
        ),
        Invalid(
            "import torch\nif torch.cuda.device_count() > 1:\n    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n",
            lines=[3],
            message="reached only under a CUDA check",
        ),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if in_annotation(self.ctx.ancestors) or self._type_tested():
            return
        self._report(node, f"`{qualified_name}`")

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is not cst.Name or node.func.value != "dict" or not self.ctx.is_free("dict"):
            return
        kind = patterns.keyword(node, "type")
        if kind is not None and patterns.string_value(kind.value) == _MMCV_NAME:
            self._report(kind.value, f"MMCV's `{_MMCV_NAME}` (torch.nn.SyncBatchNorm)")

    def _type_tested(self) -> bool:
        """An argument of `isinstance` or `issubclass`: only compared with, never built (also
        in a collection of types, `bn_types = (nn.BatchNorm2d, nn.SyncBatchNorm)`)."""
        return type(self.ctx.parent) is cst.Element or any(
            type(ancestor) is cst.Call and type(ancestor.func) is cst.Name and ancestor.func.value in _TYPE_TESTS
            for ancestor in self.ctx.ancestors
        )

    def _report(self, node: cst.CSTNode, what: str) -> None:
        by_support: dict[str, list[str]] = {}
        for target in self.ctx.targets:
            by_support.setdefault(_support(target), []).append(target)
        effects = [
            _EFFECTS[support].format(where="/".join(by_support[support]))
            for support in _EFFECTS
            if support in by_support
        ]
        effect = "; it ".join(effects) or "runs on the selected targets"
        self.report(node, what=what, effect=effect)
