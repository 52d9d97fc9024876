from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import amp, calls, edits
from portcheck.rule import OFF, WARNING, Invalid, Rule, Valid, per_target
from portcheck.rules.placement.cuda_device_string import describe


class AutocastCudaDeviceType(Rule):
    """## What it does
    Reports the device-generic AMP API called with a hard-coded `"cuda"` device type:
    `torch.autocast("cuda")`, `torch.amp.autocast(device_type="cuda")`,
    `torch.amp.GradScaler("cuda")` (or `device="cuda"`), `torch.amp.custom_fwd(device_type="cuda")`,
    `torch.get_autocast_dtype("cuda")` and similar; also through a name bound to one of those
    (`precision_scope = autocast`) or to a choice of context managers (stable-diffusion's
    `precision_scope = autocast if amp else nullcontext`, then `precision_scope("cuda")`).

    ## Why is this bad?
    Autocast for `"cuda"` does not apply to tensors on another device: on a TPU the region
    silently runs in float32. `torch.autocast("cuda")` itself does not raise without CUDA, so
    nothing points at the problem.

    ## Example
    ```python
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Use instead
    ```python
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Targets
    A warning on every target but ROCm, where HIP answers to `"cuda"`.

    ## Fix safety
    Safe: `"cuda"` becomes the target's device type (`"tpu"`; with `--device auto`, the
    module's device binding, `DEVICE.type`), so the AMP call does for the target what it did
    for CUDA. An autocast without a dtype also gets the target's AMP dtype where torch's
    default for the device is not it or is a plugin's choice (tpu, neuron, xla, hpu:
    `dtype=torch.bfloat16`), as cuda-amp-api (PC301) writes it: the region did nothing on the
    target before, and float16 was CUDA's choice. A dtype the code names is kept. Only the
    plain `"cuda"` is fixed (`"cuda:0"` is no device type), and a `"cuda"` bound to a name
    elsewhere only for a named target, not for `auto`. Through a choice of context managers
    only where torch's autocast default for the device is the target's dtype: no dtype can be
    added there (`nullcontext` takes none).
    """

    code = "PC302"
    name = "autocast-cuda-device-type"
    message = "{call} is given the CUDA device type {literal}: it does nothing for other devices"
    hint = "pass the target's device type, e.g. device.type from the one device variable"
    severity = per_target(WARNING, rocm=OFF)
    fix_safety = FixSafety.SAFE
    triggers = (b"cuda",)

    VALID = [
        Valid('import torch\nwith torch.autocast("cpu", dtype=torch.bfloat16):\n    pass\n'),
        Valid("import torch\nwith torch.autocast(device.type):\n    pass\n"),
        Valid('def f(torch):\n    return torch.autocast("cuda")\n'),
        # the literal is bound to a device name: cuda-device-string (PC101) reports it there
        Valid(
            'import torch\ndevice_type = "cuda"\nwith torch.autocast(device_type):\n    pass\n',
            options={"select": ["PC302"]},
        ),
        Valid('import torch\nwith torch.autocast("cuda"):\n    pass\n', options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid(
            'import torch\nwith torch.autocast("cuda", dtype=torch.float16):\n    pass\n',
            lines=[2],
            fixed='import torch\nwith torch.autocast("tpu", dtype=torch.float16):\n    pass\n',
        ),
        Invalid(
            'import torch\nwith torch.autocast("cuda"):\n    pass\n',
            lines=[2],
            fixed='import torch\nwith torch.autocast("tpu", dtype=torch.bfloat16):\n    pass\n',
        ),
        Invalid(
            'import torch\nwith torch.autocast("cuda"):\n    pass\n',
            lines=[2],
            device="cpu",
            fixed='import torch\nwith torch.autocast("cpu"):\n    pass\n',
        ),
        Invalid(
            'import torch\nwith torch.autocast("cuda"):\n    pass\n',
            lines=[2],
            device="mps",
            fixed='import torch\nwith torch.autocast("mps"):\n    pass\n',
        ),
        Invalid(
            'import torch\n\nwith torch.autocast("cuda"):\n    pass\n',
            lines=[3],
            device="auto",
            fixed="import torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "with torch.autocast(DEVICE.type):\n    pass\n",
        ),
        Invalid(
            "import torch as T\nwith T.amp.autocast(device_type='cuda'):\n    pass\n",
            lines=[2],
            device="neuron",
            fixed="import torch as T\nwith T.amp.autocast(device_type='neuron', dtype=T.bfloat16):\n    pass\n",
        ),
        Invalid(
            "from torch.amp import autocast\nwith autocast('cuda', enabled=True):\n    pass\n",
            lines=[2],
            fixed="from torch.amp import autocast\nimport torch\nwith autocast('tpu', dtype=torch.bfloat16, enabled=True):\n    pass\n",
        ),
        Invalid(
            'from torch import amp\nscaler = amp.GradScaler("cuda")\n',
            lines=[2],
            fixed='from torch import amp\nscaler = amp.GradScaler("tpu")\n',
        ),
        Invalid(
            'import torch\nscaler = torch.amp.GradScaler(device="cuda", enabled=True)\n',
            lines=[2],
            device="cpu",
            fixed='import torch\nscaler = torch.amp.GradScaler(device="cpu", enabled=True)\n',
        ),
        Invalid(
            'from torch.amp import custom_fwd as fwd\n@fwd(device_type="cuda")\ndef f(ctx, x):\n    return x\n',
            lines=[2],
            fixed='from torch.amp import custom_fwd as fwd\n@fwd(device_type="tpu")\ndef f(ctx, x):\n    return x\n',
        ),
        Invalid(
            'import torch.amp\nKIND = "cuda"\nd = torch.get_autocast_dtype(KIND)\n',
            lines=[2],
            fixed='import torch.amp\nKIND = "tpu"\nd = torch.get_autocast_dtype(KIND)\n',
        ),
        Invalid(
            'import torch\ndef run(step):\n    with torch.autocast(\n        "cuda",\n        enabled=True,\n    ):\n'
            "        step()\n",
            lines=[4],
            device="xla",
            fixed='import torch\ndef run(step):\n    with torch.autocast(\n        "xla",\n'
            "        dtype=torch.bfloat16,\n        enabled=True,\n    ):\n        step()\n",
        ),
        Invalid(  # stable-diffusion's txt2img: autocast or nothing, chosen once
            "import torch\nfrom torch import autocast\nfrom contextlib import nullcontext\n"
            "scope = autocast if opt.precision == 'autocast' else nullcontext\nwith scope('cuda'):\n    pass\n",
            lines=[5],
            device="cpu",
            fixed="import torch\nfrom torch import autocast\nfrom contextlib import nullcontext\n"
            "scope = autocast if opt.precision == 'autocast' else nullcontext\nwith scope('cpu'):\n    pass\n",
        ),
        Invalid(  # generative-models' demos: autocast under another name
            "import torch\nfrom torch import autocast\ndef sample(model):\n    precision_scope = autocast\n"
            "    with precision_scope('cuda'):\n        return model()\n",
            lines=[5],
            device="cpu",
            fixed="import torch\nfrom torch import autocast\ndef sample(model):\n    precision_scope = autocast\n"
            "    with precision_scope('cpu'):\n        return model()\n",
        ),
        # not fixed: through a choice no dtype can be added, and tpu's default is float16
        Invalid(
            "import torch\nfrom torch import autocast\nfrom contextlib import nullcontext\n"
            "scope = autocast if opt.precision == 'autocast' else nullcontext\nwith scope('cuda'):\n    pass\n",
            lines=[5],
        ),
        # not fixed: a bound literal under `auto` (the binding may come before the device
        # variable), and "cuda:0", which is no device type at all
        Invalid('import torch.amp\nKIND = "cuda"\nd = torch.get_autocast_dtype(KIND)\n', lines=[2], device="auto"),
        Invalid('import torch\nwith torch.autocast("cuda:0"):\n    pass\n', lines=[2]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.callee_names(node.func) & patterns.AMP_DEVICE_CALLS
        if not names:
            return
        arg = amp.device_argument(node, names)
        if arg is None:
            return
        for literal in patterns.device_literals_through_names(arg.value, self.ctx.assigned_value):
            edit = self._edit(node, arg, literal, names)
            self.report(literal, edit=edit, call=f"`{min(names)}`", literal=describe(literal))

    def _edit(self, call: cst.Call, arg: cst.Arg, literal: cst.CSTNode, names: frozenset[str]) -> edits.Edit | None:
        if patterns.string_value(literal) != "cuda":
            return None
        target = self.ctx.fix_target
        if literal is not arg.value and not target.device_type:
            return None
        device = edits.device_type(self.ctx, literal)  # type: ignore[arg-type]
        chosen = not self.ctx.qualified_names(call.func)  # one of a choice: `nullcontext` takes no dtype
        if device is None or (chosen and amp.wants_explicit_dtype(target)):
            return None
        title = f"'cuda' -> {target.device_type or 'the device present'}"
        if (
            literal is not arg.value
            or not names & amp.AUTOCAST_CALLS
            or chosen
            or amp.has_star(call)
            or patterns.argument(call, 1, "dtype") is not None
            or not amp.wants_explicit_dtype(target)
        ):
            return device.edit(literal, FixSafety.SAFE, title)
        dtype = amp.amp_dtype(self.ctx)
        if dtype is None or device.original is not None:
            return device.edit(literal, FixSafety.SAFE, title)
        position = next(index for index, each in enumerate(call.args) if each is arg)
        args = [*call.args[:position], arg.with_changes(value=device.node), *call.args[position + 1 :]]
        fixed = amp.insert_args(call.with_changes(args=args), position + 1, [calls.keyword_arg("dtype", dtype.node)])
        imports, prelude = amp.needs(device, dtype)
        return edits.Edit(call, fixed, FixSafety.SAFE, f"{title}, dtype={target.amp_dtype}", imports, prelude)
