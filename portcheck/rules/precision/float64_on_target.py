from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.flow import Home
from portcheck.rule import ERROR, OFF, WARNING, Invalid, Rule, Valid
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
_DEPTH = 6  # how many names a value is followed through


class Float64OnTarget(Rule):
    """## What it does
    Reports float64 tensors: `torch.float64` / `torch.double` (and complex128),
    `.double()` calls, `torch.DoubleTensor`, and `dtype="float64"` strings, except float64 that
    demonstrably stays in host memory (portcheck.flow follows it):
    - made there on purpose (`x.cpu().double()`, `device="cpu"`, `torch.from_numpy`), unless it
      is then moved to a device or into a module's buffers or parameters;
    - made by a factory on the default device (`torch.linspace(..., dtype=torch.float64)`, in a
      module that never sets another), when every use of it, through a function's local names
      and host computations, casts it to another dtype (`.float()`, `.to(torch.float32)`) or
      reads it back (`.item()`, `.tolist()`, `.numpy()`, `print`, NumPy) before it goes anywhere;
    - cast where `.numpy()` reads it (`t.double().numpy()`: `.numpy()` only works in host memory).

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
    triggers = (b"float64", b"double", b"Double", b"complex128")
    watched_names = _FLOAT64_NAMES

    VALID = [
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
        Valid(
            "import torch\ndef log(x):\n    t = torch.arange(10, dtype=torch.float64)\n    s = x.cpu()\n"
            "    print(t.sum(), f'{s.double().mean()}', t.tolist())\n"
        ),
    ]
    INVALID = [
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

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if not _in_comparison(self.ctx.ancestors):
            self._check(node, f"`{qualified_name}`")

    def visit_Call(self, node: cst.Call) -> None:
        if patterns.method_name(node) == "double" and not node.args:
            if not self.ctx.qualified_names(node.func):
                self._check(node, "`.double()`")
        dtype = patterns.keyword(node, "dtype")
        if dtype is not None and patterns.string_value(dtype.value) in ("float64", "double", "torch.float64"):
            self._check(dtype.value, 'dtype="float64"')

    def _check(self, node: cst.CSTNode, what: str) -> None:
        if not self._stays_on_host(node):
            self.report(node, what=what, support=_support_text(self.ctx.targets))

    def _stays_on_host(self, node: cst.CSTNode) -> bool:
        """Whether the float64 tensor `node` makes (a `.double()`, or the call it is the dtype
        of) is made in host memory and stays there until it is cast or read back."""
        flow = self.ctx.flow
        made = _made(node, self.ctx.chain(node))
        if flow is None or made is None:
            return False
        call, ancestors = made
        home = flow.home(call)
        if home is Home.DEFAULT and self._default_device_set(ancestors):
            home = Home.UNKNOWN
        if home is Home.UNKNOWN:
            return _read_into_numpy(call, ancestors)  # `.numpy()` only works in host memory
        return self._stays(call, ancestors, home is Home.DEFAULT, 0)

    def _default_device_set(self, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether factories may make tensors elsewhere than in host memory: under
        `with torch.device(...)`, or in a module that mentions `set_default_device`."""
        for node in ancestors:
            if isinstance(node, cst.With) and any(
                isinstance(item.item, cst.Call) and "torch.device" in self.ctx.qualified_names(item.item.func)
                for item in node.items
            ):
                return True
        return b"set_default_device" in self.ctx.source  # anywhere: it may run before or after

    def _stays(self, node: cst.CSTNode, ancestors: Sequence[cst.CSTNode], strict: bool, depth: int) -> bool:
        """Whether the float64 tensor `node` (below `ancestors`) stays in host memory until it is
        cast to another dtype or read back into Python or NumPy. `strict` (made on the default
        device): every use must show it; otherwise (put in host memory on purpose) only a move to
        a device, or into a module's buffers or parameters, counts against it."""
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
                return self._argument_fate(above, strict, depth)
            elif isinstance(parent, (cst.Assign, cst.AnnAssign)):
                return self._name_fate(parent, above, strict, depth)
            elif isinstance(parent, (cst.Expr, cst.Comparison, cst.ComparisonTarget, cst.FormattedStringExpression)):
                return True  # discarded, a boolean, or text
            elif isinstance(parent, cst.IfExp) and node is parent.test:
                return True
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

    def _argument_fate(self, ancestors: Sequence[cst.CSTNode], strict: bool, depth: int) -> bool:
        """The fate of a float64 tensor passed to the call `ancestors[-1]`."""
        call = ancestors[-1]
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
            return self._stays(call, ancestors[:-1], strict, depth)
        return not strict

    def _name_fate(
        self, statement: cst.Assign | cst.AnnAssign, ancestors: Sequence[cst.CSTNode], strict: bool, depth: int
    ) -> bool:
        """The fate of a float64 tensor bound to a name: that of every use of a function's local."""
        targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
        flow = self.ctx.flow
        name = targets[0]
        if flow is None or len(targets) != 1 or not isinstance(name, cst.Name) or depth >= _DEPTH:
            return not strict
        uses = flow.uses(name, ancestors)
        if uses is None:
            return not strict
        return all(self._stays(use, path, strict, depth + 1) for use, path in uses)


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
    `.double()`), or the call it is the `dtype=` of (or the positional dtype of `.to()`)."""
    if isinstance(node, cst.Call):
        return node, chain
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
