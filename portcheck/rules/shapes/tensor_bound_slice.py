from __future__ import annotations

from collections.abc import Callable
from functools import partial

import libcst as cst

from portcheck import patterns
from portcheck.flow import enclosing_function
from portcheck.rule import Invalid, Valid
from portcheck.rules.shapes import (
    SYNC_SEVERITY,
    StepRule,
    advice,
    filling_in,
    in_host_memory,
    read_in_host_memory,
    reads_names,
    reads_tensor_scalar,
    reads_tensor_value,
    shown,
    tensor_valued,
    used_as_size,
)
from portcheck.walk import descendants

# torch's factories that take sizes: a size from tensor values makes a data-dependent shape.
_FACTORIES = frozenset(f"torch.{name}" for name in ("zeros", "ones", "empty", "rand", "randn"))
_RANGE = frozenset({"start", "end", "step"})  # torch.arange's bounds, as keywords
_NUMBER_BUILTINS = frozenset({"int", "round", "len", "max", "min"})  # what gives a Python number
# A tensor's reductions that make a length of it (`x_lens.max()`, `mask.sum()`), as methods or torch's functions.
_LENGTHS = frozenset({"max", "min", "sum", "amax", "amin"})
_TORCH_LENGTHS = frozenset(f"torch.{name}" for name in _LENGTHS)
# Functions that take sizes as one argument, by its position and keyword: the padding, the output size.
_SIZED = {
    "torch.nn.functional.pad": (1, "pad"),
    "torch.nn.functional.interpolate": (1, "size"),
    "torch.nn.functional.upsample": (1, "size"),
    "torch.topk": (1, "k"),  # YOLOX's SimOTA: `torch.topk(cost[i], k=dynamic_ks[i])`
}


class TensorBoundSlice(StepRule):
    """## What it does
    Reports slices whose bounds come from tensor values: `x[:n]` where `n` is `t.item()`,
    `int(t.sum())`, `lengths.max()`, `mask.sum()`, a number of a list read back with
    `.tolist()` (`max(lengths)`, `sum([n > t for n in lengths])`, `lengths[i]`), an expression
    using one, a tensor itself (`idx[:input_pos]` after `input_pos = torch.arange(..., device=d)`:
    slicing calls its `__index__`), or a name bound to one of those; and the sizes that
    `torch.zeros`, `ones`, `empty`, `rand` and `randn` take from such numbers
    (`torch.zeros(batch, max(decode_lengths), vocab)`, or `torch.zeros(*shape)` where `shape` is
    a tensor on the device), the lengths such sizes and bounds are bound to (vall-e's `x_len =
    x_lens.max()`, where a fixed size would go; not a parameter's fill-in where a call leaves
    it out, which PC520 names at the calls), the bounds `torch.arange` takes from numbers read back
    (StyleTTS2's `l = int(x.sum().item())`, then `torch.arange(0, l)`; a tensor given itself is
    host-sync-in-step's), and the padding `F.pad`, the output size `F.interpolate` and the
    count `torch.topk` (and the tensor method `.topk`) take from them (stylegan2's augmentation pads by amounts unpacked from a
    tensor; YOLOX's SimOTA keeps `k=dynamic_ks[i]` matches per object). Slices of vits'
    segments start at a parameter's item the module's call gives a tensor (`idx_str =
    ids_str[i]`). A slice of host data by tensors in host memory is left alone (a dataset's `self.data[start : start + n]` in `__getitem__` with
    `start = torch.randint(0, len, (1,))`): no device takes part. Host bounds still vary the
    shape of a slice of device data (`images[:, :, y : y + size]`). A slice is reported once,
    at its first such bound.

    ## Why is this bad?
    The slice's length is only known once the device has computed the bound, so the value is
    copied to the host (a sync, here or where `.tolist()` read it back), Dynamo breaks the graph at `.item()` or specializes on the
    value, and XLA compiles a new graph for every distinct length. Trainium cannot compile the
    dynamic dimension.

    ## Example
    ```python
    max_len = lengths.max()
    x = x[:, :max_len]
    ```

    ## Use instead
    ```python
    x = x[:, :max_positions]  # a fixed size, with a mask for the padding
    valid = torch.arange(max_positions, device=x.device) < lengths[:, None]
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; info on mps, xpu and rocm (a host
    sync); off on cpu, which computes on the host: nothing to copy or wait for.

    These severities hold in step code as host-sync-in-step (PC503) finds it, across the
    repository; elsewhere (plots, metrics, data preparation, export) it is info: that code
    runs once or on host data, where a dynamic shape costs one compilation at most.

    ## Fix safety
    No automatic fix: the fixed size and the masking depend on the model.
    """

    code = "PC505"
    name = "tensor-bound-slice"
    message = "{what} `{bound}` comes from tensor values, read on the host: a data-dependent shape{reach}"
    hint = "slice to a fixed size and mask the rest (torch.arange(N) < n), or pad to a few bucket sizes{advice}"
    severity = SYNC_SEVERITY
    # The rule reports only in files that import torch, so "torch" is in every one of them.
    triggers = (b"torch",)

    VALID = [
        Valid(  # a count the code fixes: one shape
            "import torch\ndef decode(model, scores, x, steps):\n    for i in range(steps):\n        x = model(x)\n"
            "        scores = scores.topk(max(steps, 1), dim=-1).values\n    return scores\n"
        ),
        Valid(  # DINO's multi-crop wrapper: a Python list of crops sliced by counts computed on the host
            "import torch\nclass MultiCropWrapper(torch.nn.Module):\n    def forward(self, x):\n"
            "        if not isinstance(x, list):\n            x = [x]\n"
            "        idx_crops = torch.cumsum(torch.unique_consecutive(torch.tensor([i.shape[-1] for i in x]),"
            " return_counts=True)[1], 0)\n        start_idx, out = 0, []\n        for end_idx in idx_crops:\n"
            "            out.append(self.backbone(torch.cat(x[start_idx:end_idx])))\n            start_idx = end_idx\n"
            "        return out\n"
        ),
        Valid(  # numbers of a NumPy array's list
            "import numpy as np\nimport torch\nclass M(torch.nn.Module):\n    def forward(self, x, sizes):\n"
            "        n = max(np.asarray(sizes).tolist())\n        return x[:, :n] + torch.zeros(4, n)\n"
        ),
        Valid(  # a name rebound from itself says no more than before: `k` may be any number
            "import torch\ndef crop(x, ks):\n    for k in ks:\n        k = round(k) if k > 1 else k\n"
            "        y = x[:, :k]\n"
        ),
        Valid(  # a reduction along a dim is a tensor, padded as one
            "import torch\nimport torch.nn.functional as F\nclass Head(torch.nn.Module):\n"
            "    def forward(self, logits):\n        scores = logits.amax(-1)\n        return F.pad(scores, (0, 2))\n"
        ),
        Valid(  # a reduction that sizes nothing, and a parameter's fill-in (PC520 names the calls leaving it out)
            "import torch\ndef sequence_mask(length, max_length=None):\n    if max_length is None:\n"
            "        max_length = length.max()\n    total = length.sum()\n"
            "    return (torch.arange(max_length, device=length.device) < length[:, None]) / total\n"
        ),
        Valid("import torch\ny = x[:, : x.size(1) // 2]\nz = x[: len(x) - 1, ::2]\nw = x[: max(a, b)]\n"),
        Valid("import torch\nn = x.shape[0]\ny = x[:n]\nk = cfg.max_len\nz = x[:k]\n"),
        Valid("def f(torch, x):\n    return x[: torch.sum(x)]\n"),
        Valid("import numpy as np\nn = arr.max()\nhead = arr[:n]\n"),
        # on the CPU the tensor is already in host memory: no device to wait for
        Valid("import torch\ny = x[: t.item()]\n", options={"targets": ["cpu"]}),
        Valid(  # a crop start drawn in host memory
            "import torch\nclass Sampler(torch.utils.data.Dataset):\n    def __getitem__(self, i):\n"
            "        start = torch.randint(0, self.data.size(0) - self.n - 1, (1,))\n"
            "        return self.data[start : start + self.n + 1].long()\n"
        ),
    ]
    INVALID = [
        Invalid(  # MAGNeT: the count of tokens to mask again, read back and clamped, at each decoding step
            "import torch\ndef decode(model, scores, x, steps):\n    for i in range(steps):\n        x = model(x)\n"
            "        num_masked = max(int((x.mean() * 10).item()), 1)\n"
            "        scores = scores.topk(num_masked, dim=-1).values\n    return scores\n",
            lines=[6],
            message="size `num_masked`",
        ),
        Invalid(  # YOLOX's SimOTA: as many matches per object as its IoUs add up to
            "import torch\nclass Head(torch.nn.Module):\n    def forward(self, cost, ious):\n"
            "        dynamic_ks = torch.clamp(ious.sum(1).int(), min=1)\n"
            "        for i in range(cost.shape[0]):\n"
            "            _, pos = torch.topk(cost[i], k=dynamic_ks[i], largest=False)\n        return pos\n",
            lines=[6],
        ),
        Invalid(  # vits: a slice start taken from a parameter's element, which the module's call gives a tensor
            "import torch\ndef slice_segments(x, ids_str, size=4):\n    ret = torch.zeros_like(x[:, :, :size])\n"
            "    for i in range(x.size(0)):\n        idx_str = ids_str[i]\n        idx_end = idx_str + size\n"
            "        ret[i] = x[i, :, idx_str:idx_end]\n    return ret\n"
            "class Decoder(torch.nn.Module):\n    def forward(self, x):\n"
            "        ids = (torch.rand([x.size(0)], device=x.device) * 8).long()\n        return slice_segments(x, ids)\n",
            lines=[7],
        ),
        Invalid(  # stylegan2's augmentation: padding unpacked from a tensor of the transform's corners
            "import torch\nimport torch.nn.functional as F\ndef get_padding(G):\n"
            "    pad = torch.cat((-G, G)).max(1).values\n    pad_x1, pad_y1, pad_x2, pad_y2 = pad.ceil().to(torch.int32)\n"
            "    return pad_x1, pad_x2, pad_y1, pad_y2\nclass Augment(torch.nn.Module):\n"
            "    def forward(self, img, G):\n        pad_x1, pad_x2, pad_y1, pad_y2 = get_padding(G)\n"
            "        return F.pad(img, (pad_x1, pad_x2, pad_y1, pad_y2), mode='reflect')\n",
            lines=[10],
            message="size `pad_x1` comes from tensor values",
        ),
        Invalid(  # dinov2's k-NN: a shape broadcast as a tensor, then unpacked into the sizes
            "import torch\nclass KnnModule(torch.nn.Module):\n    def forward(self, features, source_rank):\n"
            "        shape = torch.tensor(features.shape).to(features.device)\n"
            "        torch.distributed.broadcast(shape, source_rank)\n"
            "        return torch.zeros(*shape, dtype=features.dtype, device=features.device)\n",
            lines=[6],
            message="size `*shape` comes from tensor values",
        ),
        Invalid(  # the image-captioning tutorial's decoder: lengths read back, then a batch that shrinks each step
            "import torch\nclass Decoder(torch.nn.Module):\n    def forward(self, encoder_out, caption_lengths):\n"
            "        decode_lengths = (caption_lengths - 1).tolist()\n"
            "        predictions = torch.zeros(encoder_out.size(0), max(decode_lengths), 10)\n"
            "        for t in range(max(decode_lengths)):\n"
            "            batch_size_t = sum([n > t for n in decode_lengths])\n"
            "            predictions[:batch_size_t, t, :] = self.fc(encoder_out[:batch_size_t])\n"
            "        return predictions\n",
            lines=[5, 8, 8],
            message="comes from tensor values, read on the host",
        ),
        Invalid(  # LLaVA's image splicing: the positions of the image tokens, read back and joined to the ends
            "import torch\nclass Llava(torch.nn.Module):\n    def forward(self, ids):\n"
            "        bounds = [-1] + torch.where(ids == -200)[0].tolist() + [ids.shape[0]]\n"
            "        return [ids[bounds[i] + 1 : bounds[i + 1]] for i in range(len(bounds) - 1)]\n",
            lines=[5],
            message="slice bound `bounds[i] + 1` comes from tensor values",
        ),
        Invalid(  # StyleTTS2: a batch sent to the device item by item, its lengths zipped with the predictions
            "import torch\ndef train(model, loader, device):\n    for batch in loader:\n"
            "        batch = [b.to(device) for b in batch]\n        texts, lengths = batch\n"
            "        for pred, n in zip(model(texts), lengths):\n            loss = pred[:n].sum()\n",
            lines=[7],
            message="slice bound `n`",
        ),
        Invalid(  # a loop's batch, rebound once sent to the device
            "import torch\ndef train(loader, device):\n    for x, lengths in loader:\n"
            "        lengths, x = lengths.to(device), x.to(device)\n        head = x[: lengths[0]]\n",
            lines=[5],
        ),
        Invalid(  # StyleTTS2's duration model: a length read back, then a range of it
            "import torch\nclass SLM(torch.nn.Module):\n    def forward(self, d):\n        for pred in d:\n"
            "            l = int(torch.round(pred.sum()).item())\n            t = torch.arange(0, l).to(d.device)\n"
            "        return t\n",
            lines=[6],
            message="size `l` comes from tensor values",
        ),
        Invalid(  # vall-e: the longest lengths, where a fixed size would go, and each of their uses
            "import torch\nimport torch.nn.functional as F\nclass VALLE(torch.nn.Module):\n"
            "    def forward(self, x, x_lens, y, y_lens):\n        x_len = x_lens.max()\n"
            "        y_len = torch.amax(y_lens) + int(self.prepend_bos)\n        y = F.pad(y, (0, y_len - y.shape[1]))\n"
            "        return self.decoder(x[:, :x_len], y)\n",
            lines=[5, 6, 7, 8],
        ),
        Invalid(  # F5-TTS' sampler: a parameter rebound to the longest duration (not filled in where left out)
            "import torch\nimport torch.nn.functional as F\nclass CFM(torch.nn.Module):\n"
            "    def forward(self, cond, duration, max_duration=4096):\n"
            "        duration = duration.clamp(max=max_duration)\n        max_duration = duration.amax()\n"
            "        return F.pad(cond, (0, 0, 0, max_duration - cond.shape[1]))\n",
            lines=[6, 7],
        ),
        Invalid("import torch\ny = x[: t.item()]\n", lines=[2], message="`t.item()`"),
        Invalid("import torch as T\nn = int(mask.sum())\nz = x[:, :n]\n", lines=[3]),
        Invalid("from torch import amax\ny = x[amax(lengths) - 1 :]\n", lines=[2]),
        Invalid(
            "from torch.nn import functional as F\nm = lengths.max()\ny = F.pad(x, (0, 1))[:, : m + 1]\n", lines=[3]
        ),
        Invalid("import torch.nn\nfor i in range(b):\n    out = x[i, : lengths.max().item()]\n", lines=[3]),
        Invalid(  # lit-llama's generate: the position is a tensor
            "import torch\ndef generate(idx, n):\n    input_pos = torch.arange(0, n, device=idx.device)\n    for _ in range(8):\n"
            "        input_pos = input_pos[-1:] + 1\n    return idx[:input_pos]\n",
            lines=[6],
        ),
        Invalid("import torch\ny = x[: lens.cpu().max()]\n", lines=[2]),  # copied to the host: a sync
        Invalid(  # YOLOX's label assignment: a count per image read from a tensor `dim=` says is one
            "import torch\ndef targets(labels, outputs):\n    nlabel = (labels.sum(dim=2) > 0).sum(dim=1)\n"
            "    for b in range(outputs.shape[0]):\n        num_gt = int(nlabel[b])\n"
            "        gt = labels[b, :num_gt, 1:5]\n",
            lines=[6],
            message="slice bound `num_gt`",
        ),
        Invalid(  # DFDNet: a part's box, read from a tensor, given to a method the module defines first
            "import torch\nclass DFD(torch.nn.Module):\n    def swap_feat(self, feat, location):\n"
            "        return feat[:, :, location[1]:location[3], location[0]:location[2]] * 2\n"
            "    def forward(self, x, part_locations):\n        feat = self.vgg(x)\n"
            "        location = (part_locations[0][0] // 4).int()\n        return self.swap_feat(feat, location)\n",
            lines=[4, 4],
            message="slice bound `location[",
        ),
        Invalid(  # a size a method defined first is given by the forward below it
            "import torch\nimport torch.nn.functional as F\nclass Net(torch.nn.Module):\n"
            "    def padded(self, x, n):\n        return F.pad(x, (0, n))\n"
            "    def forward(self, x, mask):\n        return self.padded(x, torch.count_nonzero(mask))\n",
            lines=[5],
            message="size `n`",
        ),
        Invalid(  # random crops of device data: a new shape for each size
            "import torch\ndef cutouts(pixels, n):\n    size = int(torch.rand([]) * n)\n"
            "    y = torch.randint(0, n - size + 1, ())\n    return pixels[:, :, y : y + size]\n",
            lines=[5],
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        """vall-e's `x_len = x_lens.max()`, then `x[:, :x_len]` and `F.pad(y, (0, x_len - n))`:
        the length is taken from the tensor here, where a fixed size replaces it; reported as
        well as each use, once. Not a parameter's fill-in (`if max_length is None: max_length =
        length.max()`): it runs only for the calls that leave it out, which length-left-out
        (PC520) names."""
        value, target = node.value, node.targets[0].target if len(node.targets) == 1 else None
        # vall-e's `y_len = y_lens.max() + int(self.ar_audio_prepend_bos)`: the reduction, then the arithmetic
        call = value.left if type(value) is cst.BinaryOperation else value
        if type(call) is not cst.Call or type(target) is not cst.Name or patterns.method_name(call) not in _LENGTHS:
            return  # `torch.max(lengths)` ends in a length's name too
        names = self.ctx.qualified_names(call.func)
        whole = len(call.args) == (1 if names else 0)  # of every element: a number, not a tensor along a dim
        if not whole or not (names & _TORCH_LENGTHS or not names):
            return
        function = enclosing_function(self.ctx.ancestors)
        if function is None or filling_in([*self.ctx.ancestors, node]) is not None:
            return
        if used_as_size(self.ctx, function, target.value):
            self._report_read([value], "length")

    def visit_Slice(self, node: cst.Slice) -> None:
        bounds = [bound for bound in (node.lower, node.upper, node.step) if bound is not None]
        self._report_read(bounds, "slice bound", self._slices_host_data)  # one per slice: one length to fix

    def visit_Call(self, node: cst.Call) -> None:
        """`torch.zeros(batch, max(lengths), vocab)`, `F.pad(x, (left, right))`: a size from tensor
        values (torch's number arguments of tensors, `torch.full`'s and `torch.arange`'s, are
        host-sync-in-step's)."""
        names = self.ctx.qualified_names(node.func)
        if "torch.arange" in names:  # a number read back (`l = int(t.item())`); a tensor given is PC503's sync
            bounds = [arg.value for arg in node.args[:3] if arg.keyword is None and not arg.star]
            bounds += [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value in _RANGE]
            read = [value for value in bounds if self._python_number(value) and reads_tensor_scalar(self.ctx, value)]
            self._report_read(read, "size")
            return
        if names & _FACTORIES:
            given = [arg for arg in node.args if arg.keyword is None or arg.keyword.value == "size"]
        elif names & _SIZED.keys() or (not names and patterns.method_name(node) == "topk"):
            at, keyword = _SIZED[min(names & _SIZED.keys())] if names else (0, "k")  # `scores.topk(k)`
            given = [arg for arg in node.args[at : at + 1] if arg.keyword is None and not arg.star]
            given += [arg for arg in node.args if arg.keyword is not None and arg.keyword.value == keyword]
        else:
            return
        sizes: list[cst.BaseExpression] = []
        for arg in given:
            if arg.star == "*" and tensor_valued(self.ctx, arg.value) and not in_host_memory(self.ctx, arg.value):
                # dinov2's k-NN: `torch.zeros(*shape)` with `shape = torch.tensor(x.shape).to(device)`
                self.report_by_reach(
                    arg.value, what="size", bound=f"*{shown(arg.value)}", advice=advice(self.ctx.targets)
                )
                return
            listed = arg.value.elements if type(arg.value) in (cst.Tuple, cst.List) else (arg,)
            sizes.extend(size.value for size in listed)
        self._report_read(sizes, "size")  # a tensor given as a size is read too (its `__index__`)

    def _report_read(
        self, values: list[cst.BaseExpression], what: str, host_sliced: Callable[[], bool] = lambda: True
    ) -> None:
        """Report the first of `values` read from tensor values; or, where none is yet, the first
        that reads a parameter, asked again at the end of the module, once the calls that give
        it are known (DFDNet's `swap_feat(..., location)`, defined ahead of the `forward` that
        passes it a tensor). One finding per slice or tensor made. Whether what is sliced is in
        host memory (always, for a size) is asked only of a bound that reads a tensor: the
        question is dear and most slices never raise it."""
        fields = {"what": what, "advice": advice(self.ctx.targets)}
        for value in values:
            if self._from_tensor_values(value, host_sliced):
                self.report_by_reach(value, bound=shown(value), **fields)
                return
        function = enclosing_function(self.ctx.ancestors)
        given = {param.name.value for param in function.params.params} - {"self"} if function is not None else set()
        value = next((value for value in values if self._reads_given(value, given)), None)
        if value is not None and function is not None:
            sliced = host_sliced()  # where the walk is now, not at the end of the module
            holds = partial(self._given_from_tensor_values, function, given, value, lambda: sliced)
            self.report_by_reach(value, holds=holds, bound=shown(value), **fields)

    def _given_from_tensor_values(
        self, function: cst.FunctionDef, given: set[str], value: cst.BaseExpression, host_sliced: Callable[[], bool]
    ) -> bool:
        """`_from_tensor_values`, where the module's own calls give the parameters it reads (not
        what other files may pass: those conventions say nothing of this function's sizes)."""
        module_flow = self.ctx.flow
        read = {name for name in given if self._reads_given(value, {name})}
        called = module_flow is not None and all(module_flow.passed_arguments(function, name) for name in read)
        return called and self._from_tensor_values(value, host_sliced)

    def _reads_given(self, value: cst.BaseExpression, given: set[str], depth: int = 0) -> bool:
        """Whether a bound reads one of the parameters, also through the names the function
        binds from them (vits' `idx_str = ids_str[i]`, then `x[i, :, idx_str:idx_end]`)."""
        if reads_names(value, given):
            return True
        resolver = self.ctx.resolver
        if depth == 2 or resolver is None:
            return False
        names = [each for each in (value, *descendants(value)) if type(each) is cst.Name and each.value not in given]
        return any(
            self._reads_given(bound, given, depth + 1) for name in names for bound in resolver.assigned_values(name)
        )

    def _from_tensor_values(self, value: cst.BaseExpression, host_sliced: Callable[[], bool]) -> bool:
        """Whether a number is read from a tensor on the device, unless what is sliced is in host
        memory (`host_sliced`; always, for a size) and so is the tensor it is read from."""
        return reads_tensor_value(self.ctx, value) and not (host_sliced() and read_in_host_memory(self.ctx, value))

    def _python_number(self, value: cst.BaseExpression) -> bool:
        """A number as Python holds it: a name, `int(...)`, `round(...)` (the builtins), arithmetic
        of those; not a tensor method's result (`lengths.max()`, a tensor that
        host-sync-in-step reports)."""
        if type(value) in (cst.BinaryOperation, cst.UnaryOperation):
            parts = [value.left, value.right] if type(value) is cst.BinaryOperation else [value.expression]  # type: ignore[attr-defined]
            return all(self._python_number(part) for part in parts)
        if type(value) is cst.Call:
            func = value.func
            return type(func) is cst.Name and func.value in _NUMBER_BUILTINS and not self.ctx.qualified_names(func)
        return type(value) in (cst.Name, cst.Integer)

    def _slices_host_data(self) -> bool:
        """Whether what is sliced is in host memory: a tensor there (a dataset's own data), or
        a Python list (DINO's crops, `x[start_idx:end_idx]` after `x = [x]`)."""
        ancestors = self.ctx.ancestors
        if len(ancestors) < 2 or type(ancestors[-2]) is not cst.Subscript:
            return False
        sliced, resolver = ancestors[-2].value, self.ctx.resolver
        if type(sliced) is cst.Name and resolver is not None:
            if any(type(value) in (cst.List, cst.ListComp) for value in resolver.explicit_values(sliced)):
                return True
        return in_host_memory(self.ctx, sliced)
