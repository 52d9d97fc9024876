from __future__ import annotations

import re

import libcst as cst

from portcheck import mmconfig, patterns
from portcheck.rule import Invalid, Rule, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY

# The resizing transforms of MMCV, MMDetection and MMSegmentation.
_RESIZES = frozenset({"Resize", "RandomResize", "RandomChoiceResize", "ResizeShortestEdge"})
# MMDetection 3's batch augment that pads every batch to one size.
_BATCH_PAD = "BatchFixedSizePad"
_TRAIN_PIPELINE = re.compile(r"train.*pipeline|pipeline.*train", re.IGNORECASE)


class OpenMMLabVaryingResize(Rule):
    """## What it does
    Reports, in the training pipeline of an OpenMMLab config (`train_pipeline = [...]` in an
    MMDetection or MMSegmentation config: a module that sets `_base_` or builds its settings
    as `dict(type=...)`), a resize that keeps each image's aspect ratio (`keep_ratio=True`) or
    draws its scale at random (`ratio_range=`), also among AutoAugment's policies, where
    nothing in the pipeline pads the batch to one fixed size (`dict(type="Pad",
    size=(1024, 1024))`, MMDetection 3's `BatchFixedSizePad`). The config is read as data;
    nothing is executed.

    ## Why is this bad?
    Every batch then takes the shape of its own images: COCO's images have hundreds of aspect
    ratios, and `Pad(size_divisor=32)` only rounds them. `torch.compile` with `dynamic=False`
    (TorchTPU's and TorchNeuron's default) and torch_xla compile a new graph for each new
    shape, which is most steps, and Trainium needs every shape known ahead of time.

    ## Example
    ```python
    train_pipeline = [
        dict(type="LoadImageFromFile"),
        dict(type="Resize", img_scale=(1333, 800), keep_ratio=True),
        dict(type="Pad", size_divisor=32),
    ]
    ```

    ## Use instead
    ```python
    train_pipeline = [
        dict(type="LoadImageFromFile"),
        dict(type="Resize", img_scale=(1333, 800), keep_ratio=True),
        dict(type="Pad", size=(1344, 1344)),  # one shape for every batch
    ]
    ```
    or resize to a fixed size (`keep_ratio=False`), or crop to one (`RandomCrop` and a
    `Pad(size=crop_size)`, as MMSegmentation's configs do).

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the fixed size trades padding against resolution.
    """

    code = "PC516"
    name = "openmmlab-varying-resize"
    message = (
        "`{what}` in the training pipeline gives each batch the size of its own images: shapes change from step"
        " to step, and a compiled step recompiles for each"
    )
    hint = "pad every batch to one size (dict(type='Pad', size=(H, W))), or resize to a fixed size (keep_ratio=False)"
    severity = RECOMPILE_SEVERITY
    triggers = (b"keep_ratio", b"ratio_range")

    VALID = [
        # MMSegmentation: a random scale, cropped and padded to one size
        Valid(
            "_base_ = ['../_base_/default_runtime.py']\ncrop_size = (512, 512)\ntrain_pipeline = [\n"
            "    dict(type='Resize', img_scale=(2048, 512), ratio_range=(0.5, 2.0)),\n"
            "    dict(type='RandomCrop', crop_size=crop_size),\n    dict(type='Pad', size=crop_size, pad_val=0),\n]\n"
        ),
        # the test pipeline, and a fixed-size resize
        Valid(
            "_base_ = './base.py'\ntest_pipeline = [dict(type='Resize', img_scale=(1333, 800), keep_ratio=True)]\n"
            "train_pipeline = [dict(type='Resize', img_scale=(1024, 1024), keep_ratio=False)]\n"
        ),
        # no config: a program's own dicts
        Valid(
            "import torch\nimport torch as T\nfrom torch import nn\nimport torch.nn.functional as F\n"
            "from torch.nn import functional as tf\n"
            "train_pipeline = [dict(kind='Resize', keep_ratio=True)]\n"
            "def build(torch):\n    return torch.nn.Identity()\n"
        ),
        Valid(
            "_base_ = './base.py'\ntrain_pipeline = [dict(type='Resize', img_scale=(1333, 800), keep_ratio=True)]\n",
            options={"targets": ["cpu", "mps", "rocm"]},
        ),
    ]
    INVALID = [
        Invalid(  # MMDetection 2's COCO pipeline
            "_base_ = ['../_base_/models/mask_rcnn_r50_fpn.py']\ntrain_pipeline = [\n"
            "    dict(type='LoadImageFromFile'),\n    dict(type='Resize', img_scale=(1333, 800), keep_ratio=True),\n"
            "    dict(type='Pad', size_divisor=32),\n]\n",
            lines=[4],
            message="`Resize(keep_ratio=True)` in the training pipeline",
        ),
        Invalid(  # Swin's and ConvNeXt's multi-scale AutoAugment policies: each policy once
            "_base_ = ['../_base_/models/cascade_mask_rcnn.py']\ntrain_pipeline = [\n"
            "    dict(type='AutoAugment',\n         policies=[\n"
            "             [dict(type='Resize', img_scale=[(480, 1333), (800, 1333)], multiscale_mode='value', keep_ratio=True)],\n"
            "             [dict(type='Resize', img_scale=[(400, 1333), (600, 1333)], keep_ratio=True),\n"
            "              dict(type='RandomCrop', crop_type='absolute_range', crop_size=(384, 600)),\n"
            "              dict(type='Resize', img_scale=[(480, 1333), (800, 1333)], override=True, keep_ratio=True)],\n"
            "         ]),\n]\n",
            lines=[5, 6, 8],
        ),
        Invalid(  # a datasets file of `_base_`: no `_base_` of its own, settings of typed dicts in lists
            "dataset_type = 'CocoDataset'\nimg_norm_cfg = dict(mean=[123.675, 116.28, 103.53], to_rgb=True)\n"
            "train_pipeline = [\n    dict(type='LoadImageFromFile'),\n"
            "    dict(type='Resize', img_scale=(1333, 800), keep_ratio=True),\n]\n",
            lines=[5],
        ),
        Invalid(  # MMDetection 3: a random scale
            "model = dict(type='RetinaNet')\ntrain_pipeline = [\n"
            "    dict(type='RandomResize', scale=(1333, 800), ratio_range=(0.1, 2.0), keep_ratio=True),\n]\n",
            lines=[3],
            message="`RandomResize(keep_ratio=True)`",
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        settings = mmconfig.settings(node)
        if any(mmconfig.kind(each) == _BATCH_PAD for _, value in settings for each in mmconfig.dicts(value)):
            return  # the model's data preprocessor pads every batch to one size
        for target, value in settings:
            if not _TRAIN_PIPELINE.search(patterns.target_name(target) or ""):
                continue
            built = mmconfig.dicts(value)
            if any(mmconfig.kind(each) == "Pad" and patterns.keyword(each, "size") is not None for each in built):
                continue
            for each in built:
                what = _varying_resize(each)
                if what is not None:
                    self.report(each, what=what)


def _varying_resize(built: cst.Call) -> str | None:
    """`Resize(keep_ratio=True)` for a resize that keeps the aspect ratio or draws its scale;
    else None."""
    kind = mmconfig.kind(built)
    if kind not in _RESIZES:
        return None
    keep = patterns.keyword(built, "keep_ratio")
    if keep is not None and patterns.is_true(keep.value):
        return f"{kind}(keep_ratio=True)"
    return f"{kind}(ratio_range=...)" if patterns.keyword(built, "ratio_range") is not None else None
