from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid, per_target
from portcheck.rules.placement.cuda_device_string import describe

_LOADERS = frozenset({"torch.load", "torch.serialization.load", "torch.jit.load"})


class CudaMapLocation(Rule):
    """## What it does
    Reports `map_location="cuda"` (or `"cuda:N"`, or a dict mapping to those) when loading a
    checkpoint with `torch.load`, `torch.jit.load` or any loader taking `map_location=`.

    ## Why is this bad?
    Without CUDA, `torch.load(f, map_location="cuda")` raises `RuntimeError: Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is False`. The file itself
    is fine: only the destination is wrong.

    ## Example
    ```python
    state = torch.load("ckpt.pt", map_location="cuda:0")
    ```

    ## Use instead
    Load to the CPU, then move (torch_xla recommends saving and loading CPU tensors anyway):
    ```python
    state = torch.load("ckpt.pt", map_location="cpu")
    model.load_state_dict(state)
    model.to(device)
    ```

    ## Targets
    An error on every target but ROCm.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC104"
    name = "cuda-map-location"
    message = "map_location={literal} loads the checkpoint onto a CUDA device"
    hint = 'use map_location="cpu" and move with .to(device) afterwards (or map_location=device)'
    severity = per_target(ERROR, rocm=OFF)
    triggers = (b"cuda",)

    VALID = [
        Valid('import torch\nstate = torch.load("ckpt.pt", map_location="cpu")\n'),
        Valid('import torch\nstate = torch.load("ckpt.pt", map_location={"cuda:1": "cpu"})\n'),
        Valid('def load(torch):\n    return torch.load("x.pt", "cuda")\n'),
        Valid(
            'import torch\ndevice = "cuda"\nstate = torch.load("ckpt.pt", map_location=device)\n',
            options={"select": ["PC104"]},
        ),
        Valid('import torch\nstate = torch.load("ckpt.pt", "cuda")\n', options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid('import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n', lines=[2]),
        Invalid('import torch as T\nstate = T.load(path, "cuda:0")\n', lines=[2]),
        Invalid(
            'from torch import cuda, load\nstate = load(path, map_location="cuda" if cuda.is_available() else "cpu")\n',
            lines=[2],
        ),
        Invalid(
            "from torch.cuda import current_device as cur\nimport torch.cuda\n"
            'm = torch.jit.load("m.pt", map_location=f"cuda:{cur()}")\n',
            lines=[3],
        ),
        Invalid('import torch\nstate = torch.load(p, map_location={"cuda:1": "cuda:0"})\n', lines=[2]),
        Invalid('import torch\nLOC = "cuda"\nmodel = Model.load_from_checkpoint(p, map_location=LOC)\n', lines=[2]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        arg = patterns.keyword(node, "map_location")
        if arg is None and self.ctx.qualified_names(node.func) & _LOADERS:
            arg = patterns.positional(node, 1)
        if arg is None:
            return
        value = arg.value
        candidates = [element.value for element in value.elements] if isinstance(value, cst.Dict) else [value]
        for candidate in candidates:
            for literal in patterns.device_literals_through_names(candidate, self.ctx.assigned_value):
                self.report(literal, literal=describe(literal))
