from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from portcheck.flow import enclosing_function, in_forward
from portcheck.rule import Invalid, Valid
from portcheck.rules.shapes import (
    RECOMPILE_SEVERITY,
    TensorRule,
    advice,
    innermost_loop,
    integer_positions,
    reads_names,
    shown,
    tensor_valued,
)
from portcheck.walk import descendants

_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_COUNTERS = frozenset({"range", "enumerate"})


class GrowingSlice(TensorRule):
    """## What it does
    Reports a slice of a tensor that starts at a fixed place and ends at a position that moves:
    - in a step loop (see PC503), an end that reads the loop's counter or a count the loop
      advances (`model(tokens[:, :cur])` in `for cur in range(start, total):`, also through a
      progress bar, `tqdm(range(...))`; `pos += 1`), or a loop's around it (a sampler's row
      loop around its column loop);
    - in a module's `forward`, an end that adds to an integer position its caller passes
      (llama's KV cache, `self.cache_k[:bsz, : start_pos + seqlen]` where `forward(self, x,
      start_pos: int)`, also through a name bound to the sum): a parameter annotated `int` or
      with an integer default, or one the function also writes the tensor at
      (`self.cache_k[:, start_pos : start_pos + seqlen] = xk`).

    A window whose start moves too (`tokens[:, prev_pos:cur_pos]`, `x[:, p : p + n]`) keeps its
    length, and is left alone (in a forward, one at a position the caller passes is PC517's);
    so are Python lists and NumPy arrays.

    ## Why is this bad?
    The slice has a new length at every step, and so does everything computed from it: the
    attention over the cache grows by one position per generated token. `torch.compile` with
    `dynamic=False` (TorchTPU's and TorchNeuron's default) recompiles for each length until it
    reaches the recompile limit, torch_xla compiles a new graph per length, and Trainium's
    compiler needs every shape ahead of time (NCC_EMOD025).

    ## Example
    ```python
    def forward(self, x, start_pos: int):
        self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk
        keys = self.cache_k[:bsz, : start_pos + seqlen]
        scores = q @ keys.transpose(1, 2)
    ```

    ## Use instead
    ```python
    def forward(self, x, input_pos):  # input_pos: a tensor of positions
        self.cache_k.index_copy_(1, input_pos, xk)
        keys = self.cache_k  # the whole cache, always the same shape
        scores = (q @ keys.transpose(1, 2)).masked_fill(~self.causal[input_pos], float("-inf"))
    ```
    A static KV cache (Hugging Face: `cache_implementation="static"`) does this for you.

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the full length and the mask depend on the model.
    """

    code = "PC510"
    name = "growing-slice"
    message = "`{sliced}` ends at `{position}`, which {moves}: each step has a new shape, so a compiled step recompiles per length"
    hint = "keep the tensor at its full length and mask what is not used yet (a static KV cache: index_copy_ at a position tensor){advice}"
    severity = RECOMPILE_SEVERITY
    # The rule reports only in files that import torch, so "torch" is in every one of them.
    triggers = (b"torch",)

    VALID = [
        # a window that moves as a whole keeps its length
        Valid(
            "import torch\ndef generate(model, total):\n    tokens = torch.zeros(4, total, dtype=torch.long)\n"
            "    prev = 0\n    for cur in range(1, total):\n        logits = model(tokens[:, prev:cur])\n"
            "        tokens[:, cur] = logits[:, -1].argmax(-1)\n        prev = cur\n"
        ),
        # the positional table read at an offset, for as many positions as the input has
        Valid(
            "import torch\nclass Rope(torch.nn.Module):\n    def forward(self, x, start_pos: int):\n"
            "        n = x.shape[1]\n        return x * self.freqs[start_pos : start_pos + n]\n"
        ),
        # `torch` is a parameter here: what it makes is not known to be a tensor
        Valid(
            "import torch\ndef generate(torch, model, total):\n    tokens = torch.zeros(4, total)\n"
            "    for cur in range(1, total):\n        tokens[:, cur] = model(tokens[:, :cur])[:, -1].argmax(-1)\n"
        ),
        # a Python list, and a loop that runs no step
        Valid(
            "import torch\nfor i in range(len(layers)):\n    head = layers[:i]\n"
            "    x = torch.zeros(8)\n    print(x[:i])\n"
        ),
        # a length set once, not moved by the loop
        Valid(
            "import torch\ntokens = torch.zeros(4, 64, dtype=torch.long)\nfor step in range(100):\n"
            "    logits = model(tokens[:, :prompt_len])\n    logits.sum().backward()\n"
        ),
        # shapes may change freely there
        Valid(
            "import torch\nclass A(torch.nn.Module):\n    def forward(self, x, start_pos: int):\n"
            "        return self.cache[:, : start_pos + x.shape[1]]\n",
            options={"targets": ["cpu", "mps", "rocm"]},
        ),
    ]
    INVALID = [
        Invalid(  # llama: the KV cache read up to the position the caller advances each token
            "import torch as T\nclass Attention(T.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.cache_k = T.zeros(4, 512, 8, 64)\n    def forward(self, x, start_pos: int):\n"
            "        bsz, seqlen, _ = x.shape\n        self.cache_k[:bsz, start_pos : start_pos + seqlen] = x\n"
            "        keys = self.cache_k[:bsz, : start_pos + seqlen]\n        return keys\n",
            lines=[9],
            message="`self.cache_k[:bsz, : start_pos + seqlen]` ends at `start_pos + seqlen`, which the caller moves",
        ),
        Invalid(  # no annotation, but the function writes the cache at that position
            "import torch.nn\nfrom torch import zeros\nclass Attention(torch.nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.register_buffer('cache_v', zeros(4, 512, 64), persistent=False)\n"
            "    def forward(self, x, start_pos):\n"
            "        end = start_pos + x.size(1)\n        self.cache_v[:, start_pos:end] = x\n"
            "        return self.cache_v[:, :end]\n",
            lines=[10],
        ),
        Invalid(  # decoding without a cache: the model reads a longer prefix every step
            "import torch\nfrom torch.nn import functional as F\ndef generate(model, total):\n"
            "    tokens = torch.zeros(4, total, dtype=torch.long)\n"
            "    for cur in range(1, total):\n        probs = F.softmax(model(tokens[:, :cur])[:, -1], -1)\n"
            "        tokens[:, cur] = probs.argmax(-1)\n    return tokens\n",
            lines=[6],
            message="which every step of a decoding loop moves",
        ),
        Invalid(  # vq-vae-2's PixelSNAIL sampling: the prefix grows with the row loop around the column loop
            "import torch\nfrom tqdm import tqdm\ndef sample(model, rows, cols):\n"
            "    row = torch.zeros(1, rows, cols, dtype=torch.int64)\n    for i in tqdm(range(rows)):\n"
            "        for j in range(cols):\n            out = model(row[:, : i + 1, :])\n"
            "            row[:, i, j] = torch.multinomial(out[:, :, i, j].softmax(1), 1).squeeze(-1)\n",
            lines=[7],
            message="`row[:, : i + 1, :]` ends at `i + 1`, which every step of",
        ),
        Invalid(  # a count the loop advances
            "import torch\ndef decode(model, prompt, total):\n    out = torch.zeros(len(prompt), total, dtype=torch.long)\n"
            "    pos = prompt.shape[1]\n    out[:, :pos] = prompt\n    while pos < total:\n"
            "        nxt = torch.multinomial(model(out[:, :pos])[:, -1].softmax(-1), 1)\n"
            "        out[:, pos] = nxt[:, 0]\n        pos += 1\n",
            lines=[7],
        ),
    ]

    def visit_Subscript(self, node: cst.Subscript) -> None:
        flow = self.ctx.flow
        if flow is None:
            return
        for element in node.slice:
            part = element.slice
            if type(part) is not cst.Slice or part.upper is None or part.step is not None:
                continue
            moves = self._moved_in_forward(part) if in_forward(self.ctx.ancestors) else self._moved_by_loop(part)
            if moves is None or not tensor_valued(self.ctx, node.value):
                continue
            position, saying = moves
            self.report(
                node, sliced=shown(node), position=shown(position), moves=saying, advice=advice(self.ctx.targets)
            )
            return

    def _moved_by_loop(self, part: cst.Slice) -> tuple[cst.BaseExpression, str] | None:
        """The end and what moves it, where it reads a count the innermost step loop advances
        and the start does not."""
        flow = self.ctx.flow
        assert flow is not None
        ancestors = self.ctx.ancestors
        loop = innermost_loop(ancestors)
        if loop is None or flow.off_the_step_path(ancestors):
            return None
        step = flow.loop_step(loop)
        for around in _loops(ancestors):  # vq-vae-2's `row[:, : i + 1]`, the row's loop around the column's
            counts = _advanced(around)
            if counts and reads_names(part.upper, counts):
                if part.lower is not None and reads_names(part.lower, counts):
                    return None
                step = step or flow.loop_step(around)
                return (part.upper, f"every step of {step} moves") if step is not None else None
        return None

    def _moved_in_forward(self, part: cst.Slice) -> tuple[cst.BaseExpression, str] | None:
        """The end and what moves it, where it adds to a position the caller of forward passes
        and the start does not read that position."""
        function = enclosing_function(self.ctx.ancestors)
        if function is None:
            return None
        end = part.upper
        if type(end) is cst.Name:
            bound = self.ctx.assigned_value(end)
            end = bound if bound is not None else end
        if type(end) is not cst.BinaryOperation or type(end.operator) is not cst.Add:
            return None
        positions = {name for name in integer_positions(function) if reads_names(end, {name})}
        if not positions or (part.lower is not None and reads_names(part.lower, positions)):
            return None
        return part.upper, "the caller moves"


def _loops(ancestors: Sequence[cst.CSTNode]) -> Iterator[cst.For | cst.While]:
    """The loops whose bodies hold the node, innermost first, within its function."""
    for index in range(len(ancestors) - 2, -1, -1):
        node = ancestors[index]
        if type(node) in _SCOPES:
            return
        if type(node) in (cst.For, cst.While) and ancestors[index + 1] is node.body:  # type: ignore[union-attr]
            yield node  # type: ignore[misc]


def _advanced(loop: cst.For | cst.While) -> set[str]:
    """The counts a loop moves: a `for` loop's target over `range(...)` (or the index of
    `enumerate`), names its body adds to (`pos += 1`), and names it sets from those
    (`prev_pos = cur_pos`)."""
    found = set()
    iterated = _unwrapped(loop.iter) if type(loop) is cst.For else None
    if type(loop) is cst.For and type(iterated) is cst.Call and type(iterated.func) is cst.Name:
        target = loop.target
        if iterated.func.value == "range" and type(target) is cst.Name:
            found.add(target.value)
        elif iterated.func.value == "enumerate" and type(target) is cst.Tuple and target.elements:
            first = target.elements[0].value
            if type(first) is cst.Name:
                found.add(first.value)
    assigned: list[tuple[str, cst.BaseExpression]] = []
    for node in descendants(loop.body, _SCOPES):
        if type(node) is cst.AugAssign and type(node.operator) is cst.AddAssign and type(node.target) is cst.Name:
            found.add(node.target.value)
        elif type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            if _arithmetic(node.value):
                assigned.append((node.targets[0].target.value, node.value))
    grown = True
    while grown:  # `prev = cur`: moved along with a count
        moved = {name for name, value in assigned if name not in found and reads_names(value, found)}
        found |= moved
        grown = bool(moved)
    return found


def _unwrapped(iterated: cst.BaseExpression) -> cst.BaseExpression:
    """`range(n)` for `tqdm(range(n), desc=...)`: a progress bar's iterable, as the loop sees it."""
    if type(iterated) is cst.Call and type(iterated.func) is cst.Name and iterated.func.value not in _COUNTERS:
        first = iterated.args[0] if iterated.args and iterated.args[0].keyword is None else None
        if first is not None and type(first.value) is cst.Call and type(first.value.func) is cst.Name:
            return first.value if first.value.func.value in _COUNTERS else iterated
    return iterated


def _arithmetic(node: cst.BaseExpression) -> bool:
    """Names and numbers joined by operators: what an integer count is made of."""
    if type(node) is cst.BinaryOperation:
        return _arithmetic(node.left) and _arithmetic(node.right)
    return type(node) in (cst.Name, cst.Integer)
