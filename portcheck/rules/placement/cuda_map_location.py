from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import edits, placement
from portcheck.rewrites.edits import Edit, Spelling
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid, per_target
from portcheck.rules.placement.cuda_device_string import describe


class CudaMapLocation(Rule):
    """## What it does
    Reports `map_location="cuda"` (or `"cuda:N"`, a dict mapping to those, or
    `lambda storage, loc: storage.cuda()`) when loading a checkpoint with `torch.load`,
    `torch.jit.load` or any loader taking `map_location=`.

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
    Safe: the CUDA device becomes the target's (`"tpu"`, `"xpu:1"`, `"cpu"`), so the tensors
    land where the code expects them; `lambda storage, loc: storage.cuda()` becomes that device
    too. An index is kept or dropped as cuda-device-string does. With `--device auto` it is
    the module's device binding (`DEVICE`; `DEVICE.type` where the string is bound to a name
    first), and an index is kept only where there is an accelerator
    (`f"{DEVICE.type}:1" if DEVICE.type != "cpu" else "cpu"`): `"cpu:1"` is not a location
    `torch.load` restores to.

    Where torch's own serialization cannot restore onto the target's device (the torch_xla
    device is no `torch.accelerator`, and `torch.load` has no deserializer for it), the fix
    loads to `"cpu"` instead, as torch_xla recommends; that is unsafe, since code using the
    loaded tensors directly then finds them on the CPU (move them with `.to(device)`).
    A `map_location` function other than `storage.cuda(...)` is not fixed.
    """

    code = "PC104"
    name = "cuda-map-location"
    message = "map_location={literal} loads the checkpoint onto a CUDA device"
    hint = 'use map_location="cpu" and move with .to(device) afterwards (or map_location=device)'
    severity = per_target(ERROR, rocm=OFF)
    fix_safety = FixSafety.SAFE
    triggers = (b"cuda",)
    cuda_only = True

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
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n',
            lines=[2],
            fixed='import torch\nstate = torch.load("ckpt.pt", map_location="tpu")\n',
        ),
        Invalid(
            'import torch as T\nstate = T.load(path, "cuda:0")\n',
            lines=[2],
            device="cpu",
            fixed='import torch as T\nstate = T.load(path, "cpu")\n',
        ),
        Invalid(
            'import torch as T\nstate = T.load(path, "cuda:1")\n',
            lines=[2],
            device="xpu",
            fixed='import torch as T\nstate = T.load(path, "xpu:1")\n',
        ),
        Invalid(
            'from torch import cuda, load\nstate = load(path, map_location="cuda" if cuda.is_available() else "cpu")\n',
            lines=[2],
            device="auto",
            fixed="from torch import cuda, load\nimport torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'state = load(path, map_location=DEVICE if cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "from torch.cuda import current_device as cur\nimport torch.cuda\n"
            'm = torch.jit.load("m.pt", map_location=f"cuda:{cur()}")\n',
            lines=[3],
            device="npu",
            fixed="from torch.cuda import current_device as cur\nimport torch.cuda\n"
            'm = torch.jit.load("m.pt", map_location=f"npu:{cur()}")\n',
        ),
        Invalid(
            'import torch\nstate = torch.load(p, map_location={"cuda:1": "cuda:0"})\n',
            lines=[2],
            fixed='import torch\nstate = torch.load(p, map_location={"cuda:1": "tpu"})\n',
        ),
        Invalid(
            'import torch\nLOC = "cuda"\nmodel = Model.load_from_checkpoint(p, map_location=LOC)\n',
            lines=[2],
            device="auto",
            fixed="import torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            "LOC = DEVICE.type\nmodel = Model.load_from_checkpoint(p, map_location=LOC)\n",
        ),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location=lambda storage, loc: storage.cuda())\n',
            lines=[2],
            fixed='import torch\nstate = torch.load("ckpt.pt", map_location="tpu")\n',
        ),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", lambda s, loc: s.cuda(1))\n',
            lines=[2],
            device="hpu",
            fixed='import torch\nstate = torch.load("ckpt.pt", "hpu:1")\n',
        ),
        # auto: the index where there is an accelerator ("cpu:1" is no torch.load location).
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location="cuda:1")\n',
            lines=[2],
            device="auto",
            fixed="import torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'state = torch.load("ckpt.pt", map_location=f"{DEVICE.type}:1" if DEVICE.type != "cpu" else "cpu")\n',
        ),
        # torch.load cannot restore onto the torch_xla device: to the CPU, with --unsafe-fixes.
        Invalid('import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n', lines=[2], device="xla"),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n',
            lines=[2],
            device="xla",
            unsafe=True,
            fixed='import torch\nstate = torch.load("ckpt.pt", map_location="cpu")\n',
        ),
        # `args.gpu` holds an index (portcheck.flow): kept where indices are kept.
        Invalid(
            "import torch\ndef load(args):\n"
            '    return torch.load("c.pt", map_location=lambda storage, loc: storage.cuda(args.gpu))\n',
            lines=[3],
            device="xpu",
            fixed='import torch\ndef load(args):\n    return torch.load("c.pt", map_location=f"xpu:{args.gpu}")\n',
        ),
        # `args.where` may hold an int, None or a device: no one spelling fits where indices are kept.
        Invalid(
            "import torch\ndef load(args):\n"
            '    return torch.load("c.pt", map_location=lambda storage, loc: storage.cuda(args.where))\n',
            lines=[3],
            device="xpu",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        arg = placement.map_location_argument(self.ctx, node)
        if arg is None:
            return
        value = arg.value
        mover = placement.storage_mover(value)
        if mover is not None:
            self.report(value, edit=self._mover_edit(value, mover), literal=_describe_function(value))
            return
        candidates = [element.value for element in value.elements] if isinstance(value, cst.Dict) else [value]
        for candidate in candidates:
            # Through a name, the value stays a string: the name may be used as one elsewhere.
            direct = not isinstance(candidate, cst.Name)
            for literal in patterns.device_literals_through_names(candidate, self.ctx.assigned_value):
                spelled = placement.device_spelling(self.ctx, literal, index_on_cpu=False)
                self.report(literal, edit=self._edit(literal, spelled, direct), literal=describe(literal))

    def _mover_edit(self, function: cst.BaseExpression, mover: cst.Call) -> Edit | None:
        """`lambda storage, loc: storage.cuda(i)` is `map_location=<what .cuda(i) moves to>`."""
        readable, device, non_blocking = placement.cuda_call_device(mover)
        if not readable or non_blocking is not None or len(mover.args) > (device is not None):
            return None
        moved = placement.moved_to(self.ctx, device.value if device else None, index_on_cpu=False)
        if moved is None:
            return None
        spelling, safety = moved
        spelling = Spelling(edits.with_parentheses_of(function, spelling.node), spelling.imports, spelling.prelude)
        return self._edit(function, (spelling, safety), direct=True)

    def _edit(self, original: cst.CSTNode, spelled: tuple[Spelling, FixSafety] | None, direct: bool) -> Edit | None:
        if spelled is None:
            return None
        spelling, safety = spelled
        if direct:
            spelling = placement.device_object(self.ctx, spelling)
        target = self.ctx.fix_target
        written = patterns.string_value(spelling.node)
        if not target.accelerator_api and written != "cpu":
            # torch.load restores onto the CPU and torch.accelerator's devices only (not xla).
            node = edits.with_parentheses_of(original, edits.string_like(original, "cpu"))  # type: ignore[arg-type]
            spelling, safety = Spelling(node), FixSafety.UNSAFE
        where = cst.Module([]).code_for_node(spelling.node)
        return spelling.edit(original, safety, f"map_location -> {where}")


def _describe_function(function: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(function)
