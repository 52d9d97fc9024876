from __future__ import annotations

import libcst as cst

from portcheck import fallbacks, kernels, patterns, project
from portcheck.project import Project
from portcheck.rule import FileContext, Invalid, Rule, Valid
from portcheck.wording import counted

_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit"})
_TRITON_OP = frozenset({"torch.library.triton_op", "torch._library.triton.triton_op"})
_WRAP = frozenset({"torch.library.wrap_triton", "torch._library.triton.wrap_triton"})


class TritonKernel(Rule):
    """## What it does
    Reports Triton kernels: functions decorated with `@triton.jit`, `@triton.autotune` or
    `@triton.heuristics`, and `torch.library.triton_op` custom ops. It also records where each
    kernel is launched (`kernel[grid](...)`, `wrap_triton(kernel)[grid](...)`) for
    `portcheck kernels`.

    ## Why is this bad?
    Triton compiles for NVIDIA, AMD and Intel GPUs only. TorchTPU reports no Triton support,
    TorchNeuron does not use Inductor at all, and neither MPS nor Gaudi runs Triton: on those
    targets every launch fails, and the kernel must be rewritten.

    ## Example
    ```python
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        ...

    add_kernel[grid](x, y, out, n, BLOCK=1024)
    ```

    ## Use instead
    Keep a pure-PyTorch reference and branch on the device, then port the hot kernels: on TPU
    to Pallas through `torch.tpu.pallas.jax_op` (or a Tokamax kernel; Helion has an experimental
    Pallas backend); on Trainium to NKI (`@nki.jit`, registered with `@nki_op`); on MPS to Metal
    with `torch.mps.compile_shader`.

    ## Targets
    An error where Triton does not run (tpu, neuron, xla, mps, hpu, cpu); off on xpu, rocm and
    npu (Triton-Ascend), where Triton has a backend.

    ## Fix safety
    No automatic fix: a kernel is rewritten by a person.
    """

    code = "PC601"
    name = "triton-kernel"
    message = "Triton kernel `{kernel}` ({size}) does not run on this target"
    hint = "port: {port}"
    severity = kernels.severity(kernels.TRITON)
    triggers = (b"triton",)

    VALID = [
        Valid("import torch\ndef add(x, y):\n    return x + y\n"),
        Valid("def jit(fn):\n    return fn\n@jit\ndef add_kernel(x):\n    return x\n"),
        Valid("def build(torch):\n    return torch.library.triton_op('ns::op', mutates_args=())\n"),
        Valid("import triton\n@triton.jit\ndef k(x):\n    pass\n", options={"targets": ["xpu", "rocm"]}),
    ]
    INVALID = [
        Invalid(
            "import triton\nimport triton.language as tl\n\n@triton.jit\ndef add_kernel(x_ptr, n):\n    pass\n",
            lines=[5],
        ),
        Invalid(
            "import triton as T\n@T.autotune(configs=[], key=['n'])\n@T.jit\ndef mm_kernel(a, n):\n    pass\n",
            lines=[4],
        ),
        Invalid("from triton import jit\n@jit\ndef k(x):\n    pass\n", lines=[3]),
        Invalid(
            "import torch\nfrom torch.library import triton_op as top\n@top('mylib::add', mutates_args=())\n"
            "def add(x):\n    return x\n",
            lines=[4],
        ),
        Invalid(
            "from torch import library\n@library.triton_op('mylib::neg', mutates_args=())\ndef neg(x):\n    return x\n",
            lines=[3],
        ),
        Invalid(
            "import torch as T\n@T.library.triton_op('mylib::mul', mutates_args=())\ndef mul(x):\n    return x\n",
            lines=[3],
        ),
        Invalid(
            "import torch.library\nimport triton\n@triton.heuristics({'B': lambda a: 8})\n@triton.jit\ndef k(x):\n    pass\n",
            lines=[5],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._module = ctx.module.name

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """Launch sites in files that import kernels from elsewhere, for the inventory."""
        return tuple(sorted({name.rpartition(".")[2].encode() for name in known.kernels}))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.ctx.project.complete:
            return
        decorators = [d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator for d in node.decorators]
        names = frozenset().union(*(self.ctx.qualified_names(d) for d in decorators)) if decorators else frozenset()
        is_op = bool(names & _TRITON_OP)
        qualified = f"{self._module}.{node.name.value}" if self._module else node.name.value
        if not (names & _DECORATORS or is_op):
            if fallbacks.looks_like_reference(node.name.value):
                self.record(project.REFERENCE, qualified, node)
            return
        length = _line_count(node)
        self.record(project.KERNEL, qualified, node, kind=kernels.TRITON, loc=str(length))
        if is_op:
            op = _op_name(node)
            if op:
                self.record(project.OP_IMPL, op, node, device="cuda")
        self.report(
            node.name,
            kernel=node.name.value,
            size=counted(length, "line"),
            port=kernels.port_hint(kernels.TRITON, self.ctx.targets),
        )

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, cst.Subscript):
            return
        launched = node.func.value
        if isinstance(launched, cst.Call) and self.ctx.qualified_names(launched.func) & _WRAP and launched.args:
            launched = launched.args[0].value
        name = self._callee(launched)
        if name:
            evidence = fallbacks.fallback_evidence(self.ctx.ancestors)
            self.record(project.CALL, name, node, fallback=evidence)

    def _callee(self, node: cst.BaseExpression) -> str:
        resolved = sorted(self.ctx.qualified_names(node))
        if resolved:
            return self.ctx.module.absolute(resolved[0])
        if isinstance(node, cst.Name) and self._module:
            return f"{self._module}.{node.value}"
        return ""


def _line_count(node: cst.FunctionDef) -> int:
    return len(cst.Module(body=[node]).code.strip().splitlines())


def _op_name(node: cst.FunctionDef) -> str:
    for decorator in node.decorators:
        if isinstance(decorator.decorator, cst.Call):
            first = patterns.positional(decorator.decorator, 0)
            value = patterns.string_value(first.value) if first else None
            if value and "::" in value:
                return value
    return ""
