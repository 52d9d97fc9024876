from __future__ import annotations

import libcst as cst

from portcheck import flow, kernels, patterns
from portcheck.resolve import Scope, function_scope
from portcheck.rule import FileContext, Invalid, Rule, Valid
from portcheck.walk import descendants


class CpuCheckCudaPath(Rule):
    """## What it does
    Reports checks of a device against `"cpu"` (`x.device.type == "cpu"`, `device != "cpu"`)
    that choose between a PyTorch path for the CPU and a CUDA-only path for every other
    device: where the other branch calls a kernel of a CUDA extension the module builds
    (`fused.fused_bias_act(...)` after `fused = load("fused", sources=[..., "k.cu"])`), or
    runs one through the module's own functions or autograd Functions
    (`FusedLeakyReLUFunction.apply(...)`).

    ## Why is this bad?
    "Not the CPU" meant "CUDA" when the code was written. On a TPU or Trainium the check is
    false too, so the program takes the CUDA kernel's path there and fails, while the
    portable PyTorch path it already has stays reserved for the CPU (rosinality's StyleGAN2
    `fused_leaky_relu` and `upfirdn2d`, copied into many repositories).

    ## Example
    ```python
    def fused_leaky_relu(x, bias):
        if x.device.type == "cpu":
            return F.leaky_relu(x + bias, 0.2) * 2**0.5
        else:
            return FusedLeakyReLUFunction.apply(x, bias)
    ```

    ## Use instead
    ```python
        if x.device.type != "cuda":  # the PyTorch path everywhere but CUDA
            return F.leaky_relu(x + bias, 0.2) * 2**0.5
    ```

    ## Targets
    An error where the kernel must be rewritten (every target but ROCm, where the extension
    is hipified at build time: a warning there).

    ## Fix safety
    No automatic fix: which path a target should take is a person's decision.
    """

    code = "PC111"
    name = "cpu-check-cuda-path"
    message = 'compares a device with "cpu" and sends every other device, the target too, to CUDA-only code (`{via}`)'
    hint = 'test for CUDA instead (`x.device.type == "cuda"`), so that other devices take the PyTorch path'
    severity = kernels.severity(kernels.EXTENSION)
    triggers = (b"cpu",)

    VALID = [
        Valid(  # both paths portable
            "import torch\nimport torch.nn.functional as F\ndef act(x):\n    if x.device.type == 'cpu':\n"
            "        return F.leaky_relu(x)\n    return F.gelu(x)\n"
        ),
        Valid(  # the check asks for CUDA: other devices take the PyTorch path
            "import torch as T\nfrom torch.utils.cpp_extension import load\nfused = load('fused', sources=['k.cu'])\n"
            "def act(x):\n    if x.device.type == 'cuda':\n        return fused.act(x)\n    return T.relu(x)\n"
        ),
        Valid(  # a parameter of the extension's name
            "from torch import nn\nfrom torch.utils.cpp_extension import load as build\nfused = build('fused', ['k.cu'])\n"
            "def act(x, torch, fused):\n    if x.device.type != 'cpu':\n        return fused.act(x)\n    return x\n"
        ),
    ]
    INVALID = [
        Invalid(  # rosinality's stylegan2: op/fused_act.py
            "import torch\nfrom torch.nn import functional as F\nfrom torch.autograd import Function\n"
            "from torch.utils.cpp_extension import load\nfused = load('fused', sources=['fused.cpp', 'kernel.cu'])\n"
            "class FusedLeakyReLUFunction(Function):\n    @staticmethod\n    def forward(ctx, x, bias):\n"
            "        return fused.fused_bias_act(x, bias, 3, 1)\n"
            "def fused_leaky_relu(x, bias):\n    if x.device.type == 'cpu':\n        return F.leaky_relu(x + bias)\n"
            "    else:\n        return FusedLeakyReLUFunction.apply(x, bias)\n",
            lines=[11],
            message="`FusedLeakyReLUFunction.apply`",
        ),
        Invalid(  # BasicSR: built where asked (BASICSR_JIT), else its prebuilt copy imported
            "import os\nimport torch\nif os.getenv('JIT') == 'True':\n    from torch.utils.cpp_extension import load\n"
            "    up_ext = load('up', sources=['up.cpp', 'up_kernel.cu'])\nelse:\n    try:\n        from . import up_ext\n"
            "    except ImportError:\n        pass\ndef up(x, k):\n    if x.device.type == 'cpu':\n        return x * k\n"
            "    else:\n        return up_ext.up(x, k)\n",
            lines=[12],
            message="`up_ext.up`",
        ),
        Invalid(
            "import torch.utils.cpp_extension as ext\nup = ext.load('up', ['up.cu'])\n"
            "def upfirdn(x, k):\n    if x.device.type != 'cpu':\n        return up.run(x, k)\n    return native(x, k)\n",
            lines=[4],
        ),
        Invalid(
            "from torch.utils.cpp_extension import load\nimport torch\nk = load('k', ['k.cu'])\ndef helper(x):\n"
            "    return k.go(x)\ndef run(x):\n    if str(x.device) == 'cpu':\n        return x\n    else:\n"
            "        return helper(x)\n",
            lines=[7],
            message="`helper`",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._kernels: frozenset[str] = frozenset()  # module names bound to a loaded extension
        self._cuda_callables: frozenset[str] = frozenset()  # the module's functions and classes calling one

    def visit_Module(self, node: cst.Module) -> None:
        self._kernels = frozenset(  # also where another branch imports the prebuilt extension instead (BasicSR)
            name
            for name, values in self.ctx.resolver.module.values.items()
            if any(
                type(value) is cst.Call and self.ctx.qualified_names(value.func) & kernels.EXTENSION_LOADERS
                for value in values
            )
        )
        if self._kernels:
            module = self.ctx.resolver.module
            self._cuda_callables = frozenset(
                each.name.value
                for each in node.body
                if type(each) in (cst.FunctionDef, cst.ClassDef) and self._calls_kernel(each, _bound_in(each, module))
            )

    def _calls_kernel(self, root: cst.CSTNode, shadowed: frozenset[str]) -> str | None:
        """The first call under `root` of a loaded extension's function (`fused.act`), or of
        one of the module's functions or classes that make one; not through a name the
        function binds itself (`shadowed`)."""
        kernels_here = self._kernels - shadowed
        for call in descendants(root):
            if type(call) is not cst.Call:
                continue
            func = call.func
            if type(func) is cst.Attribute and type(func.value) is cst.Name:
                if func.value.value in kernels_here:
                    return patterns.dotted(func)
                if func.attr.value == "apply" and func.value.value in self._cuda_callables:
                    return patterns.dotted(func)
            if type(func) is cst.Name and func.value in self._cuda_callables:
                return func.value
        return None

    def visit_If(self, node: cst.If) -> None:
        if not self._kernels:
            return
        test = node.test
        if type(test) is not cst.Comparison or len(test.comparisons) != 1:
            return
        operator, compared = test.comparisons[0].operator, test.comparisons[0].comparator
        sides = (test.left, compared)
        if not any(patterns.string_value(side) == "cpu" for side in sides):
            return
        if not any(patterns.is_device_like(side) for side in sides) or type(operator) not in (cst.Equal, cst.NotEqual):
            return
        other = node.body if type(operator) is cst.NotEqual else node.orelse
        function = flow.enclosing_function(self.ctx.ancestors)
        bound = _bound_in(function, self.ctx.resolver.module) if function else frozenset()
        via = self._calls_kernel(other, bound) if other is not None else None
        if via is not None:
            self.report(test, via=via)


def _bound_in(definition: cst.FunctionDef | cst.ClassDef, module: Scope) -> frozenset[str]:
    """The names a function binds itself (its parameters, locals, local imports); none for a class."""
    return frozenset(function_scope(definition, module).bound) if type(definition) is cst.FunctionDef else frozenset()
