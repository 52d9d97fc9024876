from __future__ import annotations

import libcst as cst

from portcheck.flow import enclosing_function, in_forward
from portcheck.rule import FileContext, Invalid, Valid
from portcheck.rules.shapes import (
    RECOMPILE_SEVERITY,
    TensorRule,
    advice,
    integer_positions,
    reads_names,
    shown,
    tensor_valued,
)


class MovingOffsetSlice(TensorRule):
    """## What it does
    Reports, in a module's `forward`, a slice of a tensor that starts at an integer position
    the caller passes: a parameter annotated `int`, or one the function writes a tensor at (llama's KV cache, `self.cache_k[:bsz, start_pos : start_pos +
    seqlen] = xk`, and its rotary table, `self.freqs_cis[start_pos : start_pos + seqlen]`).
    A slice that only ends there grows instead (see PC510).

    ## Why is this bad?
    `torch.compile` specialises a graph on the Python integers it is given: with
    `dynamic=False`, TorchTPU's and TorchNeuron's default, every new position compiles a new
    graph, one per generated token, until the recompile limit sends the model back to eager
    (on torch 2.13 a forward that writes and reads at `start_pos` compiles 12 graphs for
    positions 0 to 11). The window keeps its length; its offset is the constant that changes.

    ## Example
    ```python
    def forward(self, x, start_pos: int):
        self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk
        freqs = self.freqs_cis[start_pos : start_pos + seqlen]
    ```

    ## Use instead
    ```python
    def forward(self, x, input_pos):  # input_pos: a tensor of positions
        self.cache_k.index_copy_(1, input_pos, xk)
        freqs = self.freqs_cis[input_pos]
    ```
    A static KV cache indexed by a position tensor (gpt-fast; Hugging Face's
    `cache_implementation="static"`) compiles once for every position.

    ## Targets
    An error on neuron; a warning on tpu, xla, npu and hpu; off where shapes may change freely
    (mps, xpu, rocm, cpu).

    ## Fix safety
    No automatic fix: the position tensor has to come from the caller.
    """

    code = "PC517"
    name = "moving-offset-slice"
    message = (
        "`{sliced}` starts at `{position}`, a Python integer the caller moves: each new value compiles a new graph"
    )
    hint = "index with a tensor of positions (`index_copy_(1, input_pos, x)`, `table[input_pos]`){advice}"
    severity = RECOMPILE_SEVERITY
    # The rule reports only in files that import torch, so "torch" is in every one of them.
    triggers = (b"torch",)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._by_function: dict[int, set[str]] = {}  # by id of the function: its integer positions

    VALID = [
        Valid(  # a slice that only ends at the position grows: PC510's
            "import torch\nclass Attention(torch.nn.Module):\n    def forward(self, x, start_pos: int):\n"
            "        return self.cache_k[:, : start_pos + x.shape[1]]\n"
        ),
        Valid(  # a position that is a tensor: one graph for all
            "import torch\nclass Rope(torch.nn.Module):\n    def forward(self, x, input_pos):\n"
            "        return x * self.freqs[input_pos]\n"
        ),
        Valid(  # an offset the module computes from shapes, not one the caller moves
            "import torch\nclass Crop(torch.nn.Module):\n    def forward(self, x, size: int):\n"
            "        top = (x.shape[2] - 8) // 2\n        return x[:, :, top : top + 8]\n"
        ),
        Valid(  # BERT's embeddings: a length that defaults to 0, which an encoder never moves
            "import torch\nclass Embeddings(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.register_buffer('position_ids', torch.arange(512).expand((1, -1)))\n"
            "    def forward(self, input_ids, past_key_values_length=0):\n        n = input_ids.size(1)\n"
            "        return self.position_ids[:, past_key_values_length : n + past_key_values_length]\n"
        ),
        Valid(  # outside forward: a loop's windows are left to the step rules
            "import torch\ndef chunks(x, start: int):\n    return x[:, start : start + 4]\n"
        ),
        Valid(  # `torch` a parameter: what it makes is not known to be a tensor
            "import torch as T\nclass Rope(T.nn.Module):\n    def forward(self, torch, x, start_pos: int):\n"
            "        freqs = torch.randn(64, 8)\n        return x * freqs[start_pos : start_pos + 1]\n"
        ),
        Valid(  # shapes may change freely there
            "import torch\nclass Rope(torch.nn.Module):\n    def forward(self, x, start_pos: int):\n"
            "        return x * self.freqs[start_pos : start_pos + x.shape[1]]\n",
            options={"targets": ["cpu", "mps", "rocm"]},
        ),
    ]
    INVALID = [
        Invalid(  # llama: the cache written at the position, the rotary table read there
            "import torch as T\nclass Attention(T.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.cache_k = T.zeros(4, 512, 8, 64)\n        self.freqs = T.randn(512, 32)\n"
            "    def forward(self, x, start_pos: int):\n        bsz, seqlen, _ = x.shape\n"
            "        self.cache_k[:bsz, start_pos : start_pos + seqlen] = x\n"
            "        freqs = self.freqs[start_pos : start_pos + seqlen]\n"
            "        return self.cache_k[:bsz, : start_pos + seqlen], freqs\n",
            lines=[9, 10],
            message="starts at `start_pos`, a Python integer the caller moves",
        ),
        Invalid(  # annotated Optional
            "from torch import nn, empty\nclass Decoder(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.positional_embedding = nn.Parameter(empty(448, 384))\n"
            "    def forward(self, x, offset: Optional[int] = None):\n"
            "        return x + self.positional_embedding[offset : offset + x.shape[-1]]\n",
            lines=[7],
        ),
        Invalid(  # a position the function writes the cache at, without annotation or default
            "import torch.nn\nfrom torch.nn.functional import pad as P\nclass Cache(torch.nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.register_buffer('k', torch.zeros(1, 64, 8), persistent=False)\n"
            "    def forward(self, x, pos):\n        self.k[:, pos : pos + x.shape[1]] = P(x, (0, 0))\n        return self.k\n",
            lines=[8],
        ),
    ]

    def visit_Subscript(self, node: cst.Subscript) -> None:
        starts = [
            part.lower
            for element in node.slice
            if isinstance(part := element.slice, cst.Slice) and part.lower is not None
        ]
        if not starts or not in_forward(self.ctx.ancestors):
            return  # most subscripts: no slice with a start
        function = enclosing_function(self.ctx.ancestors)
        positions = self._positions(function) if function is not None else set()
        start = next((start for start in starts if reads_names(start, positions)), None)
        if start is not None and tensor_valued(self.ctx, node.value):
            self.report(node, sliced=shown(node), position=shown(start), advice=advice(self.ctx.targets))

    def _positions(self, function: cst.FunctionDef) -> set[str]:
        """`integer_positions` of the function, read once per function."""
        key = id(function)
        if key not in self._by_function:
            self._by_function[key] = integer_positions(function, by_default=False)
        return self._by_function[key]
