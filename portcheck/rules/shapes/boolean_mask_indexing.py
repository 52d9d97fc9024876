from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import libcst as cst

from portcheck import targets as target_data
from portcheck.resolve import Scope
from portcheck.rule import OFF, WARNING, FileContext, Invalid, Valid
from portcheck.rules.shapes import (
    SYNC_SEVERITY,
    StepRule,
    advice,
    in_host_memory,
    is_bool_mask,
    numpy_valued,
    tensor_method,
    tensor_valued,
    tests_tensor_value,
)
from portcheck.walk import descendants

_READ = "boolean-mask indexing returns as many elements as the mask has True values"
_KEPT = (
    "indexing with `{name}`, the positions a test of tensor values keeps, returns as many elements as the test keeps"
)
_WRITE = "assigning a tensor through a boolean mask needs the positions of its True values"
_FILL = (
    "filling through a boolean mask is a masked_fill in eager PyTorch, but torch_xla reads the mask on the "
    "host and writes at its True positions, one graph per count"
)
# A scalar through a mask: a masked_fill where the backend's index_put dispatches to one (eager
# ATen), data-dependent where it does not (torch_xla's own index_put, pytorch/xla#4248).
FILL_SEVERITY = {
    name: OFF if target.dynamic_shapes == "free" else WARNING for name, target in target_data.all_targets().items()
}
_SCALAR_METHODS = frozenset({"item", "size", "dim", "numel"})
_SCALAR_BUILTINS = frozenset({"float", "int", "bool", "abs", "round", "len", "min", "max"})
_ZERO_DIM = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})


_COPIES = frozenset({"clone", "detach", "contiguous", "view", "reshape"})  # the same mask, or a copy of it


class BooleanMaskIndexing(StepRule):
    """## What it does
    Reports indexing with a boolean mask, `x[mask]`, where the index is a comparison
    (`x[x > 0]`), a `~`, `&` or `|` combination of masks, a call that makes one (`.bool()`,
    `torch.isnan`, `logical_and`, `.any(dim)`, `dtype=torch.bool`...), a name bound once to
    one of those, or a parameter that a call in the same module passes one of those (`def pick(x, keep): return
    x[keep]` with `pick(x, x > 0)`), one moved to a device (`(m.sum(0) > 0).to(device)`), or a
    name called a mask whose values the module does not show (a parameter `valid_mask`,
    `self.meta.to_cache_mask`). So is indexing with the positions a list comprehension
    keeps by a test of tensor values (a beam search's `incomplete = [i for i, w in
    enumerate(words) if w != end]`, then `seqs[incomplete]`), or a list made from them.
    Assignments through a mask are reported too: of a tensor (`x[mask] = y[mask]`) and augmented
    (`x[mask] += 1`) as reads are; of a scalar (`x[mask] = 0`, `logits[:, m] = -inf`) as a
    warning, where compiled graphs need static shapes. NumPy arrays (a `numpy` call's result,
    a name bound to one and never to a torch call, or what is handed straight to a `numpy`
    call) and tensors in host memory (`.cpu()`, made from Python data where nothing sets a
    default device, or in a dataset's methods or a collate function, which DataLoader workers
    run) are left alone: they are indexed on the host.

    ## Why is this bad?
    The result has as many elements as the mask has True values, which only the data knows.
    Dynamo breaks the graph ("Dynamic shape operator: aten.nonzero"), XLA syncs to the host and
    compiles one graph per count, and Trainium's compiler rejects the dynamic dimension. A
    scalar assigned through a mask keeps the shape, and eager PyTorch runs it as a
    `masked_fill`; torch_xla lowers it to an indexed write at the mask's True positions, read
    on the host first (pytorch/xla#4248), and whether each native backend's indexed write
    does the same is not documented: `masked_fill` is one graph everywhere.

    ## Example
    ```python
    loss = losses[valid].mean()
    x[mask] = y[mask]
    scores[scores < threshold] = 0.0
    ```

    ## Use instead
    ```python
    loss = torch.where(valid, losses, 0).sum() / valid.sum().clamp(min=1)
    x = torch.where(mask, y, x)
    scores = scores.masked_fill(scores < threshold, 0.0)
    ```

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; info on mps, xpu and rocm (a host
    sync); off on cpu, which computes on the host: nothing to copy or wait for. A scalar
    assigned through a mask: a warning on tpu, neuron, xla, npu and hpu, off elsewhere.

    These severities hold in step code as host-sync-in-step (PC503) finds it, across the
    repository, and also under `if step % N == 0:` (a new shape every N steps compiles a new
    graph each time; gaussian-splatting's densification resizes the model for every step
    after); elsewhere (plots, metrics, data preparation, export) it is info: that code runs
    once or on host data, where a dynamic shape costs one compilation at most. On neuron it
    stays a warning there for a tensor known to be one (not an unknown value that may be a
    NumPy array): Trainium's compiler rejects a dynamic dimension however seldom it runs
    (GPTQ's `H[dead, dead] = 1`, with `H` made by `torch.zeros(..., device=dev)`).

    ## Fix safety
    No automatic fix: the masked form changes what later code receives (a full-size tensor),
    and `masked_fill` broadcasts the mask from the right where indexing applies it from the
    left (`x[m] = 0` with `m` of shape `(B,)` is `x.masked_fill(m[:, None], 0)` for `x` of
    shape `(B, D)`): only the shapes tell which.
    """

    code = "PC502"
    every_n_steps = True  # a new shape every N steps is a new graph each time
    name = "boolean-mask-indexing"
    message = "{problem}{reach}"
    hint = "keep the shape: {instead}{advice}"
    severity = SYNC_SEVERITY
    # The rule reports only in files that import torch, so "torch" is in every one of them.
    triggers = (b"torch",)

    VALID = [
        Valid(  # segment-anything: a loop over the indices NMS kept, whatever the loop's name for each
            "import torch\nfrom torchvision.ops import batched_nms\ndef refine(masks, scores, boxes, idxs):\n"
            "    keep = batched_nms(boxes, scores, idxs, 0.7)\n    for i_mask in keep:\n"
            "        boxes[i_mask] = masks[i_mask].sum()\n"
        ),
        Valid(  # an index rebound from itself: still the index it was given
            "import torch\nclass Gather(torch.nn.Module):\n    def forward(self, x, idx, perm):\n"
            "        idx = idx[perm]\n        return x[idx]\n"
        ),
        Valid(  # an index the function checks is of integers
            "import torch\ndef pick(v, idx):\n    assert idx.dtype == torch.long\n    return v[torch.as_tensor(idx, device=v.device)]\n"
        ),
        Valid(  # facenet's pad(): the boxes parameter, copied to NumPy first, clipped through masks on the host
            "import torch\nclass Detector(torch.nn.Module):\n    def forward(self, boxes, w):\n        return pad(boxes, w)\n"
            "def pad(boxes, w):\n    boxes = boxes.trunc().int().cpu().numpy()\n    x = boxes[:, 0]\n    x[x > w] = w\n"
            "    return x\n"
        ),
        Valid(  # an index scaled in place is no mask
            "import torch\nclass Pick(torch.nn.Module):\n    def forward(self, idx, boxes):\n"
            "        idx *= 2\n        return boxes[idx]\n"
        ),
        Valid(  # an index tensor is named for its indices; a cast to another dtype is no mask
            "import torch\nimport torch.nn as nn\nclass Pick(nn.Module):\n"
            "    def forward(self, x, idx, mask):\n        rows = x[idx]\n        return rows[mask.to(torch.long)]\n"
        ),
        Valid(  # positions kept by a test of Python values
            "import torch\ndef keep(x, lengths):\n    for step in range(8):\n        y = model(x)\n"
            "        long = [i for i, n in enumerate(lengths) if n > 3]\n        y = y[long]\n"
        ),
        Valid(  # fairseq's data helpers: handed to NumPy, and in a dataset's own methods
            "import numpy as np\nimport torch\ndef spans(mask_idc, sz):\n    return np.unique(mask_idc[mask_idc < sz])\n"
            "class DenoisingDataset(torch.utils.data.Dataset):\n    def add_whole_word_mask(self, source, p):\n"
            "        is_word_start = self.word_starts(source)\n        return source[is_word_start > 0]\n"
        ),
        Valid("import torch\ny = x[idx]\nz = x[:, 1:3]\nw = x[0, None]\nv = x[..., i]\n"),
        Valid(  # a scalar through a mask is a masked_fill in eager PyTorch: fine where shapes are free
            "import torch\nx[x < 0] = 0\nlogits[:, ids >= vocab] = -float('inf')\nt[t[:, -1] == eot] = eot\n",
            options={"targets": ["mps", "xpu", "rocm", "cpu"]},
        ),
        Valid("def f(torch, x):\n    return x[torch.isnan(x)]\n"),
        Valid("import torch\nlabel = ('no', 'yes')[score > 0]\n"),
        Valid("import torch\nidx = torch.ones(n, dtype=torch.long)\ny = x[idx]\nz = x[w.to(torch.int64)]\n"),
        Valid("import numpy as np\nsmall = arr[arr > 0]\n"),
        Valid(  # NumPy arrays in a module that also uses torch
            "import numpy as np\nimport torch\nweights = np.bincount(c, minlength=n)\nweights[weights == 0] = 1\n"
            "bi = np.floor(np.arange(n) / bs).astype(int)\nari = ar[bi == i]\nkeep = ids[np.isin(ids, allowed)]\n"
            "w = np.bincount(c)\nw[w == 0] = 1\nw = 1 / w\nw /= w.sum()\n"
            "out = logits.argmax(0).cpu().numpy()\npred = 255 * np.ones(out.shape)\npred[out == k] = 3\n"
        ),
        Valid(  # indices one way and the other, or a mask only before a rebinding to indices
            "import torch\ndef pick(x, i, j, fast, ids):\n    idx = [i] if fast else [j]\n    keep = x > 0\n"
            "    if ids is not None:\n        keep = ids\n    return x[idx], x[keep]\n"
        ),
        Valid(  # callers pass indices, or the parameter is rebound first
            "import torch\ndef pick(x, idx):\n    return x[idx]\npick(x, torch.arange(3))\n"
            "def clean(x, m):\n    m = m.nonzero_static(size=4)\n    return x[m]\nclean(x, x > 0)\n"
        ),
        Valid(  # gcn: a parameter named `mask`, but every call passes indices
            "import torch\ndef test(model, x, target, mask):\n    output = model(x)\n"
            "    return output[mask], target[mask]\nidx = torch.randperm(2708)\n"
            "idx_test, idx_train = idx[:1000], idx[1000:]\nfor epoch in range(200):\n"
            "    test(model, x, y, idx_test)\n"
        ),
        # on the CPU the tensor is already in host memory: no device to wait for
        Valid("import torch\npos = x[x > 0]\n", options={"targets": ["cpu"]}),
        Valid(  # a dataset's tensors, made from Python data in host memory
            "import numpy as np\nimport torch\ndef prepare(anno):\n    boxes = [obj['bbox'] for obj in anno]\n"
            "    boxes = torch.as_tensor(boxes, dtype=torch.float32).reshape(-1, 4)\n"
            "    keep = (boxes[:, 3] > boxes[:, 1]) & (boxes[:, 2] > boxes[:, 0])\n    boxes = boxes[keep]\n"
            "    area = torch.tensor([obj['area'] for obj in anno])\n    return boxes, area[keep], x.cpu()[x.cpu() > 0]\n"
            "def scales(counts, n):\n    inv = torch.zeros(n)\n    inv[counts > 0] = counts[counts > 0].float().rsqrt()\n"
            "def make_batch(image):\n    m = np.array(image.convert('L'))\n    m = m.astype(np.float32) / 255.0\n"
            "    m = m[None, None]\n    m[m < 0.5] = 0\n    return torch.from_numpy(m)\n"
            "def prepare_mask(image, mask):\n    mask = np.array(mask.convert('L'))\n    mask = mask[None, None]\n"
            "    mask[mask < 0.5] = 0\n    mask = torch.from_numpy(mask)\n    return mask\n"
        ),
    ]
    INVALID = [
        Invalid(  # the rows of a stack of masks are masks
            "import torch\ndef split(x):\n    masks = torch.stack([x > 0, x < 1])\n    for mask in masks:\n"
            "        print(x[mask])\n",
            lines=[5],
        ),
        Invalid(  # vector-quantize-pytorch: the mask given, laid out per head by einops where there are heads
            "import torch\nimport torch.nn.functional as F\nfrom einops import repeat\n"
            "class VQ(torch.nn.Module):\n    def forward(self, x, q, mask, heads=1):\n"
            "        loss = F.mse_loss(q, x, reduction='none')\n        loss_mask = mask\n        if heads > 1:\n"
            "            loss_mask = repeat(loss_mask, 'b n -> (b h) n', h=heads)\n"
            "        return loss[loss_mask].mean()\n",
            lines=[10],
        ),
        Invalid(  # torchtitan's vocab-parallel cross entropy: autograd runs the backward every step
            "import torch\nclass VocabParallelCE(torch.autograd.Function):\n    @staticmethod\n"
            "    def backward(ctx, grad_output):\n        labels, = ctx.saved_tensors\n"
            "        out_of_range = labels >= ctx.vocab_size\n        local = labels.clone()\n"
            "        local[out_of_range] = 0\n        return local * grad_output, None\n",
            lines=[8],
            message="filling through a boolean mask",
        ),
        Invalid(  # segment-anything's MaskData.filter: the function itself asks whether `keep` holds bools
            "import torch\nclass MaskData:\n    def filter(self, keep):\n        for k, v in self._stats.items():\n"
            "            if isinstance(v, torch.Tensor):\n                self._stats[k] = v[torch.as_tensor(keep, device=v.device)]\n"
            "            elif isinstance(v, list) and keep.dtype == torch.bool:\n"
            "                self._stats[k] = [a for i, a in enumerate(v) if keep[i]]\n",
            lines=[6],
        ),
        Invalid(  # HRNet's OHEM loss: forward() runs its methods through a table of them
            "import torch\nclass OhemCrossEntropy(torch.nn.Module):\n    def _ohem_forward(self, score, target):\n"
            "        mask = target.view(-1) != 255\n        return score.view(-1)[mask].mean()\n"
            "    def forward(self, scores, target):\n        functions = [self._ohem_forward] * len(scores)\n"
            "        return sum(func(x, target) for x, func in zip(scores, functions))\n",
            lines=[5],
            message="boolean-mask indexing returns as many elements as the mask has True values",
        ),
        Invalid(  # yolact's mask loss: a row of the mask a caller passes, beside an integer index
            "import torch\nclass Loss(torch.nn.Module):\n    def forward(self, conf_t, idx_t):\n"
            "        pos = conf_t > 0\n        return self.mask_loss(pos, idx_t)\n"
            "    def mask_loss(self, pos, idx_t):\n        if idx_t.dim() > 2:\n            pos = pos.clone()\n"
            "        for idx in range(4):\n            cur_pos = pos[idx]\n"
            "            picked = idx_t[idx, cur_pos]\n        return picked\n",
            lines=[11],
            message="a caller passes a boolean mask as `pos`",
        ),
        Invalid(  # yolact's fast NMS: a mask narrowed in place stays a mask
            "import torch\nclass Detect(torch.nn.Module):\n    def forward(self, iou_max, scores, boxes, second=False):\n"
            "        keep = iou_max <= 0.5\n        if second:\n            keep *= scores > 0.05\n"
            "        return boxes[keep]\n",
            lines=[7],
        ),
        Invalid(  # ChatTTS, Depth-Anything: a parameter named for a mask; yolov7: a mask moved to the device
            "import torch\nimport torch.nn as nn\nclass Embed(nn.Module):\n"
            "    def forward(self, input_ids, text_mask):\n        valid_mask = text_mask.detach()\n"
            "        emb = self.emb(input_ids[valid_mask])\n        out = torch.zeros(4, 8, device=emb.device)\n"
            "        out[text_mask] = emb\n        return out\n"
            "    def loss(self, matching):\n        for step in range(8):\n"
            "            keep = (matching.sum(0) > 0.0).to(matching.device)\n            matching = matching[:, keep]\n",
            lines=[6, 8, 13],
        ),
        Invalid(  # airbench: a loader's __iter__ runs as the loop over it draws batches
            "import torch\ndef crop(images, shifts):\n    out = torch.empty_like(images)\n"
            "    for s in range(-2, 3):\n        mask = shifts == s\n        out[mask] = images[mask]\n    return out\n"
            "class GpuLoader:\n    def __init__(self, images):\n        self.images = images.cuda()\n"
            "    def __iter__(self):\n        shifts = torch.randint(-2, 3, (len(self.images),), device='cuda')\n"
            "        images = crop(self.images, shifts)\n        for i in range(0, len(images), 64):\n"
            "            yield images[i:i + 64]\n"
            "train = GpuLoader(torch.rand(512, 3, 32, 32))\nfor x in train:\n    model(x).sum().backward()\n",
            lines=[6],
            message="positions of its True values",
        ),
        Invalid(  # lit-llama's LoRA: a mask kept on self, assigned through in a forward helper
            "import torch\nclass MergedLinear(torch.nn.Linear):\n    def __init__(self, n):\n"
            "        self.lora_ind = self.weight.new_zeros((n,), dtype=torch.bool).view(n, -1)\n"
            "        self.lora_ind = self.lora_ind.view(-1)\n    def zero_pad(self, x):\n"
            "        result = x.new_zeros((len(x), 8))\n        result[:, self.lora_ind] = x\n        return result\n"
            "    def forward(self, x):\n        return self.zero_pad(x)\n",
            lines=[8],
        ),
        # plotting code nothing runs every step: info (yolov5's plot_images)
        Invalid(
            "import torch\ndef plot(targets, i):\n    return targets[targets[:, 0] == i]\n",
            lines=[3],
            message="(info: no step loop",
        ),
        # GPTQ's dead columns, once per layer: a tensor on the device, which Trainium cannot compile
        Invalid(
            "import torch\nclass GPTQ:\n    def __init__(self, columns, dev):\n"
            "        self.H = torch.zeros((columns, columns), device=dev)\n"
            "    def quantize(self):\n        H = self.H\n        dead = torch.diag(H) == 0\n        H[dead, dead] = 1\n",
            lines=[8],
            message="info, a warning where only static shapes compile",
        ),
        Invalid(  # TRL's PPO: a list of device scores concatenated along a dimension
            "import torch\nscores = []\nfor batch in batches:\n    scores.append(reward_model(batch))\n"
            "scores = torch.cat(scores, 0)\nhas_eos = torch.any(responses == eos_id, dim=-1)\n"
            "scores[~has_eos] -= penalty\n",
            lines=[7],
        ),
        Invalid("import torch\npos = x[x > 0]\n", lines=[2], message="as many elements"),
        Invalid("import torch as T\nkeep = (s > 0.5) & (s < 0.9)\nboxes = boxes[keep]\n", lines=[3]),
        Invalid("from torch import isnan\nclean = x[~isnan(x)]\n", lines=[2]),
        Invalid(
            "import torch\nkeep = torch.ones(n, dtype=torch.bool)\nkeep[banned] = False\ny = x[:, keep]\n"
            "z = x[w.to(torch.bool)]\n",
            lines=[4, 5],
        ),
        Invalid("from torch.nn import functional as F\nvalid = m.bool()\ny = F.relu(x)[:, valid]\n", lines=[3]),
        Invalid("import torch.nn\ntokens[padding_mask.any(-1)] += 1\n", lines=[2]),
        Invalid("import torch\nx[x > 0] = y[x > 0]\n", lines=[2], message="assigning a tensor"),
        Invalid(  # once a tensor, not NumPy's
            "import numpy as np\nimport torch\nw = np.bincount(c)\nw = torch.from_numpy(w).cuda()\nv = w[w > 0]\n",
            lines=[5],
        ),
        Invalid(
            "import torch\nx[x < 0] = 0\nlogits[~valid] = -torch.finfo(logits.dtype).max\n"
            "logits[:, ids >= vocab] = -float('inf')\nt[t[:, -1] == eot] = eot\n"
            "idx[idx >= p.shape[0]] = p.shape[0] - 1\nalpha[t < 0] = torch.tensor(1.0)\n",
            lines=[2, 3, 4, 5, 6, 7],
            message="filling through a boolean mask",
        ),
        Invalid(
            "import torch\ny[top == i] = expert(x[top == i]).to(y.dtype)\n", lines=[2], message="assigning a tensor"
        ),
        Invalid(
            "import torch\nclass Head:\n    def pick(self, x, keep=None):\n        return x[keep]\n"
            "    def run(self, x):\n        valid = x.sum(-1) > 0\n        return self.pick(x, keep=valid)\n"
            "def first(x, idx):\n    return x[idx]\nfirst(x, torch.isnan(x))\n",
            lines=[4, 9],
            message="a caller passes a boolean mask",
        ),
        Invalid(  # moved to the device, or made where the default device may be another
            "import torch\ndef prepare(anno, device):\n    boxes = torch.as_tensor([o['bbox'] for o in anno])\n"
            "    boxes = boxes.to(device)\n    return boxes[boxes[:, 2] > 0]\n"
            "def padded(n):\n    with torch.device('cuda'):\n        ids = torch.tensor([1, 2, n])\n"
            "        return ids[ids > 1]\n",
            lines=[5, 9],
        ),
        Invalid(  # dinov2's depth loss, yolov5's NMS and mask selection: a mask rebound under an `if`, a row
            # of a mask, and a mask one way of an `if` expression
            "import torch\ndef sigloss(input, target, cap):\n    valid = target > 0\n    if cap is not None:\n"
            "        valid = torch.logical_and(target > 0, target <= cap)\n    return input[valid]\n"
            "def nms(prediction, thres):\n    xc = prediction[..., 4] > thres\n"
            "    return [x[xc[i]] for i, x in enumerate(prediction)]\n"
            "def pick(masks, targets, si, overlap):\n    midx = [si] if overlap else targets[:, 0] == si\n"
            "    return masks[midx]\n",
            lines=[6, 9, 12],
            message="as many elements",
        ),
        Invalid(  # the parameter itself, then sent to the device
            "import numpy as np\nimport torch\ndef prepare(mask, device):\n    mask[mask < 0.5] = 0\n"
            "    mask = np.array(mask)\n    mask = torch.from_numpy(mask).to(device)\n    mask[mask > 0.9] = 1\n"
            "    return mask\n",
            lines=[4, 7],
        ),
        Invalid(  # the image-captioning tutorial's beam search: beams that reached <end> leave the batch
            "import torch\ndef beam(decoder, k_prev, end, k):\n    seqs = k_prev\n    while k > 0:\n"
            "        scores = decoder.fc(decoder.embedding(k_prev))\n"
            "        top, words = scores.view(-1).topk(k, 0, True, True)\n"
            "        seqs = torch.cat([seqs, words.unsqueeze(1)], dim=1)\n"
            "        incomplete = [i for i, w in enumerate(words) if w != end]\n"
            "        complete = list(set(range(len(words))) - set(incomplete))\n"
            "        done = seqs[complete].tolist()\n        k -= len(complete)\n"
            "        seqs = seqs[incomplete]\n        k_prev = words[incomplete].unsqueeze(1)\n    return seqs\n",
            lines=[10, 12, 13],
            message="the positions a test of tensor values keeps",
        ),
        Invalid(  # YOLOX: per-image masks joined, and a mask a helper of the class returns
            "import torch\nclass Head(torch.nn.Module):\n    def forward(self, preds, boxes):\n"
            "        fg_masks = []\n        for b in range(preds.shape[0]):\n"
            "            fg_mask, rel = self.constraint(boxes[b])\n            kept = preds[b][fg_mask]\n"
            "            fg_masks.append(fg_mask)\n        fg_masks = torch.cat(fg_masks, 0)\n"
            "        return preds.view(-1, 4)[fg_masks]\n",
            lines=[7, 10],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._calls: dict[str, list[tuple[cst.Call, Scope]]] = {}  # by the name called, with its scope
        self._filters: set[int] = set()  # the list comprehensions that keep items by a test of tensor values

    def visit_CompIf(self, node: cst.CompIf) -> None:
        """Note a list comprehension whose `if` tests tensor values (`[i for i, w in
        enumerate(words) if w != end]`): the positions it keeps depend on the data."""
        comprehension = next(
            (each for each in reversed(self.ctx.ancestors) if isinstance(each, (cst.ListComp, cst.SetComp))), None
        )
        if comprehension is not None and tests_tensor_value(self.ctx, node.test):
            self._filters.add(id(comprehension))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, (cst.Tuple, cst.List, cst.Dict)):
            return  # a literal picked by a Python bool
        if not self._masked(node):
            kept = self._kept_positions(node)
            if kept is not None and not in_host_memory(self.ctx, node.value) and not self._given_to_numpy():
                problem = _KEPT.format(name=kept)
                instead = "every row, with the finished ones masked (torch.where), or index tensors of a fixed size"
                self.report_by_reach(node, problem=problem, instead=instead, advice=advice(self.ctx.targets))
                return
            self._note_parameter_index(node)
            return
        if in_host_memory(self.ctx, node.value) or self._given_to_numpy():
            return
        # a parameter judged by its name: asked again once the module's calls of it are known
        holds = partial(self._masked, node) if self._parameter_index(node) else None
        parent, ancestors = self.ctx.parent, self.ctx.ancestors
        if isinstance(parent, cst.AssignTarget) and len(ancestors) > 1 and isinstance(ancestors[-2], cst.Assign):
            if not self._is_tensor(ancestors[-2].value):
                instead = "x = x.masked_fill(mask, v), the mask shaped as x (it broadcasts from the right)"
                static = tensor_valued(self.ctx, node.value)
                self.report_by_reach(
                    node, FILL_SEVERITY, holds, static_off_step=static, problem=_FILL, instead=instead, advice=""
                )
                return
            problem, instead = _WRITE, "x = torch.where(mask, y, x)"
        elif self._in_masked_store([*ancestors, node]):
            return  # x[m] = f(y[m]): one finding, on the assignment
        else:
            problem, instead = _READ, "torch.where(mask, x, 0) or x.masked_fill(~mask, 0), then masked reductions"
        static = tensor_valued(self.ctx, node.value)  # on the device: Trainium compiles no dynamic shape, ever
        self.report_by_reach(
            node, holds=holds, static_off_step=static, problem=problem, instead=instead, advice=advice(self.ctx.targets)
        )

    def _parameter_index(self, node: cst.Subscript) -> bool:
        """Whether an index is a parameter of the function, bound nowhere in it."""
        resolver = self.ctx.resolver
        return resolver is not None and any(
            isinstance(element.slice, cst.Index)
            and isinstance(element.slice.value, cst.Name)
            and resolver.parameter_of(element.slice.value) is not None
            for element in node.slice
        )

    def _kept_positions(self, node: cst.Subscript) -> str | None:
        """The name of the index list, where a subscript indexes with the positions a list
        comprehension keeps by a test of tensor values, or a list made from them
        (`list(set(range(n)) - set(incomplete))`)."""
        for element in node.slice:
            index = element.slice.value if isinstance(element.slice, cst.Index) else None
            if isinstance(index, cst.Name) and self._keeps_by_data(index, 0):
                return index.value
        return None

    def _keeps_by_data(self, name: cst.Name, depth: int) -> bool:
        values = self.ctx.assigned_values(name)
        if not values or depth > 2:
            return False
        return all(
            id(value) in self._filters
            or any(
                isinstance(each, cst.Name) and each.value != name.value and self._keeps_by_data(each, depth + 1)
                for each in descendants(value)
            )
            for value in values
        )

    def _note_parameter_index(self, node: cst.Subscript) -> None:
        """`x[keep]` where `keep` is a parameter of the enclosing function, or a row of one
        (yolact's `cur_pos = pos[idx]`, then `idx_t[idx, cur_pos]`): reported at the end of the
        module if a call there passes that parameter a mask."""
        if self.ctx.parent is None or isinstance(self.ctx.parent, cst.AssignTarget):
            return
        for element in node.slice:
            index = element.slice.value if isinstance(element.slice, cst.Index) else None
            if not isinstance(index, cst.Name) or self.ctx.bindings(index) != 1:  # not rebound in the function
                continue
            row = self.ctx.assigned_value(index)
            given = row.value if isinstance(row, cst.Subscript) and isinstance(row.value, cst.Name) else index
            found = _parameter(self.ctx.ancestors, given.value)
            if found is None or (given is not index and not self._only_copied(given)):
                continue
            function, position = found
            self.report_by_reach(
                node,
                holds=partial(self._given_mask, function, position, given.value),
                problem=f"{_READ} (a caller passes a boolean mask as `{given.value}`)",
                instead="torch.where(mask, x, 0) or x.masked_fill(~mask, 0), then masked reductions",
                advice=advice(self.ctx.targets),
            )
            return

    def _only_copied(self, parameter: cst.Name) -> bool:
        """Whether the function binds the parameter again only to a copy or view of itself
        (yolact's `pos = pos.clone()`): still the mask a caller passes."""
        resolver = self.ctx.resolver
        assert resolver is not None
        copies = resolver.explicit_values(parameter)
        return self.ctx.bindings(parameter) == 1 + len(copies) and all(
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _COPIES
            and isinstance(value.func.value, cst.Name)
            and value.func.value.value == parameter.value
            for value in copies
        )

    def visit_Call(self, node: cst.Call) -> None:
        """Note the calls of the module's own functions (by name or through `self.`), whose
        arguments are read at the end of the module if a function indexes with a parameter."""
        func = node.func
        if type(func) is cst.Name:
            name = func.value
        elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            name = func.attr.value
        else:
            return
        flow = self.ctx.flow
        if flow is not None and node.args:
            self._calls.setdefault(name, []).append((node, flow.scope))

    def _given_mask(self, function: str, position: int, parameter: str) -> bool:
        """Whether a call of `function` in the module passes a mask as `parameter` (asked at
        the end of the module, when all calls are known)."""
        return any(self._passes_mask(call, scope, position, parameter) for call, scope in self._calls.get(function, ()))

    def _passes_mask(self, call: cst.Call, scope: Scope, position: int, parameter: str) -> bool:
        """Whether a call gives a mask as the argument at `position` or keyword `parameter`,
        its names resolved in the scope of the call."""
        flow = self.ctx.flow
        assert flow is not None
        for index, arg in enumerate(call.args):
            if arg.star:
                continue
            given = arg.keyword.value == parameter if arg.keyword else index == position
            if given and flow.in_scope(scope, partial(is_bool_mask, self.ctx, arg.value)):
                return True
        return False

    def _masked(self, node: cst.Subscript) -> bool:
        """Indexed with a mask, and not a NumPy array (or a NumPy mask) on the host."""
        masks = [
            element.slice.value
            for element in node.slice
            if isinstance(element.slice, cst.Index) and is_bool_mask(self.ctx, element.slice.value)
        ]
        return bool(masks) and not any(numpy_valued(self.ctx, part) for part in (node.value, *masks))

    def _given_to_numpy(self) -> bool:
        """Whether the node the walk is at is an argument of a NumPy call (`np.unique(idc[idc <
        n])`: a device tensor would not convert, so it is a NumPy array)."""
        ancestors = self.ctx.ancestors
        if len(ancestors) < 2 or not isinstance(ancestors[-1], cst.Arg) or not isinstance(ancestors[-2], cst.Call):
            return False
        names = self.ctx.qualified_names(ancestors[-2].func)
        return bool(names) and all(name.split(".")[0] == "numpy" for name in names)

    def _in_masked_store(self, chain: Sequence[cst.CSTNode]) -> bool:
        """Whether the last node of `chain` (its ancestors, then itself) is inside the value of
        an assignment of a tensor through a mask: reported there, or left alone as a store into
        host memory, whose values are in host memory too."""
        for index in range(len(chain) - 2, -1, -1):
            statement = chain[index]
            if isinstance(statement, cst.Assign):
                return (
                    chain[index + 1] is statement.value
                    and self._is_tensor(statement.value)
                    and any(isinstance(t.target, cst.Subscript) and self._masked(t.target) for t in statement.targets)
                )
            if isinstance(statement, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False

    def _is_tensor(self, node: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether an assigned value may be a tensor of several elements. Numbers, constants,
        `finfo(...).min`, sizes (`x.shape[0]`, `x.size(1)`, `len(x)`), `.item()` and 0-d
        tensors such as `torch.tensor(1.0)` are not: those assignments are a masked_fill."""
        if isinstance(node, cst.Subscript):
            return not (isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape")
        if isinstance(node, cst.Call):
            return not self._scalar_call(node)
        if isinstance(node, cst.BinaryOperation):
            return self._is_tensor(node.left, depth) or self._is_tensor(node.right, depth)
        if isinstance(node, cst.UnaryOperation):
            return self._is_tensor(node.expression, depth)
        if isinstance(node, cst.Name) and depth < 3:
            bound = self.ctx.assigned_value(node)
            return bound is not None and self._is_tensor(bound, depth + 1)
        return False

    def _scalar_call(self, node: cst.Call) -> bool:
        if isinstance(node.func, cst.Name) and node.func.value in _SCALAR_BUILTINS:
            return not self.ctx.qualified_names(node.func)
        if tensor_method(self.ctx, node, _SCALAR_METHODS):
            return True
        return (
            bool(self.ctx.qualified_names(node.func) & _ZERO_DIM)
            and len(node.args) == 1
            and isinstance(node.args[0].value, (cst.Integer, cst.Float, cst.UnaryOperation))
        )


def _parameter(ancestors: Sequence[cst.CSTNode], name: str) -> tuple[str, int] | None:
    """(function, position among the arguments its callers write) of the innermost enclosing
    function's parameter `name`; a method's `self` is not written by callers."""
    function = next((node for node in reversed(ancestors) if isinstance(node, (cst.FunctionDef, cst.Lambda))), None)
    if not isinstance(function, cst.FunctionDef):
        return None
    params = [*function.params.posonly_params, *function.params.params]
    names = [param.name.value for param in params]
    if name not in names and name not in (param.name.value for param in function.params.kwonly_params):
        return None
    skip = 1 if names and names[0] in ("self", "cls") else 0
    return function.name.value, (names.index(name) - skip if name in names else -1)
