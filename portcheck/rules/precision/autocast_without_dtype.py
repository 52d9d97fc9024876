from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.rewrites import amp, calls, edits
from portcheck.rule import INFO, OFF, WARNING, Invalid, Rule, Valid


def _severity() -> dict:
    """Warning where torch's default autocast dtype is not the one the target wants (PrivateUse1
    backends such as tpu and neuron get float16); info where the default happens to be right on
    a bfloat16-native accelerator (explicit is still safer); off elsewhere."""
    result = {}
    for name, target in target_data.all_targets().items():
        if amp.default_dtype_differs(target):
            result[name] = WARNING
        elif amp.wants_explicit_dtype(target):
            result[name] = INFO
        else:
            result[name] = OFF
    return result


class AutocastWithoutDtype(Rule):
    """## What it does
    Reports `torch.autocast(...)` and `torch.amp.autocast(...)` without an explicit `dtype`,
    unless given `enabled=False` (a disabled region casts nothing).

    ## Why is this bad?
    Without `dtype`, autocast uses the device type's default. In torch 2.13 that default is
    float16 for PrivateUse1 backends, which is what TorchTPU and TorchNeuron are, although both
    chips compute natively in bfloat16: float16 there means overflow risk and a GradScaler that
    should not be needed. TorchTPU keeps a bfloat16 default on its side that `torch.autocast`
    never reads.

    ## Example
    ```python
    with torch.autocast(device.type):
        loss = model(x)
    ```

    ## Use instead
    ```python
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Targets
    A warning on tpu and neuron (default float16, wanted bfloat16); info on xla and hpu, whose
    default is already bfloat16; off elsewhere.

    ## Fix safety
    Adds `dtype=torch.bfloat16` (the target's AMP dtype) after the device type. Safe on xla
    and hpu, where it names the dtype autocast already uses. Unsafe on tpu and neuron (needs
    `--unsafe-fixes`): there the region runs in float16 today and the fix makes it bfloat16,
    which has fewer mantissa bits and a wider range, so results change. Not fixed: a call
    given `*args` or `**kwargs`, one with no device type, one whose device type is only ever
    a literal other than the target's (`"cpu"` for a CPU region), and one that may be `"cuda"`,
    which autocast-cuda-device-type (PC302) rewrites first, adding the dtype itself. A choice
    between the device's type and `"cpu"` is fixed (Pytorch-UNet's `device.type if
    device.type != "mps" else "cpu"`): the CPU's default is bfloat16 already.
    """

    code = "PC303"
    name = "autocast-without-dtype"
    message = "autocast without dtype= uses the device type's default, float16 on tpu and neuron"
    hint = "pass dtype=torch.bfloat16 explicitly on bfloat16-native targets"
    severity = _severity()
    fix_safety = FixSafety.UNSAFE
    triggers = (b"autocast",)

    VALID = [
        Valid("import torch\nwith torch.autocast('tpu', dtype=torch.bfloat16):\n    pass\n"),
        Valid("import torch as T\nwith T.amp.autocast('tpu', torch.bfloat16):\n    pass\n"),
        Valid("def f(torch):\n    return torch.autocast('tpu')\n"),
        Valid("import torch\nwith torch.autocast('tpu'):\n    pass\n", options={"targets": ["cpu", "mps", "rocm"]}),
        Valid("from torch import cuda\nwith cuda.amp.autocast():\n    pass\n", options={"select": ["PC303"]}),
        # disabled: no dtype to choose
        Valid("import torch\nwith torch.autocast(device.type, enabled=False):\n    pass\n"),
        Valid("import torch\nuse_amp = False\nwith torch.amp.autocast('tpu', enabled=use_amp):\n    pass\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nwith torch.autocast(device.type):\n    pass\n",
            lines=[2],
            unsafe=True,
            fixed="import torch\nwith torch.autocast(device.type, dtype=torch.bfloat16):\n    pass\n",
        ),
        # float16 -> bfloat16 changes numerics: nothing without --unsafe-fixes
        Invalid("import torch\nwith torch.autocast(device.type):\n    pass\n", lines=[2]),
        Invalid(
            "import torch as T\nwith T.amp.autocast(device_type='tpu', enabled=True):\n    pass\n",
            lines=[2],
            unsafe=True,
            fixed="import torch as T\nwith T.amp.autocast(device_type='tpu', dtype=T.bfloat16, enabled=True):\n    pass\n",
        ),
        Invalid(
            "from torch import amp\nwith amp.autocast('neuron'):\n    pass\n",
            lines=[2],
            device="neuron",
            unsafe=True,
            fixed="from torch import amp\nimport torch\nwith amp.autocast('neuron', dtype=torch.bfloat16):\n    pass\n",
        ),
        Invalid(
            "from torch.amp import autocast as ac\nctx = ac('xla')\n",
            lines=[2],
            device="xla",
            fixed="from torch.amp import autocast as ac\nimport torch\nctx = ac('xla', dtype=torch.bfloat16)\n",
        ),
        Invalid(
            "import torch\nwith torch.autocast(device_type=device.type, cache_enabled=False):\n    pass\n",
            lines=[2],
            device="hpu",
            fixed="import torch\nwith torch.autocast(device_type=device.type, dtype=torch.bfloat16, cache_enabled=False):\n"
            "    pass\n",
        ),
        Invalid(
            "import torch.amp\n@torch.autocast('tpu')\ndef step(x):\n    return x\n",
            lines=[2],
            unsafe=True,
            fixed="import torch.amp\n@torch.autocast('tpu', dtype=torch.bfloat16)\ndef step(x):\n    return x\n",
        ),
        Invalid(  # Pytorch-UNet: the device's type, or the CPU's, whose default is bfloat16 already
            "import torch\nwith torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=amp):\n    pass\n",
            lines=[2],
            unsafe=True,
            fixed="import torch\nwith torch.autocast(device.type if device.type != 'mps' else 'cpu', "
            "dtype=torch.bfloat16, enabled=amp):\n    pass\n",
        ),
        # enabled by a value portcheck cannot read: still a region without a dtype
        Invalid("import torch\nwith torch.autocast(device.type, enabled=args.amp):\n    pass\n", lines=[2]),
        # not fixed: a CPU region on another target, and the CUDA literal PC302 owns
        Invalid("import torch\nwith torch.autocast('cpu'):\n    pass\n", lines=[2], unsafe=True),
        Invalid("import torch\nwith torch.autocast('cuda'):\n    pass\n", lines=[2], device="xla"),
        # cpu and auto: the device's own default is the one to use
        Invalid("import torch\nwith torch.autocast(device.type):\n    pass\n", lines=[2], device="cpu", unsafe=True),
        Invalid("import torch\nwith torch.autocast(device.type):\n    pass\n", lines=[2], device="auto", unsafe=True),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & amp.AUTOCAST_CALLS:
            return
        if any(arg.star for arg in node.args):
            return  # dtype may come through *args or **kwargs
        if patterns.argument(node, 1, "dtype") is None and not self._disabled(node):
            self.report(node, edit=self._edit(node))

    def _disabled(self, call: cst.Call) -> bool:
        """`enabled=False`, directly or through a name bound once: a region that casts nothing
        has no dtype to choose."""
        enabled = patterns.argument(call, 2, "enabled")
        if enabled is None:
            return False
        value = enabled.value
        if isinstance(value, cst.Name) and value.value != "False":
            value = self.ctx.assigned_value(value) or value
        return isinstance(value, cst.Name) and value.value == "False"

    def _edit(self, call: cst.Call) -> edits.Edit | None:
        target = self.ctx.fix_target
        device = patterns.argument(call, 0, "device_type")
        if device is None or not amp.wants_explicit_dtype(target):
            return None
        value = device.value
        if isinstance(value, cst.Name):
            value = self.ctx.assigned_value(value) or value
        branches = patterns.value_literals(value, lambda node: type(node) not in (cst.IfExp, cst.BooleanOperation))
        written = [patterns.string_value(branch) for branch in branches]
        if target.device_type not in written and None not in written:
            return None  # autocast for another device type only, on purpose or not (a CPU region)
        if any(each is not None and not _takes(each, target) for each in written):
            return None  # one way, another device type that the dtype does not suit (PC302's "cuda")
        dtype = amp.amp_dtype(self.ctx)
        if dtype is None:
            return None
        position = next(index for index, arg in enumerate(call.args) if arg is device) + 1
        fixed = amp.insert_args(call, position, [calls.keyword_arg("dtype", dtype.node)])
        safety = FixSafety.UNSAFE if amp.default_dtype_differs(target) else FixSafety.SAFE
        return edits.Edit(call, fixed, safety, f"add dtype={target.amp_dtype}", dtype.imports, dtype.prelude)


def _takes(device_type: str | None, target: target_data.Target) -> bool:
    """Whether a device type an autocast may be given takes the target's dtype as well: the
    target's own, or one whose default is that dtype already (the CPU's bfloat16), where naming
    it changes nothing."""
    if device_type == target.device_type:
        return True
    other = next((each for each in target_data.all_targets().values() if each.device_type == device_type), None)
    return other is not None and other.autocast_default_dtype == target.amp_dtype
