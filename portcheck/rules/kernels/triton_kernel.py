from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import libcst as cst

from portcheck import fallbacks, kernels, patterns, project
from portcheck.project import Project
from portcheck.rule import FileContext, Invalid, Rule, Valid
from portcheck.wording import counted

_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit"})
_JIT = frozenset({"triton.jit", "triton.runtime.jit.jit"})
_TRITON_OP = frozenset({"torch.library.triton_op", "torch._library.triton.triton_op"})
_WRAP = frozenset({"torch.library.wrap_triton", "torch._library.triton.wrap_triton"})


class TritonKernel(Rule):
    """## What it does
    Reports Triton kernels, at the `@triton.jit` line: functions decorated with `@triton.jit`,
    `@triton.autotune` or `@triton.heuristics`, and `torch.library.triton_op` custom ops (at
    the decorator). It also records where each kernel is launched (`kernel[grid](...)`,
    `wrap_triton(kernel)[grid](...)`) for `portcheck kernels`, and which of the module's
    functions launch one whenever they are called, for cuda-only-package-call (PC707).

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
            lines=[4],
        ),
        Invalid(
            "import triton as T\n@T.autotune(configs=[], key=['n'])\n@T.jit\ndef mm_kernel(a, n):\n    pass\n",
            lines=[3],
        ),
        Invalid("from triton import jit\n@jit\ndef k(x):\n    pass\n", lines=[2]),
        Invalid(
            "import torch\nfrom torch.library import triton_op as top\n@top('mylib::add', mutates_args=())\n"
            "def add(x):\n    return x\n",
            lines=[3],
        ),
        Invalid(
            "from torch import library\n@library.triton_op('mylib::neg', mutates_args=())\ndef neg(x):\n    return x\n",
            lines=[2],
        ),
        Invalid(
            "import torch as T\n@T.library.triton_op('mylib::mul', mutates_args=())\ndef mul(x):\n    return x\n",
            lines=[2],
        ),
        Invalid(
            "import torch.library\nimport triton\n@triton.heuristics({'B': lambda a: 8})\n@triton.jit\ndef k(x):\n    pass\n",
            lines=[4],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._module = ctx.module.name
        self._top: dict[str, cst.FunctionDef | cst.ClassDef] = {}  # the module's functions and classes
        self._kernels: set[str] = set()  # the Triton kernels the module defines, by name
        # what each of the module's functions and classes launches, and which of the others
        # it uses, where no PyTorch path stands beside (`leave_Module` records the launchers)
        self._launches: dict[str, set[str]] = {}
        self._uses: dict[str, set[str]] = {}

    def visit_Module(self, node: cst.Module) -> None:
        self._top = {s.name.value: s for s in node.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """Launch sites in files that import kernels from elsewhere, for the inventory."""
        return kernel_names(known)

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
        self._kernels.add(node.name.value)
        self.record(project.KERNEL, qualified, node, kind=kernels.TRITON, loc=str(length))
        if is_op:
            op = _op_name(node)
            if op:
                self.record(project.OP_IMPL, op, node, device="cuda")
        self.report(
            _marking(node, names_of=self.ctx.qualified_names),
            kernel=node.name.value,
            size=counted(length, "line"),
            port=kernels.port_hint(kernels.TRITON, self.ctx.targets),
        )

    def visit_Call(self, node: cst.Call) -> None:
        name = launched_kernel(self.ctx, node)
        if name:
            evidence = fallbacks.fallback_evidence(self.ctx.ancestors)
            self.record(project.CALL, name, node, fallback=evidence)
            owner = self._owner()
            if owner and not evidence:
                self._launches.setdefault(owner, set()).add(name)

    def visit_Name(self, node: cst.Name) -> None:
        owner = self._owner() if node.value in self._top else ""
        if owner and owner != node.value and not fallbacks.fallback_evidence(self.ctx.ancestors):
            self._uses.setdefault(owner, set()).add(node.value)

    def _owner(self) -> str:
        return top_owner(self.ctx.ancestors, self._top)

    def leave_Module(self, node: cst.Module) -> None:
        """Record the module's launchers: the functions, and `apply` of the classes, that reach
        a launch through the module's own functions and classes (mamba's `layer_norm_fn` ->
        `LayerNormFn.apply` -> `_layer_norm_fwd` -> `_layer_norm_fwd_1pass_kernel[grid](...)`).
        A launched name from another module counts if the project knows it as a kernel."""
        if self.ctx.project.complete:
            return
        for name, defined in self._top.items():
            launched = sorted(
                kernel
                for used in reachable(name, self._uses)
                for kernel in self._launches.get(used, ())
                if kernel.rpartition(".")[0] != self._module or kernel.rpartition(".")[2] in self._kernels
            )
            if launched and name not in self._kernels:
                function = name if isinstance(defined, cst.FunctionDef) else f"{name}.apply"
                qualified = f"{self._module}.{function}" if self._module else function
                self.record(project.LAUNCHER, qualified, defined, kernels=",".join(launched))


def kernel_names(known: Project) -> tuple[bytes, ...]:
    """The project's Triton kernels by their own names: what a file that launches one mentions."""
    return tuple(sorted({name.rpartition(".")[2].encode() for name in known.kernels}))


def launched_kernel(ctx: FileContext, node: cst.Call) -> str:
    """The qualified name of what `node` launches, `kernel[grid](...)` or
    `wrap_triton(kernel)[grid](...)`; empty for any other call. Whether it is a Triton kernel
    is the project's to say (its kernels are known once every file has been read)."""
    if not isinstance(node.func, cst.Subscript):
        return ""
    launched = node.func.value
    if isinstance(launched, cst.Call) and ctx.qualified_names(launched.func) & _WRAP and launched.args:
        launched = launched.args[0].value
    resolved = sorted(ctx.qualified_names(launched))
    if resolved:
        return ctx.module.absolute(resolved[0])
    resolver = ctx.resolver
    if isinstance(launched, cst.Name) and resolver is not None and resolver.scope_of(launched.value) is resolver.module:
        return f"{ctx.module.name}.{launched.value}"  # the module's own (not a parameter or local of its name)
    return ""


def _marking(node: cst.FunctionDef, names_of: Callable[[cst.CSTNode], frozenset[str]]) -> cst.CSTNode:
    """Where the kernel is reported: its `@triton.jit` decorator (what makes it a kernel, and
    where one reads it as such), else its first Triton decorator (`@triton_op(...)`)."""
    marks = [
        d.decorator
        for d in node.decorators
        if names_of(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) & (_DECORATORS | _TRITON_OP)
    ]
    jit = [d for d in marks if names_of(d.func if isinstance(d, cst.Call) else d) & _JIT]
    return (jit or marks or [node.name])[0]


def top_owner(ancestors: Sequence[cst.CSTNode], top: Mapping[str, cst.FunctionDef | cst.ClassDef]) -> str:
    """The name of the module-level function or class (one of `top`) the walk is in; empty
    at module level."""
    owner = ancestors[1] if len(ancestors) > 1 else None
    if not isinstance(owner, (cst.FunctionDef, cst.ClassDef)) or top.get(owner.name.value) is not owner:
        return ""
    return owner.name.value


def reachable(start: str, uses: dict[str, set[str]]) -> set[str]:
    """`start` and what it uses, directly or through what those use."""
    seen, stack = {start}, [start]
    while stack:
        for used in uses.get(stack.pop(), ()):
            if used not in seen:
                seen.add(used)
                stack.append(used)
    return seen


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
