from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import libcst as cst

from portcheck import patterns
from portcheck.flow import COLLATE_NAME, enclosing_function
from portcheck.resolve import function_scope
from portcheck.rule import Invalid, Rule, Valid
from portcheck.rules.shapes import RECOMPILE_SEVERITY, advice, shown
from portcheck.walk import descendants

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
        # IP-Adapter: each sample's tokens and pixels encoded one item at a time, a row each
        Valid(
            "import torch\nclass MyDataset(torch.utils.data.Dataset):\n    def __getitem__(self, idx):\n"
            "        ids = self.tokenizer(self.texts[idx], padding='max_length', return_tensors='pt').input_ids\n"
            "        pixels = self.processor(images=self.images[idx], return_tensors='pt').pixel_values\n"
            "        return {'text_input_ids': ids, 'clip_image': pixels}\n"
            "def collate_fn(data):\n    ids = torch.cat([example['text_input_ids'] for example in data], dim=0)\n"
            "    return ids, torch.cat([example['clip_image'] for example in data], dim=0)\n"
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
        Invalid(  # a list of texts encoded per sample: as many rows as the sample has texts
            "import torch\nclass Pairs(torch.utils.data.Dataset):\n    def __getitem__(self, idx):\n"
            "        q, a = self.rows[idx]\n        return {'ids': self.tokenizer([q, a], return_tensors='pt').input_ids}\n"
            "def collate_fn(data):\n    return torch.cat([example['ids'] for example in data])\n",
            lines=[7],
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
            return (
                _names(for_in.iter, batch)
                and for_in.inner_for_in is None
                and not _one_row(joined.elt)
                and not self._encoded_one_item(joined.elt)
            )
        if type(joined) is not cst.Name or self.ctx.flow is None:
            return False
        mixed = self.ctx.flow.resolver.values_and_unpacking(joined)
        return mixed is not None and not mixed[0] and any(_unzips(call, batch) for call, _ in mixed[1])

    def _encoded_one_item(self, item: cst.BaseExpression) -> bool:
        """`example["text_input_ids"]`, where the module's `__getitem__` returns that key as a
        tokenizer's or processor's encoding of one item (IP-Adapter's `tokenizer(text,
        padding="max_length", return_tensors="pt").input_ids`): a batch of one row each."""
        key = patterns.string_value(item.slice[0].slice.value) if _keyed(item) else None  # type: ignore[union-attr]
        return key is not None and key in self._encoded_keys

    @cached_property
    def _encoded_keys(self) -> frozenset[str]:
        """The keys the module's `__getitem__` methods return a one-item encoding under."""
        module = self.ctx.ancestors[0] if self.ctx.ancestors else None
        found: set[str] = set()
        for function in descendants(module, (cst.Lambda,)) if module is not None else ():
            if type(function) is not cst.FunctionDef or function.name.value != "__getitem__":
                continue
            bound = function_scope(function, self.ctx.resolver.module).values if self.ctx.resolver else {}
            for returned in descendants(function.body, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                if type(returned) is not cst.Return or type(returned.value) is not cst.Dict:
                    continue
                for element in returned.value.elements:
                    key = patterns.string_value(element.key) if type(element) is cst.DictElement else None
                    named = bound.get(element.value.value, []) if type(element.value) is cst.Name else [element.value]
                    values = [value for value in named if value is not None]  # what `=` binds it to
                    if key is not None and values and all(_encodes_one(value) for value in values):
                        found.add(key)
        return frozenset(found)


def _keyed(item: cst.BaseExpression) -> bool:
    """`example["key"]`: one element, a string."""
    return (
        type(item) is cst.Subscript
        and len(item.slice) == 1
        and type(item.slice[0].slice) is cst.Index
        and type(item.slice[0].slice.value) is cst.SimpleString
    )


def _encodes_one(value: cst.BaseExpression) -> bool:
    """`tokenizer(text, ..., return_tensors="pt").input_ids`, `processor(images=image,
    return_tensors="pt").pixel_values`: a tensor of one row, the encoded item's (not of a list
    displayed there)."""
    call = value.value if type(value) is cst.Attribute else value
    if type(call) is not cst.Call or patterns.keyword(call, "return_tensors") is None:
        return False
    given = [arg.value for arg in call.args if arg.keyword is None or arg.keyword.value in ("text", "images")]
    return bool(given) and not any(isinstance(each, (cst.List, cst.ListComp, cst.Tuple)) for each in given)


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
