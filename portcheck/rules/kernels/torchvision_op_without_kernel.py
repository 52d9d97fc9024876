from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.rule import ERROR, OFF, WARNING, Invalid, Rule, SeverityMap, Valid
from portcheck.targets import vision_ops
from portcheck.targets.vision_ops import CPU_FALLBACK, FAILS, VisionOp

# What a data-dependent output shape costs, by the target's `dynamic-shapes` fact.
_SHAPE_SEVERITY = {"unsupported": ERROR, "recompile": WARNING, "free": OFF}


def _shape_severity(op: VisionOp, target: str) -> Severity:
    return _SHAPE_SEVERITY[target_data.get(target).dynamic_shapes] if op.data_dependent else OFF


def _severity(ops: Sequence[VisionOp]) -> SeverityMap:
    return {
        t: max((max(op.severity_on(t), _shape_severity(op, t)) for op in ops), default=OFF)
        for t in target_data.TARGET_ORDER
    }


class TorchvisionOpWithoutKernel(Rule):
    """## What it does
    Reports calls of torchvision's compiled detection ops where the target has no kernel for
    them, runs them on the CPU, or cannot compile their output: `nms` and `batched_nms`,
    `roi_align` (`RoIAlign`, `MultiScaleRoIAlign`), `roi_pool`, `ps_roi_align`,
    `ps_roi_pool` and `deform_conv2d` (`DeformConv2d`), through `torchvision.ops`, its
    submodules or `torch.ops.torchvision`, under any import alias; and the detection models
    whose forward runs them (`torchvision.models.detection.fasterrcnn_resnet50_fpn`,
    `MaskRCNN`, `RetinaNet`, `SSD`...).

    ## Why is this bad?
    These are C++ operators that torchvision registers for CPU, CUDA and MPS. A backend with
    no kernel of its own raises `NotImplementedError: Could not run 'torchvision::nms' with
    arguments from the ... backend`; one with a CPU fallback copies every call's tensors to
    the host and back. `nms` also returns as many indices as boxes survive, a shape that
    depends on the data: a static-shape compiler (Trainium) rejects it, and XLA-style
    backends recompile for each new count. Detection models (Faster R-CNN, Mask R-CNN,
    RetinaNet) call them every step.

    ## Example
    ```python
    from torchvision.ops import nms

    keep = nms(boxes, scores, iou_threshold=0.5)
    ```

    ## Use instead
    ```python
    keep = nms(boxes.cpu(), scores.cpu(), iou_threshold=0.5).to(boxes.device)
    ```
    outside the compiled step, or a fixed-size formulation: a pure-PyTorch RoIAlign with
    `grid_sample`, an NMS that pads the kept indices to a fixed count.

    ## Targets
    From `portcheck/targets/vision_ops.toml`, per op and target, with its sources: an error
    where the op has no kernel (tpu, neuron, xla, hpu; xpu for all but nms and roi_align; mps
    for deform_conv2d) or where its data-dependent output cannot compile (nms on neuron); a
    warning where it falls back to the CPU (npu) or recompiles per shape (nms on tpu, xla,
    npu, hpu); off where a kernel exists (cpu, rocm; mps but deform_conv2d). Where no source
    says what a target does, the table assumes the call fails and says so.

    ## Fix safety
    No automatic fix: the replacement depends on how the model uses the result.
    """

    code = "PC609"
    name = "torchvision-op-without-kernel"
    message = "`{name}` runs {ops}, which {problem}"
    hint = "instead: {instead}{notes}"
    severity = _severity(vision_ops.ops())
    triggers = (b"nms", b"roi_", b"RoI", b"deform_conv", b"DeformConv", b"detection")
    watched_names = ("torch.ops.torchvision", "torchvision.models.detection", "torchvision.ops")

    VALID = [
        Valid(
            "import torchvision\nious = torchvision.ops.box_iou(a, b)\nboxes = torchvision.ops.clip_boxes_to_image(b, s)\n"
        ),
        Valid(
            "import torch\nfrom torchvision.ops import nms, roi_align\n"
            "keep = nms(boxes, scores, 0.5)\npooled = roi_align(x, rois, 7)\n",
            options={"targets": ["cpu", "mps", "rocm"]},
        ),
        Valid("def suppress(torch, boxes, scores):\n    return torch.ops.torchvision.nms(boxes, scores, 0.5)\n"),
        Valid(
            "import torch as T\nfrom torchvision.ops import nms\nkeep_fn = nms\n",
            options={"targets": ["tpu", "neuron"]},
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nfrom torchvision.ops import nms as N\nkeep = N(boxes, scores, 0.5)\n",
            lines=[3],
            message="has no kernel on tpu",
        ),
        Invalid(
            "import torchvision\nkeep = torchvision.ops.batched_nms(boxes, scores, idxs, 0.5)\n",
            lines=[2],
            options={"targets": ["neuron"]},
            message="output depends on the data: neuron cannot compile it",
        ),
        Invalid("import torch as T\nkeep = T.ops.torchvision.nms.default(b, s, 0.7)\n", lines=[2]),
        Invalid("from torch import ops\npooled = ops.torchvision.roi_align(x, rois, 7)\n", lines=[2]),
        Invalid(
            "import torch.nn\nfrom torch.nn import functional as F\nfrom torchvision.ops import MultiScaleRoIAlign\n\n"
            "class Head(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            '        self.pool = MultiScaleRoIAlign(["0"], 7, 2)\n',
            lines=[8],
            options={"targets": ["xla"]},
        ),
        Invalid(
            "from torchvision.ops.deform_conv import DeformConv2d as DCN\nconv = DCN(64, 64, 3)\n",
            lines=[2],
            options={"targets": ["mps"]},
            message="has no kernel on mps",
        ),
        Invalid(
            "import torchvision.ops as tvops\ny = tvops.ps_roi_pool(x, rois, 7)\n",
            lines=[2],
            options={"targets": ["npu"]},
            message="runs on the CPU on npu",
        ),
        # a detection model runs them in its forward
        Invalid(
            "import torchvision\nmodel = torchvision.models.detection.maskrcnn_resnet50_fpn(weights=None)\n",
            lines=[2],
            options={"targets": ["tpu", "npu"]},
            message="runs torchvision::nms, torchvision::roi_align, which have no kernel on tpu",
        ),
        Invalid(
            "from torchvision.models.detection import retinanet_resnet50_fpn as build\nmodel = build()\n",
            lines=[2],
            options={"targets": ["xla"]},
        ),
        # xpu has nms and roi_align, not roi_pool
        Invalid(
            "from torchvision.ops import boxes as box_ops, roi_pool\n"
            "keep = box_ops.batched_nms(b, s, i, 0.5)\ny = roi_pool(x, rois, 7)\n",
            lines=[3],
            options={"targets": ["xpu"]},
        ),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        call = self.ctx.parent
        found = vision_ops.by_call(qualified_name)
        if found is None or not (isinstance(call, cst.Call) and call.func is node):
            return
        name, ops = found
        self.report(
            call,
            severity=_severity(ops),
            name=name,
            ops=", ".join(f"torchvision::{op.name}" for op in ops),
            problem=_problem(ops, self.ctx.targets),
            instead="; ".join(dict.fromkeys(op.instead for op in ops)),
            notes=_notes(ops, self.ctx.targets),
        )


def _problem(ops: Sequence[VisionOp], selected: Sequence[str]) -> str:
    """What goes wrong with the ops on the selected targets, grouped by what happens."""
    failing = [t for t in selected if any(op.support[t].status == FAILS for op in ops)]
    on_cpu = [t for t in selected if t not in failing and any(op.support[t].status == CPU_FALLBACK for op in ops)]
    shapes_of = {t: target_data.get(t).dynamic_shapes for t in selected if any(op.data_dependent for op in ops)}
    static = [t for t, shapes in shapes_of.items() if shapes == "unsupported"]
    recompiling = [t for t, shapes in shapes_of.items() if shapes == "recompile"]
    several = len(ops) > 1
    parts = []
    if failing:
        parts.append(f"{'have' if several else 'has'} no kernel on {'/'.join(failing)} (the call raises)")
    if on_cpu:
        parts.append(f"run{'' if several else 's'} on the CPU on {'/'.join(on_cpu)} (a copy to the host and back)")
    shapes = [f"{'/'.join(static)} cannot compile it"] if static else []
    if recompiling:
        verb = "recompile" if len(recompiling) > 1 else "recompiles"
        shapes.append(f"{'/'.join(recompiling)} {verb} for each new size")
    if shapes:
        parts.append("the size of nms's output depends on the data: " + ", ".join(shapes))
    return "; ".join(parts) or "needs a check on this target"


def _notes(ops: Sequence[VisionOp], selected: Sequence[str]) -> str:
    """The sources behind each selected target's status where an op does not simply run."""
    by_note: dict[str, list[str]] = {}
    for target in selected:
        for op in ops:
            support = op.support[target]
            if support.status in (FAILS, CPU_FALLBACK) and target not in by_note.get(support.note, []):
                by_note.setdefault(support.note, []).append(target)
    return "".join(f"; {'/'.join(targets)}: {note}" for note, targets in by_note.items())
