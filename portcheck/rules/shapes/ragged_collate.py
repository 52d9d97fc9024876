from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck import patterns
from portcheck.flow import COLLATE_NAME, enclosing_function
from portcheck.rule import Invalid, Rule, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY, advice, shown

_CONCATENATIONS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})


class RaggedCollate(Rule):
    """## What it does
    Reports a collate function (named like one: `collate_fn`, `collate_batch`, a method of a
    collator) that concatenates the samples' tensors along their first dimension:
    `torch.cat(label, 0)` after `im, label, path, shapes = zip(*batch)`, or
    `torch.cat([b[1] for b in batch])`. Not `torch.stack`, not a concatenation along another
    dimension, and not one of items each given one row (`b[0].unsqueeze(0)`, `x[None]`).

    ## Why is this bad?
    Each sample brings as many rows as it has: the objects of a detection image (YOLOv5's and
    YOLOv7's `targets`, one row per box), the frames of an utterance. The batch's tensor is as
    long as the data makes it, so the shape changes every step, and so does every tensor the
    loss builds from it (`build_targets`'s matching, `targets.shape[0]`). XLA, TorchTPU and
    Gaudi compile a new graph for each new length; Trainium needs all shapes known ahead of time.

    ## Example
    ```python
    @staticmethod
    def collate_fn(batch):
        im, label, path, shapes = zip(*batch)
        return torch.stack(im, 0), torch.cat(label, 0), path, shapes
    ```

    ## Use instead
    Pad each sample's rows to a fixed maximum (`MAX_OBJECTS`) and stack them, with a mask or
    count of the real rows for the loss:
    ```python
    padded = torch.zeros(len(label), MAX_OBJECTS, 6)
    for i, lb in enumerate(label):
        padded[i, : len(lb)] = lb
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the maximum count and how the loss reads the padding are the model's.
    """

    code = "PC518"
    name = "ragged-collate"
    message = "`{call}` in a collate function joins each sample's rows, so the batch is as long as its data: a new shape every step"
    hint = "pad each sample's rows to a fixed maximum and stack them, with a mask of the real rows{advice}"
    severity = RECOMPILE_SEVERITY
    triggers = (b"collat", b"Collat")

    VALID = [
        # stacked: every sample has the same shape
        Valid(
            "import torch\ndef collate_fn(batch):\n    im, label = zip(*batch)\n"
            "    return torch.stack(im, 0), torch.stack(label, 0)\n"
        ),
        # each sample given one row of its own
        Valid(
            "import torch as T\ndef collate(batch):\n    return T.cat([b[0].unsqueeze(0) for b in batch], 0), "
            "T.cat([b[1][None] for b in batch])\n"
        ),
        # along another dimension, or not of the samples
        Valid(
            "from torch import cat\ndef collate_fn(batch):\n    im, label = zip(*batch)\n"
            "    return cat(im, dim=1), cat([PAD, EOS])\n"
        ),
        # not a collate function
        Valid("import torch\ndef merge(parts):\n    a, b = zip(*parts)\n    return torch.cat(b, 0)\n"),
        # `torch` is a parameter here
        Valid("import torch.nn\ndef collate_fn(batch, torch):\n    x, y = zip(*batch)\n    return torch.cat(y, 0)\n"),
        # shapes may change freely there
        Valid(
            "import torch\ndef collate_fn(batch):\n    im, label = zip(*batch)\n    return torch.cat(label, 0)\n",
            options={"targets": ["cpu", "mps"]},
        ),
    ]
    INVALID = [
        Invalid(  # YOLOv5's and YOLOv7's LoadImagesAndLabels
            "import torch\nfrom torch.utils.data import Dataset as BaseDataset\nclass LoadImagesAndLabels(BaseDataset):\n"
            "    @staticmethod\n    def collate_fn(batch):\n        im, label, path, shapes = zip(*batch)\n"
            "        for i, lb in enumerate(label):\n            lb[:, 0] = i\n"
            "        return torch.stack(im, 0), torch.cat(label, 0), path, shapes\n",
            lines=[9],
            message="`torch.cat(label, 0)` in a collate function joins each sample's rows",
        ),
        Invalid(
            "import torch as T\ndef collate_batch(samples):\n    feats = T.cat([s['frames'] for s in samples])\n"
            "    return feats\n",
            lines=[3],
        ),
        Invalid(
            "from torch import cat as join\nclass BoxCollator:\n    def __call__(self, batch):\n"
            "        images, boxes = zip(*batch)\n        return join(boxes, dim=0)\n",
            lines=[5],
        ),
        Invalid(
            "import torch.nn\nimport torch\ndef collate_fn(batch):\n    return torch.concat([item[1] for item in batch], 0)\n",
            lines=[4],
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & _CONCATENATIONS or not _along_rows(node):
            return
        function = enclosing_function(self.ctx.ancestors)
        if function is None or not _in_collate(self.ctx.ancestors):
            return
        joined = patterns.argument(node, 0, "tensors")
        if joined is not None and self._of_samples(joined.value, function):
            self.report(node, call=shown(node), advice=advice(self.ctx.targets))

    def _of_samples(self, joined: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        """What a collate function's batch holds, one item per sample: a comprehension over
        the batch, or a name unpacked from `zip(*batch)`."""
        batch = _batch_parameter(function)
        if batch is None:
            return False
        if isinstance(joined, (cst.ListComp, cst.GeneratorExp)):
            for_in = joined.for_in
            return _names(for_in.iter, batch) and for_in.inner_for_in is None and not _one_row(joined.elt)
        if type(joined) is not cst.Name or self.ctx.flow is None:
            return False
        mixed = self.ctx.flow.resolver.values_and_unpacking(joined)
        return mixed is not None and not mixed[0] and any(_unzips(call, batch) for call, _ in mixed[1])


def _along_rows(call: cst.Call) -> bool:
    """Concatenated along the first dimension: no `dim`, or 0."""
    dim = patterns.argument(call, 1, "dim")
    return dim is None or (type(dim.value) is cst.Integer and dim.value.evaluated_value == 0)


def _in_collate(ancestors: Sequence[cst.CSTNode]) -> bool:
    """In a function, or a method of a class, named like a collate function or a collator."""
    return any(
        type(node) in (cst.FunctionDef, cst.ClassDef) and COLLATE_NAME.search(node.name.value) for node in ancestors
    )


def _batch_parameter(function: cst.FunctionDef) -> str | None:
    """The parameter that holds the batch: the first, after `self` in a method."""
    params = [param.name.value for param in function.params.params if param.name.value not in ("self", "cls")]
    return params[0] if params else None


def _names(node: cst.BaseExpression, name: str) -> bool:
    return type(node) is cst.Name and node.value == name


def _unzips(call: cst.Call | cst.Subscript | cst.Name, batch: str) -> bool:
    """`zip(*batch)`."""
    return (
        type(call) is cst.Call
        and patterns.dotted(call.func) == "zip"
        and len(call.args) == 1
        and call.args[0].star == "*"
        and _names(call.args[0].value, batch)
    )


def _one_row(item: cst.BaseExpression) -> bool:
    """`b[0].unsqueeze(0)`, `x[None]`: each sample one row."""
    if type(item) is cst.Call:
        first = patterns.positional(item, 0)
        return (
            patterns.method_name(item) == "unsqueeze"
            and first is not None
            and type(first.value) is cst.Integer
            and first.value.evaluated_value == 0
        )
    if type(item) is cst.Subscript:
        first = item.slice[0].slice
        return type(first) is cst.Index and _names(first.value, "None")
    return False
