from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import libcst as cst

from portcheck import patterns, project
from portcheck import targets as target_data
from portcheck.flow import DeviceFlow, Home, name_reads, references
from portcheck.numpy_float64 import float64_array
from portcheck.project import Project
from portcheck.resolve import Scope
from portcheck.rule import ERROR, OFF, UNPLACED, WARNING, FileContext, Invalid, Report, Rule, Valid
from portcheck.wording import verb

_FLOAT64_NAMES = ("torch.float64", "torch.double", "torch.DoubleTensor", "torch.cdouble", "torch.complex128")
_FLOAT64 = frozenset(_FLOAT64_NAMES)
_SEVERITY_BY_SUPPORT = {"unsupported": ERROR, "slow": WARNING, "native": OFF}
_CASTS = frozenset({"float", "half", "bfloat16", "int", "long", "short", "bool", "byte", "char"})
_READBACKS = frozenset({"numpy", "tolist", "item"})
_MOVES = frozenset({"cuda", "type", "xpu", "mps", "npu", "hpu", "ipu"})  # and `.to(device)`
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout"})
_MODULE_STATE = frozenset({"register_buffer", "register_parameter"})
_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_HOST_BUILTINS = frozenset({"print", "float", "int", "bool", "str", "repr", "len", "format", "round", "isinstance"})
_HOST_LIBRARIES = ("numpy.", "math.")
_DEPTH = 10  # how many names and parameters a value is followed through (each once: `_Follow.followed`)
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_FROM_DATA = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.asarray"})


@dataclass
class _Follow:
    """One following of a float64 tensor to where it goes (see `Float64OnTarget._stays`)."""

    strict: bool = True  # made on the default device: every use must show it stays in host memory
    function: cst.FunctionDef | None = None  # the module-level function it is made in: its callers may decide
    returned: bool = False  # returned from `function`: it stays only if the callers keep it
    followed: set[tuple[int, str]] = field(default_factory=set)  # (scope id, name): uses already being followed


class Float64OnTarget(Rule):
    """## What it does
    Reports float64 tensors: `torch.float64` / `torch.double` (and complex128),
    `.double()` calls, `torch.DoubleTensor`, and `dtype="float64"` strings (not where a dtype
    is compared, nor one of several listed in a dict, list, tuple or set: a table that names
    dtypes makes nothing), except float64 that demonstrably stays in host memory
    (portcheck.flow follows it):
    - made there on purpose (`x.cpu().double()`, `device="cpu"`, `torch.from_numpy`, the legacy
      CPU type `torch.DoubleTensor(...)`), unless it is then moved to a device or into a
      module's buffers or parameters;
    - made by a factory on the default device (`torch.linspace(..., dtype=torch.float64)`, in a
      module that never sets another), when every use of it, through a function's local names
      and host computations, casts it to another dtype (`.float()`, `.to(torch.float32)`) or
      reads it back (`.item()`, `.tolist()`, `.numpy()`, `print`, NumPy) before it goes anywhere:
      also through the parameter of a local lambda or `def` it is passed to (`register_buffer =
      lambda name, val: self.register_buffer(name, val.to(torch.float32))`), and, returned from
      a module-level function, through every call of it in the module, by name or through a
      local name bound to it, where the module calls it and reads it nowhere else;
    - cast where `.numpy()` reads it (`t.double().numpy()`: `.numpy()` only works in host memory).

    Also reports a tensor made of a float64 NumPy array (`torch.from_numpy`, `torch.tensor`,
    `torch.as_tensor`) that reaches a device before a cast: guided-diffusion's
    `th.from_numpy(arr).to(device=t.device)[t].float()`, where every call passes a schedule
    NumPy computed in float64 (`np.array(betas, dtype=np.float64)`, `np.linspace`, `np.eye`,
    a random generator's draws such as `np.random.RandomState(seed).randn(1, 512)`, and what
    NumPy computes from those, through names, `self.` attributes, parameters and
    returns, also of the repository's other modules: score_sde's
    `self.register_buffer("sigmas", torch.tensor(utils.get_sigmas(config)))`).

    ## Why is this bad?
    MPS has no float64 at all: "Cannot convert a MPS Tensor to float64 dtype as the MPS
    framework doesn't support float64". TPUs and Trainium emulate it slowly, and client Intel
    GPUs raise "Required aspect fp64 is not supported" unless emulation is built in. float64
    is rarely needed for training.

    ## Example
    ```python
    weights = torch.ones(10, dtype=torch.float64)
    probs = logits.double().softmax(-1)
    ```

    ## Use instead
    ```python
    weights = torch.ones(10, dtype=torch.float32)
    probs = logits.float().softmax(-1)
    ```
    or keep float64 math on the CPU where it is really needed, casting after `.cpu()` and back
    before the value reaches the device:
    ```python
    probs = logits.cpu().double().softmax(-1)
    betas = torch.linspace(1e-4, 0.02, steps, dtype=torch.float64)  # host memory
    self.register_buffer("betas", betas.to(torch.float32))
    ```

    ## Targets
    An error on mps; a warning on tpu, neuron, xla, xpu, npu and hpu; off on cpu and rocm.

    ## Fix safety
    No automatic fix: changing a dtype changes numerics.
    """

    code = "PC307"
    name = "float64-on-target"
    message = "{what} creates float64 tensors, {support}"
    hint = "use float32, or keep the float64 computation on the CPU: cast after `.cpu()`, and back before the device"
    severity = {name: _SEVERITY_BY_SUPPORT[t.float64] for name, t in target_data.all_targets().items()}
    triggers = (b"float64", b"double", b"Double", b"complex128", b"from_numpy", b"numpy")
    watched_names = _FLOAT64_NAMES

    VALID = [
        # Python's math makes Python floats, which torch.tensor makes float32; NumPy's log of what
        # a tensor gave (float32) stays float32
        Valid(
            "import math\nimport numpy as np\nimport torch\ndef scale(t, sigma_max=50.0):\n"
            "    a = torch.tensor(math.log(sigma_max), device=t.device)\n"
            "    b = torch.tensor(np.log(t.cpu().numpy()), device=t.device)\n    return a, b\n"
        ),
        Valid(  # drawn in float32, or cast before it moves
            "import numpy as np\nimport torch\ndef latents(seed, device):\n"
            "    rng = np.random.default_rng(seed)\n"
            "    z = torch.from_numpy(rng.standard_normal((1, 512), dtype=np.float32)).to(device)\n"
            "    return z, torch.from_numpy(np.random.RandomState(seed).randn(1, 8).astype(np.float32)).to(device)\n"
        ),
        Valid(  # cast before the move; NumPy data of unknown dtype; float32 on purpose
            "import numpy as np\nimport torch\ndef extract(arr, t):\n"
            "    return torch.from_numpy(arr).float().to(t.device)[t]\n"
            "betas = np.linspace(1e-4, 0.02, 1000, dtype=np.float64)\nx = extract(betas, t)\n"
            "img = torch.from_numpy(np.asarray(image)).to(device)\n"
            "w = torch.from_numpy(np.ones(3).astype(np.float32)).to(device)\n"
            "z = torch.from_numpy(np.zeros((2, 2), np.float32)).to(device)\n"
        ),
        Valid(  # a FLOP counter in a profiling hook: the legacy CPU type (guided-diffusion)
            "import torch as th\ndef count_flops_attn(model, _x, y):\n"
            "    model.total_ops += th.DoubleTensor([int(y[0].numel())])\n"
        ),
        Valid(  # tables that name the dtypes (nanotron's str_to_dtype, DALLE2's float check)
            "import torch\nSTR_TO_DTYPE = {'float64': torch.float64, 'float32': torch.float32, 'bfloat16': torch.bfloat16}\n"
            "def is_float_dtype(dtype):\n    return any(dtype == f for f in (torch.float64, torch.float32, torch.float16))\n"
        ),
        Valid("import torch\nx = torch.ones(3, dtype=torch.float32)\n"),
        Valid("import numpy as np\nx = np.zeros(3, dtype=np.float64)\n"),
        Valid("def f(torch):\n    return torch.float64\n"),
        Valid("import torch\nx = torch.ones(3).double()\n", options={"targets": ["cpu", "rocm"]}),
        Valid("import torch\nx = 'double'\n"),
        Valid("import torch\nif x.dtype == torch.float64 or x.dtype in (torch.double, torch.half):\n    pass\n"),
        Valid("import torch\nstep = torch.zeros((), device='cpu', dtype=torch.float64)\n"),
        # float64 that stays in host memory: after .cpu(), or cast before it goes anywhere
        Valid("import torch\ny = x.cpu().double()\nprobs = logits.detach().cpu().double().softmax(-1).numpy()\n"),
        Valid(
            "import torch\nclass Diffusion(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
            "        betas = torch.linspace(1e-4, 0.02, n, dtype=torch.float64)\n"
            "        alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)\n"
            '        self.register_buffer("betas", betas.to(torch.float32))\n'
            '        self.register_buffer("alphas_cumprod", alphas_cumprod.float())\n'
            '        self.register_buffer("sqrt_ac", torch.sqrt(alphas_cumprod).to(dtype=torch.float32))\n'
        ),
        Valid("import torch\ndef stats(t):\n    return t.double().numpy(), t.cpu().double().mean().item()\n"),
        Valid(  # returned to callers that cast it, called by name and through a name bound in branches
            "import math\nimport torch\ndef linear_schedule(n):\n"
            "    return torch.linspace(1e-4, 0.02, n, dtype=torch.float64)\n"
            "def cosine_schedule(n, s=0.008):\n    t = torch.linspace(0, n, n + 1, dtype=torch.float64) / n\n"
            "    ac = torch.cos((t + s) / (1 + s) * math.pi * 0.5) ** 2\n    ac = ac / ac[0]\n"
            "    return torch.clip(1 - ac[1:] / ac[:-1], 0, 0.999)\n"
            "class Diffusion(torch.nn.Module):\n    def __init__(self, n, schedule):\n        super().__init__()\n"
            "        if schedule == 'linear':\n            schedule_fn = linear_schedule\n"
            "        elif schedule == 'cosine':\n            schedule_fn = cosine_schedule\n"
            "        betas = schedule_fn(n)\n        alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)\n"
            "        register_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))\n"
            "        register_buffer('betas', betas)\n        register_buffer('sqrt_ac', torch.sqrt(alphas_cumprod))\n"
            "        self.register_buffer('first', linear_schedule(n).float())\n"
        ),
        Valid(
            "import torch\ndef log(x):\n    t = torch.arange(10, dtype=torch.float64)\n    s = x.cpu()\n"
            "    print(t.sum(), f'{s.double().mean()}', t.tolist())\n"
        ),
    ]
    INVALID = [
        # score_sde's VESDE: NumPy's log of a Python number is a float64 scalar, made a tensor on the device
        Invalid(
            "import numpy as np\nimport torch\nclass VESDE:\n    def __init__(self, sigma_min=0.01, sigma_max=50):\n"
            "        self.sigma_min, self.sigma_max = sigma_min, sigma_max\n"
            "        self.log_max = sigma_max\n    def sde(self, x, t):\n"
            "        scale = torch.tensor(2 * (np.log(self.log_max) - np.log(0.01)), device=t.device)\n"
            "        return x * scale\n",
            lines=[8],
        ),
        # stylegan3's gen_images.py: NumPy's generators draw float64 latents
        Invalid(
            "import numpy as np\nimport torch\ndef latents(seed, device):\n"
            "    z = torch.from_numpy(np.random.RandomState(seed).randn(1, 512)).to(device)\n"
            "    rng = np.random.default_rng(seed)\n"
            "    return z, torch.from_numpy(rng.standard_normal((1, 512))).to(device)\n",
            lines=[4, 6],
        ),
        Invalid(  # guided-diffusion: float64 schedules indexed on the device every step
            "import numpy as np\nimport torch as th\nclass Diffusion:\n    def __init__(self, betas):\n"
            "        betas = np.array(betas, dtype=np.float64)\n        alphas = 1.0 - betas\n"
            "        self.alphas_cumprod = np.cumprod(alphas, axis=0)\n"
            "        self.sqrt_alphas_cumprod = np.sqrt(self.alphas_cumprod)\n"
            "    def q_mean(self, x, t):\n        return _extract(self.sqrt_alphas_cumprod, t) * x\n"
            "def _extract(arr, timesteps):\n    return th.from_numpy(arr).to(device=timesteps.device)[timesteps].float()\n",
            lines=[12],
            message="of a float64 NumPy array",
        ),
        Invalid(
            "import numpy as np\nfrom torch import from_numpy\ndef rotation(device):\n    def basis():\n"
            "        m = np.eye(3)\n        m = np.linalg.qr(m)[0]\n        return -m\n"
            "    return from_numpy(basis()).to(device).float()\n",
            lines=[8],
        ),
        Invalid("import torch\nx = torch.DoubleTensor([1.0]).to(device)\n", lines=[2]),
        Invalid("import torch\nx = torch.ones(3, dtype=torch.float64)\n", lines=[2], options={"targets": ["mps"]}),
        Invalid("import torch as T\ny = T.randn(2).double()\n", lines=[2]),
        Invalid("from torch import double\nz = torch.zeros(1, dtype=double)\n", lines=[2]),
        Invalid("from torch import float64 as f64\nimport torch.cuda\nw = torch.empty(2, dtype=f64)\n", lines=[3]),
        Invalid(
            "from torch.cuda import is_available as has_gpu\nimport torch\ny = torch.ones(1).double() if has_gpu() else None\n",
            lines=[3],
        ),
        Invalid(
            "import torch\ntorch.set_default_dtype(torch.double)\nx = torch.tensor([1.0], dtype='float64')\n",
            lines=[2, 3],
        ),
        # cast on the device before the copy (MPS raises there), or taken back to the device
        Invalid("import torch\ndef f(t):\n    return t.double().cpu()\n", lines=[3]),
        Invalid("import torch\ndef f(x, device):\n    y = x.cpu().double()\n    return y.to(device)\n", lines=[3]),
        Invalid(
            "import torch\nclass D(torch.nn.Module):\n    def __init__(self, n):\n"
            "        betas = torch.linspace(1e-4, 0.02, n, dtype=torch.float64)\n"
            "        alphas = 1.0 - betas\n"
            '        self.register_buffer("betas", betas.float())\n        self.register_buffer("alphas", alphas)\n',
            lines=[4],
        ),
        Invalid(
            "import torch\ndef f(device):\n    return torch.arange(4, dtype=torch.float64).to(device)\n", lines=[3]
        ),
        # returned to a caller that keeps float64 (a buffer, a device), or to no caller here
        Invalid(
            "import torch\ndef schedule(n):\n    return torch.linspace(0, 1, n, dtype=torch.float64)\n"
            "class D(torch.nn.Module):\n    def __init__(self, n):\n"
            '        self.register_buffer("b", schedule(n))\n        self.register_buffer("c", schedule(n).float())\n',
            lines=[3],
        ),
        Invalid(
            "import torch\ndef schedule(n):\n    b = torch.linspace(0, 1, n, dtype=torch.float64)\n    return b * 2\n"
            "def run(n, device):\n    return schedule(n).to(device)\n",
            lines=[3],
        ),
        Invalid("import torch\ndef schedule(n):\n    return torch.linspace(0, 1, n, dtype=torch.float64)\n", lines=[3]),
        Invalid(  # the lambda keeps float64
            "import torch\nclass D(torch.nn.Module):\n    def __init__(self, n):\n"
            "        betas = torch.linspace(1e-4, 0.02, n, dtype=torch.float64)\n"
            "        register_buffer = lambda name, val: self.register_buffer(name, val)\n"
            "        register_buffer('betas', betas)\n",
            lines=[4],
        ),
        # factories that do not make host tensors: another default device, a device context
        Invalid(
            "import torch\ntorch.set_default_device('cuda')\ndef f():\n"
            "    b = torch.linspace(0, 1, 10, dtype=torch.float64)\n    return b.float()\n",
            lines=[4],
        ),
        Invalid(
            "import torch\ndef f():\n    with torch.device('mps'):\n        b = torch.zeros(2, dtype=torch.float64)\n"
            "        return b.float()\n",
            lines=[4],
        ),
    ]

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """The names of the repository's functions that return float64 NumPy arrays."""
        return tuple(sorted({name.rpartition(".")[2].encode() for name in known.float64_returns}))

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._pending: list[tuple[Report, str]] = []  # float64 returned from a module-level function, by name
        self._awaited: set[str] = set()  # the functions of those reports
        self._calls: dict[str, bool] = {}  # function -> whether every call of it seen keeps the result on the host
        self._aliases: dict[str, set[str]] = {}  # local name -> the awaited functions it was called as
        self._judged: set[int] = set()  # the calls of awaited functions whose results were followed
        self._from_numpy: list[tuple[cst.Call, tuple[cst.CSTNode, ...], Scope]] = []  # tensors made of NumPy data

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if not _in_comparison(self.ctx.ancestors) and not self._in_dtype_table(node):
            self._check(node, f"`{qualified_name}`")

    def _in_dtype_table(self, node: cst.CSTNode) -> bool:
        """One of several dtypes listed together (`{"float64": torch.float64, "float32": ...}`,
        `for dt in (torch.float64, torch.float32)`): a table that names them, creating nothing.
        What is made with the one picked from it is where float64 would be chosen."""
        ancestors, flow = self.ctx.ancestors, self.ctx.flow
        if flow is None or len(ancestors) < 2 or not isinstance(ancestors[-1], (cst.DictElement, cst.Element)):
            return False
        table = ancestors[-2]
        if isinstance(table, cst.Dict):
            listed = [e.value for e in table.elements if isinstance(e, cst.DictElement)]
        elif isinstance(table, (cst.List, cst.Tuple, cst.Set)):
            listed = [e.value for e in table.elements]
        else:
            return False
        return any(value is not node and flow.is_dtype(value) for value in listed)

    def visit_Call(self, node: cst.Call) -> None:
        if patterns.method_name(node) == "double" and not node.args:
            if not self.ctx.qualified_names(node.func):
                self._check(node, "`.double()`")
        dtype = patterns.keyword(node, "dtype")
        if dtype is not None and patterns.string_value(dtype.value) in ("float64", "double", "torch.float64"):
            self._check(dtype.value, 'dtype="float64"')
        if self._awaited and isinstance(node.func, cst.Name):
            self._follow_call(node, node.func)
        if node.args and dtype is None and self.ctx.qualified_names(node.func) & _FROM_DATA:
            flow = self.ctx.flow
            assert flow is not None, "a Python rule"
            self._from_numpy.append((node, self.ctx.chain(node), flow.scope))

    def leave_Module(self, node: cst.Module) -> None:
        """Float64 returned from a module-level function stays in host memory where the module
        calls the function, and every call keeps the result there; else it is reported. A
        tensor made of a float64 NumPy array (known once the module's callers are) is reported
        where it reaches a device before a cast."""
        kept = {name for name, stays in self._calls.items() if stays}
        kept -= self._read_otherwise(node, kept)
        self.reports.extend(report for report, function in self._pending if function not in kept)
        flow = self.ctx.flow
        assert flow is not None
        self._record_float64_returns(node, flow)
        for call, chain, scope in self._from_numpy:
            if flow.in_scope(scope, partial(self._moves_float64_array, call, chain)):
                what = f"`{patterns.dotted(call.func)}()` of a float64 NumPy array"
                fields = {"what": what, "support": _support_text(self.ctx.targets)}
                self.reports.append(self.report_here(call, chain=chain, **fields))

    def _record_float64_returns(self, module: cst.Module, flow: DeviceFlow) -> None:
        """Note the module-level functions that return a float64 NumPy array: another module's
        `torch.tensor(utils.get_sigmas(config))` makes a float64 tensor of it."""
        if self.ctx.project.complete or not self.ctx.module.name:
            return
        for function in module.body:
            if type(function) is cst.FunctionDef and any(
                flow.in_scope(scope, partial(self._numpy_float64, value)) for value, scope in flow.returns_of(function)
            ):
                self.record(project.FLOAT64_RETURN, f"{self.ctx.module.name}.{function.name.value}", UNPLACED)

    def _numpy_float64(self, value: cst.BaseExpression) -> bool:
        """Whether a returned value is made by NumPy, directly or through the name bound once to
        it, and in float64: NumPy's own arithmetic, not a tensor's (`float64_array` asks only
        where a NumPy array is expected)."""
        bound = self.ctx.assigned_value(value) if type(value) is cst.Name else None
        made = value if bound is None else bound
        return (
            type(made) is cst.Call
            and any(name.startswith("numpy.") for name in self.ctx.qualified_names(made.func))
            and float64_array(self.ctx, made)
        )

    def _moves_float64_array(self, call: cst.Call, chain: tuple[cst.CSTNode, ...]) -> bool:
        """Whether `torch.from_numpy(arr)` (`torch.tensor`, `torch.as_tensor`) is given a float64
        NumPy array and the tensor reaches a device before it is cast."""
        if not float64_array(self.ctx, call.args[0].value):
            return False
        device = patterns.keyword(call, "device")
        flow = self.ctx.flow
        assert flow is not None
        if device is not None and not flow.is_cpu(device.value):
            return True
        return not self._stays(call, chain, _Follow(strict=False), 0)

    def _check(self, node: cst.CSTNode, what: str) -> None:
        fields = {"what": what, "support": _support_text(self.ctx.targets)}
        follow = _Follow(function=self._module_function())
        if not self._stays_on_host(node, follow):
            self.report(node, **fields)
        elif follow.returned and follow.function is not None:
            name = follow.function.name.value
            self._pending.append((self.report_here(node, **fields), name))
            self._awaited.add(name)

    def _module_function(self) -> cst.FunctionDef | None:
        """The function the walk is in, where it is a plain module-level one that its callers in
        the module may be followed from: not nested, not decorated, its name bound once."""
        ancestors = self.ctx.ancestors
        function = ancestors[1] if len(ancestors) > 1 else None
        if not isinstance(function, cst.FunctionDef) or function.decorators:
            return None
        if any(isinstance(node, _SCOPES) for node in ancestors[2:]) or self.ctx.bindings(function.name) != 1:
            return None
        return function

    def _follow_call(self, call: cst.Call, func: cst.Name) -> None:
        """A call of awaited functions, by name or through a local name bound to them
        (`fn = linear_schedule` ... `fn(n)`): whether its result stays in host memory."""
        values = self.ctx.assigned_values(func)
        called = {value.value for value in values if isinstance(value, cst.Name)} if values else {func.value}
        called &= self._awaited
        if not called:
            return
        ancestors, flow = self.ctx.chain(call), self.ctx.flow
        assert flow is not None
        stays = not flow.default_device_set(ancestors, self.ctx.source) and self._stays(call, ancestors, _Follow(), 0)
        self._judged.add(id(call))
        for name in called:
            self._calls[name] = self._calls.get(name, True) and stays
        if values:
            self._aliases.setdefault(func.value, set()).update(called)

    def _read_otherwise(self, module: cst.Module, functions: set[str]) -> set[str]:
        """Those of `functions` that the module reads other than in the calls followed: passed or
        stored somewhere (`partial(f)`, `{"linear": f}`), or called before the walk knew them."""
        if not functions:
            return set()
        aliases = {alias: called & functions for alias, called in self._aliases.items() if called & functions}
        read_otherwise: set[str] = set()
        for name, parent in name_reads(module, frozenset(functions | aliases.keys())):
            if isinstance(parent, cst.Call) and parent.func is name and id(parent) in self._judged:
                continue
            if _binds_alias(parent, name, aliases):
                continue
            read_otherwise |= aliases.get(name.value, set()) | ({name.value} & functions)
        return read_otherwise

    def _stays_on_host(self, node: cst.CSTNode, follow: _Follow) -> bool:
        """Whether the float64 tensor `node` makes (a `.double()`, or the call it is the dtype
        of) is made in host memory and stays there until it is cast or read back."""
        flow = self.ctx.flow
        made = _made(node, self.ctx.chain(node))
        if flow is None or made is None:
            return False
        call, ancestors = made
        home = flow.home(call)
        if home is Home.DEFAULT and flow.default_device_set(ancestors, self.ctx.source):
            home = Home.UNKNOWN
        if home <= Home.UNKNOWN:
            return _read_into_numpy(call, ancestors)  # `.numpy()` only works in host memory
        follow.strict = home is Home.DEFAULT
        return self._stays(call, ancestors, follow, 0)

    def _stays(self, node: cst.CSTNode, ancestors: Sequence[cst.CSTNode], follow: _Follow, depth: int) -> bool:
        """Whether the float64 tensor `node` (below `ancestors`) stays in host memory until it is
        cast to another dtype or read back into Python or NumPy. `follow.strict` (made on the
        default device): every use must show it; otherwise (put in host memory on purpose) only
        a move to a device, or into a module's buffers or parameters, counts against it."""
        strict = follow.strict
        while ancestors:
            parent, above = ancestors[-1], ancestors[:-1]
            if isinstance(parent, cst.Attribute):
                call = above[-1] if above else None
                if isinstance(call, cst.Call) and call.func is parent:
                    fate = self._method_fate(call)
                    if fate is not None:
                        return fate
                    node, ancestors = call, above[:-1]
                    continue
                if parent.attr.value in _METADATA:
                    return True
            elif isinstance(parent, cst.Element) and above:
                parent, above = above[-1], above[:-1]  # the list, tuple or set holding it
            elif isinstance(parent, cst.Arg) and above:
                return self._argument_fate(parent, above, follow, depth)
            elif isinstance(parent, (cst.Assign, cst.AnnAssign)):
                return self._name_fate(parent, above, follow, depth)
            elif isinstance(parent, (cst.Expr, cst.Comparison, cst.ComparisonTarget, cst.FormattedStringExpression)):
                return True  # discarded, a boolean, or text
            elif isinstance(parent, cst.IfExp) and node is parent.test:
                return True
            elif isinstance(parent, cst.Return):
                return _returned(above, follow)
            elif not isinstance(parent, (cst.Subscript, cst.BinaryOperation, cst.UnaryOperation, cst.IfExp)):
                return not strict
            node, ancestors = parent, above
        return not strict

    def _method_fate(self, call: cst.Call) -> bool | None:
        """True where a method takes the tensor out of float64 or back to Python, False where it
        moves it to a device, None where the result is still a float64 tensor in host memory."""
        method = patterns.method_name(call)
        if method in _READBACKS or (method in _CASTS and not call.args):
            return True
        if method != "to":
            return False if method in _MOVES else None
        flow = self.ctx.flow
        assert flow is not None
        values = [arg.value for arg in call.args if arg.keyword is None or arg.keyword.value in ("dtype", "device")]
        dtypes = [value for value in values if flow.is_dtype(value)]
        if any(not self.ctx.qualified_names(value) & _FLOAT64 for value in dtypes):
            return True  # cast to another dtype
        return None if all(value in dtypes or flow.is_cpu(value) for value in values) else False

    def _argument_fate(self, arg: cst.Arg, ancestors: Sequence[cst.CSTNode], follow: _Follow, depth: int) -> bool:
        """The fate of a float64 tensor passed as `arg` to the call `ancestors[-1]`."""
        call = ancestors[-1]
        strict = follow.strict
        if not isinstance(call, cst.Call):
            return not strict  # a class's base or keyword
        names = self.ctx.qualified_names(call.func)
        if patterns.method_name(call) in _MODULE_STATE or names & _PARAMETERS:
            return False  # moves with the module
        if isinstance(call.func, cst.Name) and call.func.value in _HOST_BUILTINS and not names:
            return True
        if any(name.startswith(_HOST_LIBRARIES) for name in names):
            return True
        if names and all(name.startswith("torch.") for name in names):
            flow = self.ctx.flow
            assert flow is not None
            dtype, device = patterns.keyword(call, "dtype"), patterns.keyword(call, "device")
            if (
                dtype is not None
                and flow.is_dtype(dtype.value)
                and not self.ctx.qualified_names(dtype.value) & _FLOAT64
            ):
                return True
            if device is not None and not flow.is_cpu(device.value):
                return False
            return self._stays(call, ancestors[:-1], follow, depth)
        if isinstance(call.func, cst.Name) and not names:
            return self._local_call_fate(call, arg, ancestors, follow, depth)
        return not strict

    def _local_function(self, func: cst.Name, ancestors: Sequence[cst.CSTNode]) -> cst.Lambda | cst.FunctionDef | None:
        """What a called local name is: a lambda it is bound to once (`register_buffer = lambda
        name, val: ...`), or a plain `def` of that name in the body of the function calling it."""
        value = self.ctx.assigned_value(func)
        if isinstance(value, cst.Lambda):
            return value
        scope = next((node for node in reversed(ancestors) if isinstance(node, _SCOPES)), None)
        if value is not None or not isinstance(scope, cst.FunctionDef) or self.ctx.bindings(func) != 1:
            return None
        return next(
            (
                statement
                for statement in scope.body.body
                if isinstance(statement, cst.FunctionDef)
                and statement.name.value == func.value
                and not statement.decorators
            ),
            None,
        )

    def _local_call_fate(
        self, call: cst.Call, arg: cst.Arg, ancestors: Sequence[cst.CSTNode], follow: _Follow, depth: int
    ) -> bool:
        """The fate of a float64 tensor passed as `arg` to a call of a local name: where that is a
        local function, that of every use of the parameter it binds (`val.to(torch.float32)`
        casts it); an unknown function, an unclear or unused parameter tell nothing."""
        assert isinstance(call.func, cst.Name)
        function = self._local_function(call.func, ancestors)
        if function is None or (parameter := _parameter(function, call, arg)) is None:
            return not follow.strict
        uses = references(function, parameter)
        if not uses or depth >= _DEPTH:
            return not follow.strict
        key = (id(function), parameter)
        if key in follow.followed:
            return True  # its uses are being followed already
        follow.followed.add(key)
        return all(self._stays(use, path, follow, depth + 1) for use, path in uses)

    def _name_fate(
        self, statement: cst.Assign | cst.AnnAssign, ancestors: Sequence[cst.CSTNode], follow: _Follow, depth: int
    ) -> bool:
        """The fate of a float64 tensor bound to a name: that of every use of a function's local."""
        targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
        flow = self.ctx.flow
        name = targets[0]
        if flow is None or len(targets) != 1 or not isinstance(name, cst.Name) or depth >= _DEPTH:
            return not follow.strict
        uses = flow.uses(name, ancestors)
        if not uses:
            return uses is not None or not follow.strict  # never read, or not followed
        key = (id(uses[0][1][0]), name.value)  # the function, and the name
        if key in follow.followed:
            return True  # `a = a / a[0]`: the uses of `a` are being followed already
        follow.followed.add(key)
        return all(self._stays(use, path, follow, depth + 1) for use, path in uses)


def _returned(ancestors: Sequence[cst.CSTNode], follow: _Follow) -> bool:
    """A float64 tensor returned from the module-level function it is made in stays in host
    memory if every caller keeps it there, which the end of the module tells; a return from
    anywhere else lets it go (or, put in host memory on purpose, keeps it there)."""
    scope = next((node for node in reversed(ancestors) if isinstance(node, _SCOPES)), None)
    if not follow.strict or scope is None or scope is not follow.function:
        return not follow.strict
    follow.returned = True
    return True


def _parameter(function: cst.Lambda | cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> str | None:
    """The parameter of `function` that `arg` of `call` binds; None where that is unclear: a
    `*`/`**` in the call, or an argument that goes to `*args` or `**kwargs`."""
    if any(other.star for other in call.args):
        return None
    params = function.params
    if arg.keyword is not None:
        named = {param.name.value for param in (*params.params, *params.kwonly_params)}
        return arg.keyword.value if arg.keyword.value in named else None
    positional = [*params.posonly_params, *params.params]
    index = next(index for index, other in enumerate(call.args) if other is arg)
    return positional[index].name.value if index < len(positional) else None


def _binds_alias(parent: cst.CSTNode, name: cst.Name, aliases: dict[str, set[str]]) -> bool:
    """`fn = linear_schedule`, where the calls of `fn` were followed as calls of it."""
    if not isinstance(parent, cst.Assign) or parent.value is not name or len(parent.targets) != 1:
        return False
    target = parent.targets[0].target
    return isinstance(target, cst.Name) and name.value in aliases.get(target.value, set())


def _in_comparison(ancestors: Sequence[cst.CSTNode]) -> bool:
    """A dtype being tested (`x.dtype == torch.float64`, `dt in (torch.float64, ...)`) creates nothing."""
    for ancestor in reversed(ancestors):
        if isinstance(ancestor, (cst.Comparison, cst.ComparisonTarget)):
            return True
        if not isinstance(ancestor, (cst.Element, cst.Tuple, cst.List, cst.Set)):
            return False
    return False


def _made(node: cst.CSTNode, chain: Sequence[cst.CSTNode]) -> tuple[cst.Call, Sequence[cst.CSTNode]] | None:
    """The call that makes the float64 tensor, and the nodes above it: `node` itself (a
    `.double()`), the call it is the `dtype=` of (or the positional dtype of `.to()`), or the
    call of it (`torch.DoubleTensor([n])`)."""
    if isinstance(node, cst.Call):
        return node, chain
    if chain and isinstance(chain[-1], cst.Call) and chain[-1].func is node:
        return chain[-1], chain[:-1]
    if len(chain) < 2 or not isinstance(chain[-1], cst.Arg) or not isinstance(chain[-2], cst.Call):
        return None
    arg, call = chain[-1], chain[-2]
    keyword = arg.keyword.value if arg.keyword is not None else None
    if keyword == "dtype" or (keyword is None and patterns.method_name(call) == "to"):
        return call, chain[:-2]
    return None


def _read_into_numpy(call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> bool:
    """`t.double().numpy()`, `t.double().sum().numpy()`: `.numpy()` raises on a device tensor,
    so a chain that reaches it without moving the tensor ran in host memory throughout."""
    while len(ancestors) >= 2:
        attribute, outer = ancestors[-1], ancestors[-2]
        if not (isinstance(attribute, cst.Attribute) and isinstance(outer, cst.Call) and outer.func is attribute):
            return False
        method = attribute.attr.value
        if method == "numpy":
            return True
        if method in _MOVES or method == "cpu":
            return False
        ancestors = ancestors[:-2]
    return False


def _support_text(selected: tuple[str, ...]) -> str:
    unsupported = [t for t in selected if target_data.get(t).float64 == "unsupported"]
    slow = [t for t in selected if target_data.get(t).float64 == "slow"]
    parts = []
    if unsupported:
        parts.append(f"which {'/'.join(unsupported)} cannot create")
    if slow:
        parts.append(f"which {'/'.join(slow)} {verb(slow, 'emulates', 'emulate')} slowly")
    return " and ".join(parts) or "which the target does not need"
