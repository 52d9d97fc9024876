from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import libcst as cst

from portcheck import patterns
from portcheck.rule import FileContext, Invalid, Valid
from portcheck.rules.shapes import (
    SYNC_SEVERITY,
    StepRule,
    advice,
    in_host_memory,
    index_select,
    is_bool_mask,
    off_host_at_end,
    tensor_method,
    values_reaching,
)
from portcheck.targets import vision_ops

_DATA_SHAPED = "has an output shape that depends on tensor values"


class _Op(NamedTuple):
    problem: str
    instead: str


# Each operator with what it does wrong and its static-shape replacement (targets.md §4.2).
_OPS = {
    "nonzero": _Op(_DATA_SHAPED, "torch.nonzero_static(x, size=N, fill_value=-1)"),
    "argwhere": _Op(_DATA_SHAPED, "torch.nonzero_static(x, size=N, fill_value=-1)"),
    "where": _Op(
        "with one argument is nonzero(as_tuple=True): its shape depends on tensor values",
        "the three-argument torch.where(cond, x, y), or torch.nonzero_static(cond, size=N, fill_value=-1)",
    ),
    "masked_select": _Op(_DATA_SHAPED, "torch.where(mask, x, 0) or x.masked_fill(~mask, 0), then masked reductions"),
    "unique": _Op(_DATA_SHAPED, "a fixed-size count, one_hot(x, K).sum(0) when values lie in [0, K), or bucketing"),
    "unique_consecutive": _Op(_DATA_SHAPED, "a fixed-size count, or bucketing"),
    "repeat_interleave": _Op(
        "with tensor repeats has an output length that depends on their sum",
        "repeat_interleave(..., output_size=N) with N known ahead (it must equal repeats.sum())",
    ),
    "bincount": _Op(
        "has an output length that depends on the largest value, even with minlength",
        "torch.nn.functional.one_hot(x, K).sum(0), or torch.zeros(K).scatter_add_(0, x, torch.ones_like(x))",
    ),
    "histc": _Op(
        "without min/max reads the data's range on the host",
        "torch.histc(x, bins, min=lo, max=hi) with a fixed range",
    ),
    "pack_padded_sequence": _Op(
        "packs as many rows as the lengths add up to: a new shape at every batch",
        "the padded batch with a mask of the valid steps (torch.arange(T) < lengths[:, None]), reading each"
        " sequence's last valid output with gather",
    ),
    "pad_packed_sequence": _Op(
        "without total_length pads to the batch's longest sequence: a new shape at every batch",
        "pad_packed_sequence(..., total_length=T) with the fixed length T",
    ),
}
_RNN_UTILS = ("pack_padded_sequence", "pad_packed_sequence")
_FUNCTIONS = {
    **{f"{module}.{op}": op for op in _OPS for module in ("torch", "torch.Tensor") if op not in _RNN_UTILS},
    **{f"torch.nn.utils.rnn.{op}": op for op in _RNN_UTILS},
    "torch.functional.unique": "unique",
    "torch.functional.unique_consecutive": "unique_consecutive",
}
_METHODS = frozenset(_OPS) - {"where", *_RNN_UTILS}  # Tensor.where(cond, other) always keeps the shape
# Methods whose result is a tensor: evidence that a `repeats` argument is one.
_TENSOR_RESULTS = frozenset({"long", "int", "to", "sum", "cumsum", "diff", "flatten", "view", "reshape", "clamp"})


class DataDependentShapeOp(StepRule):
    """## What it does
    Reports operators whose output shape depends on tensor values: `nonzero`, `argwhere`,
    one-argument `torch.where`, `masked_select`, `unique`, `unique_consecutive`, `bincount`,
    `repeat_interleave` with tensor repeats and no `output_size=`, and `histc` without a range,
    as functions or tensor methods, and `torch.nn.utils.rnn.pack_padded_sequence` (as many rows
    as the lengths add up to) and `pad_packed_sequence` without `total_length=`; and indexing
    with what those return (`loss[index]` after `index = torch.where(label != -1)[0]`, also
    through `.cuda()` or `index_select`), once per statement; not of a tensor in host memory
    (`.cpu()`, made from Python
    data where nothing sets a default device, or in a dataset's methods or a collate
    function), which the host computes.

    ## Why is this bad?
    A compiled graph needs every shape before it runs. Dynamo breaks the graph at these ops
    ("Dynamic shape operator"), XLA syncs to the host and recompiles for each new count, and
    Trainium's compiler rejects them (NCC_EMOD025). `unique` and `bincount` keep Dynamo from
    capturing the frame at all. `histc` without `min`/`max` reads the data's range on the host.

    ## Example
    ```python
    idx = torch.nonzero(scores > 0.5)
    counts = torch.bincount(labels)
    ```

    ## Use instead
    ```python
    idx = torch.nonzero_static(scores > 0.5, size=max_boxes, fill_value=-1)
    counts = torch.nn.functional.one_hot(labels, num_classes).sum(0)
    ```

    ## Targets
    An error on neuron (static shapes only); a warning on tpu, xla, npu and hpu (graph break and
    recompilation); info on mps, xpu and rocm, where the op still waits for the device to learn
    the size; off on cpu, which computes on the host: there is no device to wait for.

    These severities hold in step code as host-sync-in-step (PC503) finds it, across the
    repository, and also under `if step % N == 0:` (a new shape every N steps compiles a new
    graph each time; gaussian-splatting's densification resizes the model for every step
    after); elsewhere (plots, metrics, data preparation, export) it is info: that code runs
    once or on host data, where a dynamic shape costs one compilation at most.

    ## Fix safety
    No automatic fix: the replacements need a size bound that only the author knows.
    """

    code = "PC501"
    every_n_steps = True  # a new shape every N steps is a new graph each time
    name = "data-dependent-shape-op"
    message = "`{what}` {problem}{reach}"
    hint = "use {instead}{advice}"
    severity = SYNC_SEVERITY
    triggers = (b"nonzero", b"argwhere", b"where", b"masked_select", b"unique", b"repeat_interleave", b"bincount",
                b"histc", b"pack_padded_sequence", b"pad_packed_sequence", b"nms")  # fmt: skip

    VALID = [
        Valid(  # indexes of a fixed count (topk), and an index kept in host memory
            "import torch\ndef pick(scores, x):\n    idx = torch.topk(scores, k=8)[1]\n    keep = x[idx]\n"
            "    rows = torch.tensor([0, 2, 3])\n    return keep, x.cpu()[rows]\n"
        ),
        Valid(  # unpacked to a fixed length
            "import torch\nclass Encoder(torch.nn.Module):\n    def forward(self, packed):\n"
            "        out, _ = torch.nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], True, 0.0, 200)\n"
            "        return out\n"
        ),
        Valid("import torch\nidx = torch.nonzero_static(x, size=8, fill_value=-1)\ny = torch.where(m, x, 0)\n"),
        Valid("import torch\ndef nonzero(x):\n    return x\nidx = nonzero(t)\n"),
        Valid("import numpy as np\nimport torch\nu = np.unique(a)\ni = np.where(a > 0)\nj = np.nonzero(a)\n"),
        Valid("def f(torch, x):\n    return torch.nonzero(x)\n"),
        Valid("import torch as T\ny = T.repeat_interleave(x, 2, dim=0)\nz = x.repeat_interleave(n, dim=0)\n"),
        Valid("import torch\nw = x.repeat_interleave(torch.tensor([1, 2]), dim=0, output_size=3)\n"),
        Valid("from torch import histc\nh = histc(x, bins=10, min=0, max=1)\ng = x.histc(10, -1.0, 1.0)\n"),
        Valid("x = df.col.unique()\nidx = arr.nonzero()\n"),
        # on the CPU the tensor is already in host memory: no device to wait for
        Valid("import torch\nidx = torch.nonzero(x > 0)\n", options={"targets": ["cpu"]}),
        Valid(  # a tensor in host memory
            "import torch\ndef classes(anno):\n    ids = torch.tensor([obj['category_id'] for obj in anno])\n"
            "    return ids.unique(), torch.nonzero(ids > 0), torch.bincount(x.cpu())\n"
            "def collate_masks(masks_list):\n    masks = torch.stack(masks_list).flatten(1)\n"
            "    return masks.flatten().nonzero().flatten()\n"
        ),
    ]
    INVALID = [
        Invalid(  # tacotron2's encoder: the packed rows follow the batch's lengths; unpacking pads to its longest
            "import torch\nfrom torch.nn.utils.rnn import pack_padded_sequence as pack\nfrom torch.nn.utils import rnn\n"
            "class Encoder(torch.nn.Module):\n    def forward(self, x, input_lengths):\n"
            "        x = pack(x, input_lengths.cpu().numpy(), batch_first=True)\n        outputs, _ = self.lstm(x)\n"
            "        outputs, _ = rnn.pad_packed_sequence(outputs, batch_first=True)\n        return outputs\n",
            lines=[6, 8],
            message="a new shape at every batch",
        ),
        Invalid(  # a metric computed once after evaluation: info
            "import torch\ndef summarize(labels):\n    return torch.unique(labels)\n",
            lines=[3],
            message="(info: no step loop",
        ),
        Invalid("import torch\nidx = torch.nonzero(x > 0)\n", lines=[2], message="depends on tensor values"),
        Invalid(  # arcface's partial FC: indexing with what `torch.where` and `torch.unique` return, once per statement
            "import torch\nclass PartialFC(torch.nn.Module):\n    def forward(self, logits, label):\n"
            "        positive = torch.unique(label[label != -1]).cuda()\n        perm = torch.rand(1000)\n"
            "        perm[positive] = 2.0\n        index = torch.where(label != -1)[0]\n"
            "        loss = torch.zeros(label.shape[0], 1)\n        loss[index] = logits[index].gather(1, label[index])\n"
            "        return loss, perm\n",
            lines=[4, 6, 7, 9],
        ),
        Invalid(  # GPT-SoVITS: the rows still decoding, kept with index_select every step
            "import torch\ndef infer(model, y, n):\n    for idx in range(n):\n        logits = model(y)\n"
            "        done = logits.argmax(-1)[:, -1] == 0\n        kept = torch.where(~done)[0]\n"
            "        y = torch.index_select(y, dim=0, index=kept)\n        logits = logits.index_select(0, kept)\n",
            lines=[6, 7, 8],
        ),
        Invalid("import torch as T\nrows, cols = T.where(mask)\n", lines=[2], message="one argument"),
        Invalid("from torch import unique, bincount\nu = unique(x)\nc = bincount(y)\n", lines=[2, 3]),
        Invalid("from torch.functional import unique_consecutive as uc\nu = uc(x)\n", lines=[2]),
        Invalid(
            "import torch.nn\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        keep = x.nonzero(as_tuple=True)\n        return x.masked_select(x > 0), keep\n",
            lines=[4, 5],
        ),
        Invalid(
            "import torch\ny = x.repeat_interleave(lengths.long(), dim=0)\nz = torch.repeat_interleave(torch.as_tensor(r))\n",
            lines=[2, 3],
            message="repeats",
        ),
        Invalid("import torch\nh = torch.histc(x, bins=10)\ng = x.histc(10, 0, 0)\n", lines=[2, 3], message="range"),
        Invalid("import torch\ni = torch.argwhere(x)\nj = x.argwhere()\n", lines=[2, 3]),
        Invalid(  # gpt-fast's speculative decoding: a 0-d host operand leaves the result where `q` is
            "import torch\ndef accept(q, p, k):\n    prob = torch.minimum(torch.ones(()), q[:k] / p)\n"
            "    return (torch.rand_like(prob) > prob).nonzero()\n",
            lines=[4],
        ),
        Invalid(
            "import torch\ndef classes(anno, device):\n    ids = torch.tensor([o['id'] for o in anno], device=device)\n"
            "    return ids.unique()\n"
            "class Boxes:\n    def __getitem__(self, i):\n        return self.tensor[i].nonzero()\n"
            "class Pairs(Dataset):\n    def __getitem__(self, i):\n        x = self.x[i].cuda()\n        return x.nonzero()\n",
            lines=[4, 7, 11],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._indexed: set[tuple[int, str]] = set()  # statements and index names reported (`_indexed_by_data`)

    def visit_Call(self, node: cst.Call) -> None:
        picked = index_select(self.ctx, node)  # `torch.index_select(y, 0, kept)`, `y.index_select(0, kept)`
        if picked is not None:
            if picked.index is not None and type(picked.index.value) is cst.Name:
                self._indexed_by_data(node, picked.index.value, picked.shown)
            return
        names = self.ctx.qualified_names(node.func) & _FUNCTIONS.keys()
        if names:
            op, offset = _FUNCTIONS[min(names)], 0
        elif patterns.method_name(node) in _METHODS and tensor_method(self.ctx, node, _METHODS):
            op, offset = patterns.method_name(node), -1
        else:
            return
        if any(arg.star for arg in node.args) or not self._data_dependent(op, node, offset):
            return
        subject = node.func.value if offset else next((arg.value for arg in node.args if not arg.keyword), None)
        if subject is not None and in_host_memory(self.ctx, subject):
            return
        what = f".{op}()" if offset else min(names).replace("torch.Tensor.", "torch.").replace(".functional.", ".")
        self.report_by_reach(
            node,
            holds=off_host_at_end(self.ctx, subject) if subject is not None else None,
            what=what,
            problem=_OPS[op].problem,
            instead=_OPS[op].instead,
            advice=advice(self.ctx.targets),
        )

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`loss[index]` where `index = torch.where(label != -1)[0]` (arcface's partial FC):
        indexing with what an op above returns takes as many rows as it holds."""
        index = node.slice[0].slice if len(node.slice) == 1 else None
        if type(index) is cst.Index and type(index.value) is cst.Name:
            self._indexed_by_data(node, index.value)

    def _indexed_by_data(self, node: cst.CSTNode, index: cst.Name, shown: str = "") -> None:
        """Report `node`, which indexes with `index`, where that has a data-dependent length;
        once per statement and index name (`loss[index] = logits[index].gather(...)`). `shown`:
        how to name the call; a subscript is shown as written."""
        ancestors = self.ctx.ancestors
        statement = next((each for each in reversed(ancestors) if isinstance(each, cst.BaseStatement)), None)
        key = (id(statement), index.value)
        if key in self._indexed or not shaped_by_data(self.ctx, index, (*ancestors, node)):
            return
        if in_host_memory(self.ctx, index):
            return
        self._indexed.add(key)
        shown = shown or cst.Module([]).code_for_node(node)
        self.report_by_reach(
            node,
            holds=off_host_at_end(self.ctx, index),
            what=shown if len(shown) <= 40 else f"{shown[:37]}...",
            problem=_INDEXED.format(index=index.value),
            instead=_INDEXED_INSTEAD,
            advice=advice(self.ctx.targets),
        )

    def _data_dependent(self, op: str, call: cst.Call, offset: int) -> bool:
        """Whether this call of `op` has a data-dependent shape; `offset` is -1 for methods, whose
        receiver takes the place of the first argument."""
        if op == "where":
            return len(call.args) == 1
        if op == "pad_packed_sequence":
            return patterns.argument(call, 3, "total_length") is None
        if op == "histc":
            bounds = (patterns.argument(call, 2 + offset, "min"), patterns.argument(call, 3 + offset, "max"))
            return all(arg is None or _is_zero(arg.value) for arg in bounds)
        if op == "repeat_interleave":
            if patterns.keyword(call, "output_size") is not None:
                return False
            if offset == 0 and len(call.args) == 1:
                return True  # torch.repeat_interleave(repeats): the output length is repeats.sum()
            repeats = patterns.argument(call, 1 + offset, "repeats")
            return repeats is not None and self._is_tensor(repeats.value)
        return True

    def _is_tensor(self, node: cst.BaseExpression, depth: int = 0) -> bool:
        """Positive evidence that `repeats` is a tensor: a torch call, a tensor-only method
        (`.long()`, `.sum(...)`), or a name bound once to one. Plain names stay unknown: most
        are Python ints (`num_images_per_prompt`)."""
        if isinstance(node, cst.Call):
            if any(name.startswith("torch.") for name in self.ctx.qualified_names(node.func)):
                return True
            return tensor_method(self.ctx, node, _TENSOR_RESULTS)
        if isinstance(node, cst.Name) and depth < 3:
            bound = self.ctx.assigned_value(node)
            return bound is not None and self._is_tensor(bound, depth + 1)
        return False


_SELECTING = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"})
# Methods that keep what a tensor holds, and so its length: moves, casts, copies, flattening.
_KEEPING = frozenset({"cuda", "to", "long", "int", "float", "detach", "clone", "contiguous", "squeeze", "flatten"})
_INDEXED = "indexes with `{index}`, whose length depends on tensor values: so does the result's shape"
_INDEXED_INSTEAD = (
    "an index of fixed length (torch.nonzero_static(cond, size=N, fill_value=-1)), or work on the whole"
    " tensor with the condition as a mask (torch.where(cond, x, y), masked_fill, scatter)"
)


def shaped_by_data(ctx: FileContext, node: cst.BaseExpression, path: Sequence[cst.CSTNode], depth: int = 0) -> bool:
    """Whether a tensor's shape depends on tensor values: what `nonzero`, `argwhere`,
    `masked_select`, `unique`, one-argument `torch.where` and torchvision's `nms` return, a
    tensor indexed with a boolean mask or with one of those (`x[keep]`), a view or part of one
    (`i[:max_det]`, `idx.T`), and a name the last statement of `path` gets one of those from."""
    if depth > 4:
        return False
    if type(node) is cst.Name:
        return any(shaped_by_data(ctx, value, path, depth + 1) for value in values_reaching(ctx, node, path))
    if type(node) is cst.Attribute and node.attr.value in ("T", "mT"):
        return shaped_by_data(ctx, node.value, path, depth + 1)
    if type(node) is cst.Subscript:
        index = node.slice[0].slice if len(node.slice) == 1 else None
        if type(index) is cst.Index and (
            is_bool_mask(ctx, index.value) or shaped_by_data(ctx, index.value, path, depth + 1)
        ):
            return True
        return shaped_by_data(ctx, node.value, path, depth + 1)
    if type(node) is not cst.Call:
        return False
    func = node.func
    if type(func) is cst.Attribute and func.attr.value in _KEEPING and shaped_by_data(ctx, func.value, path, depth + 1):
        return True  # `torch.unique(...).cuda()`, `idx.long()`
    names = ctx.qualified_names(node.func)
    for name in names:
        found = vision_ops.by_call(name)
        if found is not None and all(op.data_dependent for op in found[1]):
            return True  # `torchvision.ops.nms(boxes, scores, t)`
    if names & _FUNCTIONS.keys():
        op = _FUNCTIONS[min(names & _FUNCTIONS.keys())]
        return op in _SELECTING or (op == "where" and len(node.args) == 1)
    return patterns.method_name(node) in _SELECTING and tensor_method(ctx, node, _SELECTING)


def _is_zero(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.value) == 0
