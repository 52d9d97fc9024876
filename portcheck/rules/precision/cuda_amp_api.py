from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import libcst as cst

from portcheck import patterns
from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rewrites import amp, calls, edits, versions
from portcheck.rule import FileContext, Invalid, Valid, at_most_info
from portcheck.walk import descendants

# What each CUDA AMP name becomes under torch.amp.
_KINDS = {
    "torch.cuda.amp.autocast": "autocast",
    "torch.cuda.amp.autocast_mode.autocast": "autocast",
    "torch.cuda.amp.GradScaler": "GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler": "GradScaler",
    "torch.cuda.amp.custom_fwd": "custom_fwd",
    "torch.cuda.amp.autocast_mode.custom_fwd": "custom_fwd",
    "torch.cuda.amp.custom_bwd": "custom_bwd",
    "torch.cuda.amp.autocast_mode.custom_bwd": "custom_bwd",
}
# torch.cuda.amp.autocast(enabled, dtype, cache_enabled) vs torch.amp.autocast(device_type, dtype, enabled, ...)
_AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_UNREAD = " (imported, but never used here: harmless as it stands; delete it with the port)"


@dataclass(frozen=True)
class _Use:
    """A reported use that can be rewritten: `target` (the call, or a bare decorator) becomes
    `build(target, keep)`, written with the user's own name when `keep` (its import is
    rewritten too), else as `torch.amp.<kind>` (possible when `torch` is)."""

    report: int  # index into the rule's reports
    root: cst.Name  # the name the reference starts with (`ac`, `amp`, `torch`)
    kind: str
    target: cst.CSTNode
    build: Callable[[cst.CSTNode, bool], cst.CSTNode]
    needs: tuple[edits.Spelling, ...]  # spellings the replacement uses either way
    torch: edits.Spelling | None  # `torch` here, for the torch.amp spelling


# Since when torch.amp has the device-generic twin (with a device argument) of each name.
_GENERIC_SINCE = {"GradScaler": (2, 3), "custom_fwd": (2, 4), "custom_bwd": (2, 4)}
# The legacy autocast state: what each becomes with a device type (first), and how many
# arguments its CUDA form takes. The device-generic names are CUDA's only with that many.
_LEGACY_STATE = {
    "torch.get_autocast_gpu_dtype": ("get_autocast_dtype", 0),
    "torch.set_autocast_gpu_dtype": ("set_autocast_dtype", 1),
    "torch.is_autocast_enabled": ("is_autocast_enabled", 0),
    "torch.set_autocast_enabled": ("set_autocast_enabled", 1),
}
_DEVICE_GENERIC = frozenset({"torch.is_autocast_enabled", "torch.set_autocast_enabled"})
_STATE_SINCE = (2, 4)  # torch.get_autocast_dtype(device_type) and friends


class CudaAmpApi(CudaApiRule):
    """## What it does
    Reports the CUDA-only mixed-precision API: `torch.cuda.amp.autocast`,
    `torch.cuda.amp.GradScaler`, `torch.cuda.amp.custom_fwd` / `custom_bwd` (decorators
    included), the `torch.cuda.amp` module itself and imports from it (`from torch.cuda.amp
    import autocast`, `from torch.cuda import amp`, `import torch.cuda.amp as amp`: a line
    the port changes with its uses; not under a `try`, or an `if` that imports from torch.amp
    in another branch, where it is an old torch's fallback), and the legacy autocast state that means
    CUDA's: `torch.get_autocast_gpu_dtype()`, `torch.set_autocast_gpu_dtype(...)`, and
    `torch.is_autocast_enabled()` / `torch.set_autocast_enabled(flag)` called without a
    device type.

    ## Why is this bad?
    `torch.cuda.amp` only ever applies to CUDA: off CUDA, `autocast()` warns and disables
    itself, so the model silently trains in float32 on the accelerator, slower and with twice
    the memory. The API has been deprecated since torch 2.4. The legacy state functions read
    and set CUDA's autocast alone: inside `torch.autocast("tpu")`, `torch.is_autocast_enabled()`
    is False and `torch.get_autocast_gpu_dtype()` says float16, so code that casts to "the
    autocast dtype" (attention kernels, custom autograd functions) takes its float32 path or
    casts to the wrong dtype.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast():
        loss = model(x)
    ```

    ## Use instead
    ```python
    with torch.amp.autocast("tpu", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## Targets
    A warning on every target but ROCm. Give the target's device type, and on tpu, neuron,
    xla and hpu an explicit `dtype=torch.bfloat16` (PrivateUse1 backends default to float16);
    bfloat16 needs no GradScaler (PC304). Info for an import whose names the module never
    uses (outside an `__init__.py`): it imports without CUDA, so nothing fails.

    ## Fix safety
    Safe. Each CUDA name becomes its device-generic twin with the target's device type, which
    is what `torch.cuda.amp` itself forwards to for CUDA: `autocast(...)` becomes
    `torch.amp.autocast(<device>, ...)` (positional `enabled, dtype, cache_enabled` turn into
    keywords, since the generic signature orders them differently), `GradScaler(...)`
    becomes `torch.amp.GradScaler(<device>, ...)`, and `custom_fwd` / `custom_bwd`, called or
    bare, get `device_type=<device>` (for a `torch-version` that has them: the generic
    GradScaler since 2.3, custom_fwd/custom_bwd since 2.4). An autocast without a dtype gets the target's AMP dtype
    where torch's default for the device is not it or is a plugin's choice (tpu, neuron, xla,
    hpu: `dtype=torch.bfloat16`); float16 was CUDA's choice, and on those targets the CUDA
    region did nothing at all. A dtype the code names is kept. With `--device auto` the device
    type is the module's device binding and the dtype is left to each device's default.

    Names come out bound: `T.cuda.amp.autocast()` becomes `T.amp.autocast(...)` after
    `import torch as T`. For `from torch.cuda.amp import autocast, GradScaler` (or
    `from torch.cuda import amp`, `import torch.cuda.amp as amp`), the import becomes `from
    torch.amp import ...` (`import torch.amp as amp`) together with
    every use, when every name it binds is used in the file and only in calls this rule
    rewrites (and the file is not a package's `__init__.py`, which may re-export them);
    otherwise each use is written `torch.amp.<name>(...)` and the import is left alone.
    Not fixed: a use that is not a call (`scaler_cls = GradScaler`), an autocast given
    `*args` (the arguments cannot be mapped), or `**kwargs` where a dtype would be added, and
    references to the `torch.cuda.amp` module itself.

    The legacy state asks the same question of the target's device type, which is what it
    asked of CUDA (torch 2.4 and later): `torch.is_autocast_enabled()` becomes
    `torch.is_autocast_enabled("tpu")`, `torch.get_autocast_gpu_dtype()` becomes
    `torch.get_autocast_dtype("tpu")`, and the setters take the device type first
    (`torch.set_autocast_dtype("tpu", dtype)`); with `--device auto`, `DEVICE.type`.
    """

    code = "PC301"
    name = "cuda-amp-api"
    fix_safety = FixSafety.SAFE
    triggers = (b"cuda", b"autocast")

    VALID = [
        Valid('import torch\nwith torch.amp.autocast("cpu", dtype=torch.bfloat16):\n    pass\n'),
        Valid("def run(torch):\n    with torch.cuda.amp.autocast():\n        pass\n"),
        Valid("from apex import amp\nmodel = amp.initialize(model)\n"),
        # given a device type, the autocast state is that device's
        Valid(
            "import torch\nif torch.is_autocast_enabled(x.device.type):\n"
            '    torch.set_autocast_enabled("cpu", False)\ncheck = torch.is_autocast_enabled\n'
        ),
        Valid("import torch\ndtype = torch.get_autocast_gpu_dtype()\n", options={"targets": ["rocm"]}),
        Valid("def cast(torch, x):\n    return x.to(torch.get_autocast_gpu_dtype())\n"),
        Valid(  # the device-generic decorator where torch has it: the CUDA one is an old torch's fallback
            "import torch\nif hasattr(torch.amp, 'custom_fwd'):\n    from torch.amp import custom_fwd\n"
            "else:\n    from torch.cuda.amp import custom_fwd\nforward = custom_fwd(device_type=kind)\n"
        ),
    ]
    INVALID = [
        Invalid(  # MiniGPT-4: imported, never used (the model opens its autocast in a method of its own)
            "from torch.cuda.amp import autocast as autocast\nimport torch\nclass MiniGPT4(torch.nn.Module):\n"
            "    def maybe_autocast(self, dtype=torch.bfloat16):\n        return torch.autocast('tpu', dtype=dtype)\n",
            lines=[1],
            message="imported, but never used here",
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    pass\n",
            lines=[2],
            fixed='import torch\nwith torch.amp.autocast("tpu", dtype=torch.bfloat16):\n    pass\n',
        ),
        # torch.amp.GradScaler takes a device from torch 2.3 on.
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
            lines=[2],
            device="xpu",
            options={"torch-version": "2.2"},
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    pass\n",
            lines=[2],
            device="neuron",
            fixed='import torch\nwith torch.amp.autocast("neuron", dtype=torch.bfloat16):\n    pass\n',
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(enabled=use_amp):\n    pass\n",
            lines=[2],
            device="cpu",
            fixed='import torch\nwith torch.amp.autocast("cpu", enabled=use_amp):\n    pass\n',
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(True, torch.float16):\n    pass\n",
            lines=[2],
            device="mps",
            fixed='import torch\nwith torch.amp.autocast("mps", enabled=True, dtype=torch.float16):\n    pass\n',
        ),
        Invalid(
            "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n",
            lines=[3],
            device="auto",
            fixed="import torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "with torch.amp.autocast(DEVICE.type):\n    pass\n",
        ),
        Invalid(
            "import torch as T\nscaler = T.cuda.amp.GradScaler()\n",
            lines=[2],
            fixed='import torch as T\nscaler = T.amp.GradScaler("tpu")\n',
        ),
        Invalid(
            "import torch as T\n\ndevice = T.device('cuda')\nscaler = T.cuda.amp.GradScaler(2.0**12, enabled=True)\n"
            "with T.cuda.amp.autocast(dtype=T.float16):\n    pass\n",
            lines=[4, 5],
            device="auto",
            fixed="import torch as T\n\ndevice = T.device('cuda')\nscaler = T.amp.GradScaler(device.type, 2.0**12, enabled=True)\n"
            "with T.amp.autocast(device.type, dtype=T.float16):\n    pass\n",
        ),
        Invalid(
            "import torch as T\nwith T.cuda.amp.autocast():\n    pass\n",
            lines=[2],
            fixed='import torch as T\nwith T.amp.autocast("tpu", dtype=T.bfloat16):\n    pass\n',
        ),
        Invalid(
            "from torch import cuda\nwith cuda.amp.autocast(dtype=cuda_dtype):\n    pass\n",
            lines=[2],
            fixed='from torch import cuda\nimport torch\nwith torch.amp.autocast("tpu", dtype=cuda_dtype):\n    pass\n',
        ),
        Invalid(
            "from torch import cuda\nwith cuda.amp.autocast(dtype=cuda_dtype):\n    pass\n",
            lines=[2],
            device="xla",
            fixed='from torch import cuda\nimport torch\nwith torch.amp.autocast("xla", dtype=cuda_dtype):\n    pass\n',
        ),
        Invalid(
            "from torch.cuda.amp import autocast as ac, GradScaler\nwith ac():\n    s = GradScaler()\n",
            lines=[1, 2, 3],
            fixed="from torch.amp import autocast as ac, GradScaler\nimport torch\n"
            'with ac("tpu", dtype=torch.bfloat16):\n    s = GradScaler("tpu")\n',
        ),
        Invalid(
            "import torch\nfrom torch.cuda.amp import autocast, GradScaler\n\n"
            "def train(step):\n    scaler = GradScaler(\n        init_scale=1024,\n    )\n"
            "    with autocast():\n        step()\n",
            lines=[2, 5, 8],
            device="cpu",
            fixed="import torch\nfrom torch.amp import autocast, GradScaler\n\n"
            'def train(step):\n    scaler = GradScaler(\n        "cpu",\n        init_scale=1024,\n    )\n'
            '    with autocast("cpu"):\n        step()\n',
        ),
        Invalid(
            "from torch.cuda.amp import autocast, GradScaler\n\nwith autocast():\n    pass\n"
            "assert isinstance(s, GradScaler)\n",
            lines=[1, 3, 5],
            device="auto",
            fixed="from torch.cuda.amp import autocast, GradScaler\nimport torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "with torch.amp.autocast(DEVICE.type):\n    pass\nassert isinstance(s, GradScaler)\n",
        ),
        Invalid(
            "import torch.cuda.amp\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n    return x\n",
            lines=[2],
            fixed='import torch.cuda.amp\n@torch.amp.custom_fwd(device_type="tpu")\ndef forward(ctx, x):\n    return x\n',
        ),
        Invalid(
            "import torch\nfrom torch.cuda.amp import custom_fwd, custom_bwd\n\nclass F(torch.autograd.Function):\n"
            "    @staticmethod\n    @custom_fwd(cast_inputs=torch.float32)\n    def forward(ctx, x):\n        return x\n\n"
            "    @staticmethod\n    @custom_bwd\n    def backward(ctx, g):\n        return g\n",
            lines=[2, 6, 11],
            device="cpu",
            fixed="import torch\nfrom torch.amp import custom_fwd, custom_bwd\n\nclass F(torch.autograd.Function):\n"
            '    @staticmethod\n    @custom_fwd(device_type="cpu", cast_inputs=torch.float32)\n'
            "    def forward(ctx, x):\n        return x\n\n"
            '    @staticmethod\n    @custom_bwd(device_type="cpu")\n    def backward(ctx, g):\n        return g\n',
        ),
        Invalid(
            "from torch.cuda import amp\nwith amp.autocast():\n    pass\n",
            lines=[1, 2],
            fixed='from torch import amp\nimport torch\nwith amp.autocast("tpu", dtype=torch.bfloat16):\n    pass\n',
        ),
        Invalid(  # detectron2's AMPTrainer: a branch with no other import is no old torch's fallback
            "import torch\nclass AMPTrainer:\n    def __init__(self, grad_scaler=None):\n"
            "        if grad_scaler is None:\n            from torch.cuda.amp import GradScaler\n"
            "            grad_scaler = GradScaler()\n",
            lines=[5, 6],
            fixed="import torch\nclass AMPTrainer:\n    def __init__(self, grad_scaler=None):\n"
            "        if grad_scaler is None:\n            from torch.cuda.amp import GradScaler\n"
            '            grad_scaler = torch.amp.GradScaler("tpu")\n',
        ),
        Invalid(  # ZoeDepth's trainers
            "import torch\nimport torch.cuda.amp as amp\nscaler = amp.GradScaler(enabled=True)\n"
            "with amp.autocast(enabled=True):\n    pass\n",
            lines=[2, 3, 4],
            fixed='import torch\nimport torch.amp as amp\nscaler = amp.GradScaler("tpu", enabled=True)\n'
            'with amp.autocast("tpu", dtype=torch.bfloat16, enabled=True):\n    pass\n',
        ),
        Invalid(
            "from torch.cuda import amp\n\nwith amp.autocast():\n    pass\n",
            lines=[1, 3],
            device="auto",
            fixed="from torch import amp\nimport torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "with amp.autocast(DEVICE.type):\n    pass\n",
        ),
        Invalid(
            "import torch\n@torch.cuda.amp.autocast()\ndef step(x):\n    return x\n",
            lines=[2],
            device="hpu",
            fixed='import torch\n@torch.amp.autocast("hpu", dtype=torch.bfloat16)\ndef step(x):\n    return x\n',
        ),
        Invalid(
            "import torch\nfrom torch.cuda.amp import custom_fwd\n\nclass F(torch.autograd.Function):\n"
            "    @staticmethod\n    @custom_fwd\n    def forward(ctx, x):\n        return x\n",
            lines=[2, 6],
            device="auto",
            fixed="import torch\nfrom torch.amp import custom_fwd\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "class F(torch.autograd.Function):\n"
            "    @staticmethod\n    @custom_fwd(device_type=DEVICE.type)\n    def forward(ctx, x):\n        return x\n",
        ),
        # a decorator runs at definition, before the module's device variable is bound: a new binding
        Invalid(
            "import torch\n\n@torch.cuda.amp.autocast()\ndef step(x):\n    return x\n\ndevice = torch.device('cuda')\n",
            lines=[3],
            device="auto",
            fixed="import torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "@torch.amp.autocast(DEVICE.type)\ndef step(x):\n    return x\n\ndevice = torch.device('cuda')\n",
        ),
        # `*args` cannot be mapped onto torch.amp.autocast's parameters; a module alias is not a call
        Invalid("import torch\nwith torch.cuda.amp.autocast(*flags):\n    pass\n", lines=[2]),
        Invalid("import torch\namp_module = torch.cuda.amp\n", lines=[2]),
        Invalid("import torch\nwith torch.cuda.amp.autocast(**options):\n    pass\n", lines=[2]),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(**options):\n    pass\n",
            lines=[2],
            device="cpu",
            fixed='import torch\nwith torch.amp.autocast("cpu", **options):\n    pass\n',
        ),
        # the name is rebound elsewhere: the import stays, the call is spelled torch.amp
        Invalid(
            "from torch.cuda.amp import GradScaler\ns = GradScaler()\n\ndef f(GradScaler):\n    return GradScaler\n",
            lines=[1, 2],
            fixed='from torch.cuda.amp import GradScaler\nimport torch\ns = torch.amp.GradScaler("tpu")\n\n'
            "def f(GradScaler):\n    return GradScaler\n",
        ),
        # the legacy autocast state is CUDA's: asked of the target's device type instead
        Invalid(
            "import torch\n\ndef cast(x):\n    if torch.is_autocast_enabled():\n"
            "        return x.to(torch.get_autocast_gpu_dtype())\n    return x\n",
            lines=[4, 5],
            fixed='import torch\n\ndef cast(x):\n    if torch.is_autocast_enabled("tpu"):\n'
            '        return x.to(torch.get_autocast_dtype("tpu"))\n    return x\n',
        ),
        Invalid(
            "import torch as T\nT.set_autocast_gpu_dtype(T.bfloat16)\nT.set_autocast_enabled(True)\n",
            lines=[2, 3],
            device="neuron",
            fixed='import torch as T\nT.set_autocast_dtype("neuron", T.bfloat16)\nT.set_autocast_enabled("neuron", True)\n',
        ),
        Invalid(
            "from torch import get_autocast_gpu_dtype as gpu_dtype\ndtype = gpu_dtype()\n",
            lines=[2],
            device="cpu",
            message="returns CUDA's autocast dtype",
            fixed='from torch import get_autocast_gpu_dtype as gpu_dtype\nimport torch\ndtype = torch.get_autocast_dtype("cpu")\n',
        ),
        Invalid(
            "import torch\n\non = torch.is_autocast_enabled()\n",
            lines=[3],
            device="auto",
            fixed="import torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "on = torch.is_autocast_enabled(DEVICE.type)\n",
        ),
        # torch 2.3 has no device-typed autocast state; a reference that is no call is not fixed
        Invalid("import torch\non = torch.is_autocast_enabled()\n", lines=[2], options={"torch-version": "2.3"}),
        Invalid("import torch\nread_dtype = torch.get_autocast_gpu_dtype\n", lines=[2]),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._uses: list[_Use] = []
        self._imports: list[cst.Import | cst.ImportFrom] = []
        self._import_reports: dict[int, int] = {}  # import statement id -> its report's index

    def visit_Import(self, node: cst.Import) -> None:
        """`import torch.cuda.amp as amp` (ZoeDepth, Swin's SimMIM): as `from torch.cuda import amp`."""
        if _import_rename(node) is not None:
            assert not isinstance(node.names, cst.ImportStar)
            self._note_import(node, node.names[0].name)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        rename = _import_rename(node)
        if rename is not None:
            assert node.module is not None and not isinstance(node.names, cst.ImportStar)
            self._note_import(node, node.module if rename == "torch.amp" else node.names[0].name)
        elif not any(isinstance(ancestor, _SCOPES) for ancestor in self.ctx.ancestors):
            self._imports.append(node)

    def _note_import(self, node: cst.Import | cst.ImportFrom, subject: cst.BaseExpression) -> None:
        """Report a CUDA AMP import at `subject`, a line the port changes with the uses it binds;
        not where it is an old torch's fallback (`_in_fallback`)."""
        if not any(isinstance(ancestor, _SCOPES) for ancestor in self.ctx.ancestors):
            self._imports.append(node)
        if not _in_fallback(self.ctx.ancestors):
            assert isinstance(subject, (cst.Name, cst.Attribute))
            count = len(self.reports)
            super().visit_watched_name(subject, "torch.cuda.amp")
            if len(self.reports) > count:
                self._import_reports[id(node)] = count

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if qualified_name in _DEVICE_GENERIC and self._legacy_call(node, qualified_name) is None:
            return  # given a device type (or not called): not CUDA's state
        count = len(self.reports)
        super().visit_watched_name(node, qualified_name)
        if len(self.reports) == count:
            return
        if qualified_name in _LEGACY_STATE:
            edit = self._legacy_edit(node, qualified_name)
            self.reports[count] = dataclasses.replace(self.reports[count], edit=edit)
            return
        use = self._use(count, node, qualified_name)
        if use is not None:
            self._uses.append(use)

    def _legacy_call(self, node: cst.Name | cst.Attribute, qualified_name: str) -> cst.Call | None:
        """The call of a legacy autocast-state function in its CUDA form: as many arguments
        as that form takes, none of them starred or by keyword."""
        call = self.ctx.parent
        if not (isinstance(call, cst.Call) and call.func is node):
            return None
        arity = _LEGACY_STATE[qualified_name][1]
        if len(call.args) != arity or any(arg.star or arg.keyword for arg in call.args):
            return None
        return call

    def _legacy_edit(self, node: cst.Name | cst.Attribute, qualified_name: str) -> edits.Edit | None:
        """`torch.is_autocast_enabled()` -> `torch.is_autocast_enabled("tpu")`,
        `torch.get_autocast_gpu_dtype()` -> `torch.get_autocast_dtype("tpu")`: the same question
        or setting, for the target's device type."""
        call = self._legacy_call(node, qualified_name)
        device = edits.target_device_type(self.ctx)
        if call is None or device is None or not versions.has(self.ctx, _STATE_SINCE):
            return None
        name = _LEGACY_STATE[qualified_name][0]
        func = self._state_function(node, name)
        if func is None:
            return None
        new = amp.insert_args(call.with_changes(func=func.node), 0, [cst.Arg(device.node)])
        imports, prelude = amp.needs(device, func)
        return edits.Edit(call, new, FixSafety.SAFE, f"{qualified_name}() -> torch.{name}(<device>)", imports, prelude)

    def _state_function(self, node: cst.Name | cst.Attribute, name: str) -> edits.Spelling | None:
        """`torch.<name>` spelled as the file has it: the reference itself when it already
        says `name`, its own module otherwise (`T.get_autocast_dtype`), else `torch`."""
        if patterns.dotted(node).rpartition(".")[2] == name:
            return edits.Spelling(node)
        if isinstance(node, cst.Attribute):
            return edits.Spelling(node.with_changes(attr=cst.Name(name)))
        torch = edits.torch_name(self.ctx)
        return edits.Spelling(cst.Attribute(torch.node, cst.Name(name)), torch.imports) if torch else None

    def leave_Module(self, node: cst.Module) -> None:
        self._quiet_unread_imports(node)
        if not self._uses:
            return
        kept = _rewritable_imports(node, self._imports, self._uses, self.ctx.path)
        planned = [(use, use.root.value in kept) for use in self._uses if use.root.value in kept or use.torch]
        if not planned:
            return
        if kept:  # one edit: the imports and every use together, so no name is ever left unbound
            builds = {id(use.target): partial(_build_kept, use.build, keep) for use, keep in planned}
            for statement, module in kept.values():
                builds[id(statement)] = partial(_rename_module, module)
            spellings = [s for use, keep in planned for s in _spellings(use, keep)]
            imports, prelude = amp.needs(*spellings)
            edit = edits.Edit(
                node,
                node.visit(_Rewrite(builds)),
                FixSafety.SAFE,
                "torch.cuda.amp -> torch.amp (imports and calls)",
                imports,
                prelude,
            )
            for use, _ in planned:
                self._attach(use, edit)
            for statement, _ in kept.values():  # each import rewritten with its uses
                index = self._import_reports.get(id(statement))
                if index is not None:
                    self.reports[index] = dataclasses.replace(self.reports[index], edit=edit)
            return
        for use, _ in planned:
            imports, prelude = amp.needs(*_spellings(use, False))
            replacement = use.build(use.target, False)
            title = f"torch.cuda.amp.{use.kind} -> torch.amp.{use.kind}"
            self._attach(use, edits.Edit(use.target, replacement, FixSafety.SAFE, title, imports, prelude))

    def _quiet_unread_imports(self, module: cst.Module) -> None:
        """An import from `torch.cuda.amp` whose names the module never mentions again
        (MiniGPT-4's `from torch.cuda.amp import autocast as autocast` beside a
        `maybe_autocast()` of its own): it imports without CUDA and nothing uses it, so nothing
        fails; info, a line to delete with the port. Not in an `__init__.py`, which may import
        to re-export."""
        if not self._import_reports or self.ctx.path.replace("\\", "/").endswith("__init__.py"):
            return
        mentioned = _mentioned_names(module)
        for statement in self._imports:
            index = self._import_reports.get(id(statement))
            if index is None or isinstance(statement.names, cst.ImportStar):
                continue
            bound = {patterns.dotted(alias.asname.name if alias.asname else alias.name) for alias in statement.names}
            if not bound & mentioned:
                report = self.reports[index]
                self.reports[index] = dataclasses.replace(
                    report, severity=at_most_info(report.severity), message=report.message + _UNREAD
                )

    def _attach(self, use: _Use, edit: edits.Edit) -> None:
        self.reports[use.report] = dataclasses.replace(self.reports[use.report], edit=edit)

    def _use(self, index: int, node: cst.Name | cst.Attribute, qualified_name: str) -> _Use | None:
        kind = _KINDS.get(qualified_name)
        root = amp.root_name(node)
        parent = self.ctx.parent
        if kind is None or root is None or not versions.has(self.ctx, _GENERIC_SINCE.get(kind)):
            return None
        if isinstance(parent, cst.Call) and parent.func is node:
            target: cst.CSTNode = parent
        elif isinstance(parent, cst.Decorator) and kind in ("custom_fwd", "custom_bwd"):
            target = node
        else:
            return None  # `cls = GradScaler`, `isinstance(s, GradScaler)`: not a call to rewrite
        device = edits.target_device_type(self.ctx)
        if device is None:
            return None
        needs = [device]
        dtype = None
        if kind == "autocast":
            assert isinstance(target, cst.Call)
            if amp.has_star(target, "*") or amp.positional_count(target) > len(_AUTOCAST_POSITIONAL):
                return None
            if patterns.argument(target, 1, "dtype") is None and amp.wants_explicit_dtype(self.ctx.fix_target):
                dtype = amp.amp_dtype(self.ctx)
                if dtype is None or amp.has_star(target, "**"):
                    return None  # `**kwargs` may hold a dtype already
                needs.append(dtype)
        torch = edits.torch_name(self.ctx)
        qualified = cst.Attribute(cst.Attribute(torch.node, cst.Name("amp")), cst.Name(kind)) if torch else None
        build = partial(_rewrite, kind, device.node, dtype.node if dtype else None, qualified)
        return _Use(index, root, kind, target, build, tuple(needs), torch)


def _spellings(use: _Use, keep: bool) -> tuple[edits.Spelling, ...]:
    return use.needs if keep or use.torch is None else (*use.needs, use.torch)


def _rewrite(
    kind: str,
    device: cst.BaseExpression,
    dtype: cst.BaseExpression | None,
    qualified: cst.BaseExpression | None,
    target: cst.CSTNode,
    keep: bool,
) -> cst.CSTNode:
    """The torch.amp form of a use: `target` is the call, or the bare decorator name."""
    if not isinstance(target, cst.Call):  # @custom_fwd -> @custom_fwd(device_type=...)
        func = target if keep else qualified
        assert isinstance(func, cst.BaseExpression)
        return cst.Call(func=func, args=[calls.keyword_arg("device_type", device)])
    call = target if keep else target.with_changes(func=qualified)
    if kind == "autocast":
        args, position = [], 0
        for arg in call.args:
            if arg.keyword is None and not arg.star:
                arg = calls.as_keyword(arg, _AUTOCAST_POSITIONAL[position])
                position += 1
            args.append(arg)
        new = [cst.Arg(device)] + ([calls.keyword_arg("dtype", dtype)] if dtype is not None else [])
        return amp.insert_args(call.with_changes(args=args), 0, new)
    if kind == "GradScaler":  # the generic scaler's parameters are the CUDA one's, after `device`
        return amp.insert_args(call, 0, [cst.Arg(device)])
    position = amp.positional_count(call)
    return amp.insert_args(call, position, [calls.keyword_arg("device_type", device)])


def _build_kept(build: Callable[[cst.CSTNode, bool], cst.CSTNode], keep: bool, node: cst.CSTNode) -> cst.CSTNode:
    return build(node, keep)


def _rename_module(module: str, node: cst.CSTNode) -> cst.CSTNode:
    if isinstance(node, cst.Import):  # `import torch.cuda.amp as amp` -> `import torch.amp as amp`
        return node.with_changes(names=[node.names[0].with_changes(name=edits.dotted(module))])
    assert isinstance(node, cst.ImportFrom)
    return node.with_changes(module=edits.dotted(module))


class _Rewrite(cst.CSTTransformer):
    """Rebuilds the nodes named by identity from their already rewritten children."""

    def __init__(self, builds: dict[int, Callable[[cst.CSTNode], cst.CSTNode]]) -> None:
        super().__init__()
        self.builds = builds

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        build = self.builds.get(id(original_node))
        return build(updated_node) if build is not None else updated_node


def _mentioned_names(module: cst.Module) -> set[str]:
    """The names the module reads or spells out as a string (`__all__`), outside its imports."""
    attributes = set()
    mentioned = set()
    for node in descendants(module, (cst.Import, cst.ImportFrom)):
        if type(node) is cst.Attribute:
            attributes.add(id(node.attr))
        elif type(node) is cst.Name and id(node) not in attributes:
            mentioned.add(node.value)
        elif type(node) is cst.SimpleString:
            mentioned.add(node.raw_value)
    return mentioned


def _in_fallback(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether an import is an old torch's fallback: under `try`, or in a branch of an `if`
    whose other branch imports from torch.amp (`if hasattr(torch.amp, "custom_fwd"): ...
    else: from torch.cuda.amp import custom_fwd`); not detectron2's `if grad_scaler is None:
    from torch.cuda.amp import GradScaler`, the one way it has."""
    for ancestor in reversed(ancestors):
        if isinstance(ancestor, cst.Try):
            return True
        if isinstance(ancestor, cst.If):
            return any(isinstance(node, cst.ImportFrom) and _from_torch_amp(node) for node in descendants(ancestor))
        if isinstance(ancestor, _SCOPES):
            return False
    return False


def _from_torch_amp(statement: cst.ImportFrom) -> bool:
    """`from torch.amp import ...`, `from torch import amp`."""
    module = patterns.dotted(statement.module) if statement.module is not None and not statement.relative else ""
    if module == "torch.amp":
        return True
    names = [] if isinstance(statement.names, cst.ImportStar) else statement.names
    return module == "torch" and any(patterns.dotted(alias.name) == "amp" for alias in names)


def _import_rename(statement: cst.Import | cst.ImportFrom) -> str | None:
    """The module a CUDA AMP import can come from instead: `from torch.cuda.amp import
    autocast, GradScaler` from torch.amp, `from torch.cuda import amp` from torch; and the
    module `import torch.cuda.amp as amp` can import instead, torch.amp."""
    if isinstance(statement, cst.Import):
        aliases = statement.names
        named = len(aliases) == 1 and aliases[0].asname is not None
        return "torch.amp" if named and patterns.dotted(aliases[0].name) == "torch.cuda.amp" else None
    if statement.relative or statement.module is None or isinstance(statement.names, cst.ImportStar):
        return None
    module = patterns.dotted(statement.module)
    names = [patterns.dotted(alias.name) for alias in statement.names]
    if module == "torch.cuda.amp" and all(f"torch.cuda.amp.{name}" in _KINDS for name in names):
        return "torch.amp"
    if module == "torch.cuda" and names == ["amp"]:
        return "torch"
    return None


def _rewritable_imports(
    module: cst.Module, imports: list[cst.Import | cst.ImportFrom], uses: list[_Use], path: str
) -> dict[str, tuple[cst.Import | cst.ImportFrom, str]]:
    """The module-level CUDA AMP imports that can be rewritten with their uses, by the names
    they bind: every name is used in this file, and every mention of it anywhere (a binding,
    a use, even a string such as `__all__` lists) is the start of a use this rule rewrites."""
    if path.replace("\\", "/").rsplit("/", 1)[-1] == "__init__.py":
        return {}  # a package's __init__ may re-export the CUDA names
    candidates: dict[str, tuple[cst.Import | cst.ImportFrom, str]] = {}
    for statement in imports:
        renamed = _import_rename(statement)
        if renamed is None:
            continue
        assert not isinstance(statement.names, cst.ImportStar)
        for alias in statement.names:
            local = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(local, cst.Name):
                candidates[local.value] = (statement, renamed)
    if not candidates:
        return {}
    roots = {id(use.root) for use in uses}
    skip = {id(statement) for statement, _ in candidates.values()}
    mentioned: dict[str, list[cst.CSTNode]] = {name: [] for name in candidates}
    for mention in _mentions(module, set(candidates), skip):
        mentioned[patterns.string_value(mention) or getattr(mention, "value", "")].append(mention)
    good = {name for name, found in mentioned.items() if found and all(id(mention) in roots for mention in found)}
    # an import is rewritten whole: all the names it binds must be good
    return {
        name: (statement, renamed)
        for name, (statement, renamed) in candidates.items()
        if all(other in good for other, (s, _) in candidates.items() if s is statement)
    }


def _mentions(node: cst.CSTNode, names: set[str], skip: set[int]) -> Iterator[cst.CSTNode]:
    """Every Name spelled as one of `names` (attribute and keyword names aside), and every
    string equal to one, outside the `skip` nodes."""
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in skip:
            continue
        if isinstance(current, cst.Attribute):
            stack.append(current.value)  # `x.autocast` does not mention the name `autocast`
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        elif isinstance(current, cst.Name):
            if current.value in names:
                yield current
        elif isinstance(current, cst.SimpleString):
            if patterns.string_value(current) in names:
                yield current
        else:
            stack.extend(current.children)
