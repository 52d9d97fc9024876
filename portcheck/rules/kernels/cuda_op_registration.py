from __future__ import annotations

import re

import libcst as cst

from portcheck import ctext, filekinds, patterns, project
from portcheck.rule import OFF, WARNING, FileContext, Invalid, Rule, Valid, per_target

_LIBRARY = frozenset({"torch.library.Library"})
_IMPL = frozenset({"torch.library.impl", "torch.library.register_kernel"})
_CUSTOM_OP = frozenset({"torch.library.custom_op", "torch._library.custom_ops.custom_op"})
_CPP_BLOCK = re.compile(r"\bTORCH_LIBRARY(_IMPL|_FRAGMENT)?\s*\(\s*(\w+)\s*,\s*(?:(\w+)\s*,\s*)?\w+\s*\)\s*\{")
_CPP_IMPL = re.compile(r'\.impl\(\s*"([\w.:]+)"')
_CPP_DEF = re.compile(r'\.def\(\s*"([\w.:]+)[^"]*"\s*(,)?')


def _device(value: str) -> str:
    return value.strip().lower().replace("dispatchkey::", "")


def _op(namespace: str, schema: str) -> str:
    name = schema.split("(", 1)[0].split(".", 1)[0]
    return name if "::" in name else f"{namespace}::{name}"


class CudaOpRegistration(Rule):
    """## What it does
    Reports custom operators registered with a CUDA implementation: Python
    `torch.library.Library(...).impl("op", fn, "CUDA")`, `@torch.library.impl("ns::op", "cuda")`,
    `@torch.library.custom_op("ns::op", device_types="cuda")`, `@op.register_kernel("cuda")`, and
    C++ `TORCH_LIBRARY_IMPL(ns, CUDA, m) { m.impl("op", ...); }`. It records every
    implementation, for any device, so that calls of ops registered for CUDA alone are found
    (PC605).

    ## Why is this bad?
    The CUDA implementation does not exist on other devices: there the op falls back to another
    registered implementation if there is one (CPU, composite), and otherwise fails with
    "Could not run 'ns::op' with arguments from the 'PrivateUse1' backend".

    ## Example
    ```python
    @torch.library.custom_op("mylib::fused_gelu", mutates_args=(), device_types="cuda")
    def fused_gelu(x: torch.Tensor) -> torch.Tensor:
        return _C.fused_gelu(x)
    ```

    ## Use instead
    Register a device-independent implementation too (plain PyTorch, which `torch.compile` can
    fuse), and the target's kernel where it pays off: `@torch.library.custom_op(...)` without
    `device_types`, or `register_kernel("tpu")` with a Pallas kernel through
    `torch.tpu.pallas.jax_op`, or an NKI kernel with `@nki_op` on Trainium.

    ## Targets
    A warning on every target but ROCm: the op may still run through another implementation;
    calls of ops that have none are errors (PC605).

    ## Fix safety
    No automatic fix: a kernel is written by a person.
    """

    code = "PC604"
    name = "cuda-op-registration"
    message = "`{op}` is registered with a CUDA implementation, which does not run on this target"
    hint = "register a device-independent (PyTorch) implementation too, or the target's own kernel"
    severity = per_target(WARNING, rocm=OFF)
    file_kinds = (filekinds.PYTHON, filekinds.CUDA, filekinds.CPP)
    triggers = (b"library", b"TORCH_LIBRARY", b"custom_op", b"register_kernel")

    VALID = [
        Valid("import torch\n@torch.library.custom_op('mylib::f', mutates_args=())\ndef f(x):\n    return x\n"),
        Valid("import torch\nlib = torch.library.Library('mylib', 'IMPL')\nlib.impl('f', f_cpu, 'CPU')\n"),
        Valid("def f(torch):\n    torch.library.impl('mylib::f', 'cuda')\n"),
        Valid('TORCH_LIBRARY_IMPL(mylib, CPU, m) {\n  m.impl("f", &f_cpu);\n}\n', path="csrc/ops.cpp"),
    ]
    INVALID = [
        Invalid(
            "import torch\n@torch.library.custom_op('mylib::gelu', mutates_args=(), device_types='cuda')\n"
            "def gelu(x):\n    return x\n",
            lines=[2],
            message="mylib::gelu",
        ),
        Invalid(
            "import torch as T\nlib = T.library.Library('mylib', 'IMPL')\nlib.impl('gelu', gelu_cuda, 'CUDA')\n",
            lines=[3],
        ),
        Invalid(
            "from torch import library\n@library.impl('mylib::gelu', 'cuda')\ndef gelu_cuda(x):\n    return x\n",
            lines=[2],
        ),
        Invalid(
            "from torch.library import custom_op as op\nimport torch.cuda\n@op('mylib::g', mutates_args=())\ndef g(x):\n    return x\n"
            "@g.register_kernel('cuda')\ndef g_cuda(x):\n    return x\n",
            lines=[6],
        ),
        Invalid(
            'TORCH_LIBRARY_IMPL(mylib, CUDA, m) {\n  m.impl("gelu", &gelu_cuda);\n  m.impl("silu", &silu_cuda);\n}\n',
            lines=[2, 3],
            path="csrc/ops.cu",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._libraries: dict[str, str] = {}  # local name -> namespace
        self._ops_by_function: dict[str, str] = {}  # decorated function -> the op it defines

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and self.ctx.qualified_names(node.value.func) & _LIBRARY:
            namespace = patterns.positional(node.value, 0)
            value = patterns.string_value(namespace.value) if namespace else None
            for target in node.targets:
                if value and isinstance(target.target, cst.Name):
                    self._libraries[target.target.value] = value

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        func = node.func
        if names & _CUSTOM_OP:
            self._custom_op(node)
        elif names & _IMPL:
            op, device = patterns.positional(node, 0), patterns.argument(node, 1, "types")
            self._register(node, patterns.string_value(op.value) if op else None, device)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            if func.attr.value == "impl" and func.value.value in self._libraries:
                op = patterns.positional(node, 0)
                name = patterns.string_value(op.value) if op else None
                if name:
                    self._register(
                        node, _op(self._libraries[func.value.value], name), patterns.argument(node, 2, "dispatch_key")
                    )
            elif func.attr.value == "register_kernel":
                self._register(node, self._decorated_op(func.value), patterns.argument(node, 0, "device_types"))

    def _custom_op(self, node: cst.Call) -> None:
        op = patterns.positional(node, 0)
        name = patterns.string_value(op.value) if op else None
        devices = patterns.keyword(node, "device_types")
        if name is None:
            return
        if devices is None or (isinstance(devices.value, cst.Name) and devices.value.value == "None"):
            self.record(project.OP_IMPL, name, node, device="default")
        else:
            self._register(node, name, devices)

    def _register(self, node: cst.Call, op: str | None, device: cst.Arg | None) -> None:
        if not op or device is None:
            return
        values = (
            [patterns.string_value(e.value) for e in device.value.elements]
            if isinstance(device.value, (cst.List, cst.Tuple))
            else [patterns.string_value(device.value)]
        )
        for value in filter(None, values):
            self.record(project.OP_IMPL, op, node, device=_device(value))
            if _device(value) == "cuda":
                self.report(node, op=op)

    def _decorated_op(self, name: cst.Name) -> str | None:
        """`g` in `@g.register_kernel(...)` stands for the op its custom_op decorator made."""
        return self._ops_by_function.get(name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        for decorator in node.decorators:
            call = decorator.decorator
            if isinstance(call, cst.Call) and self.ctx.qualified_names(call.func) & _CUSTOM_OP:
                op = patterns.positional(call, 0)
                value = patterns.string_value(op.value) if op else None
                if value:
                    self._ops_by_function[node.name.value] = value

    def check_text(self, text: str) -> None:
        code = ctext.without_comments(text)
        where = ctext.Lines(text)
        for block in _CPP_BLOCK.finditer(code):
            kind, namespace, key = block.group(1), block.group(2), block.group(3)
            body = code[block.end() : ctext.matching_brace(code, block.end() - 1)]
            if kind == "_IMPL" and key:
                for impl in _CPP_IMPL.finditer(body):
                    self._cpp(where, block.end() + impl.start(), _op(namespace, impl.group(1)), _device(key))
            elif kind != "_IMPL":
                for definition in _CPP_DEF.finditer(body):
                    if definition.group(2):  # def with an implementation: composite, any device
                        self._cpp(
                            where, block.end() + definition.start(), _op(namespace, definition.group(1)), "default"
                        )

    def _cpp(self, where: ctext.Lines, offset: int, op: str, device: str) -> None:
        line, column = where.at(offset)
        self.record(project.OP_IMPL, op, (line, line), device=device)
        if device == "cuda":
            self.report_span((line, column, line, column + 1), op=op)
