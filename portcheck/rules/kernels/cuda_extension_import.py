from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck import fallbacks, kernels, patterns, project
from portcheck.project import Project
from portcheck.rule import FileContext, Invalid, Report, Rule, Valid, at_most_warning
from portcheck.rules.kernels import built_module
from portcheck.walk import descendants


class CudaExtensionImport(Rule):
    """## What it does
    Reports imports of a compiled extension module that this repository builds with
    `CUDAExtension` (or `cpp_extension.load` with CUDA sources; see PC602): `import mylib._C`,
    `from mylib import _C`, `from . import _C`, `from mylib._C import fused_adam`; and each
    call of its functions (`_C.fused_gelu(x)`, or `fused.fused_bias_act(x)` after `fused =
    load("fused", sources=[...])` or after the repository's own build helper, also in a
    function that declares the name `global`: stylegan2-ada's `_plugin =
    custom_ops.get_plugin("bias_act_plugin", sources=sources)`; `torch.ops.wkv.forward(...)`
    after `load("wkv", ..., is_python_module=False)`; `get_backend().march_rays(...)`
    where the module's `get_backend()` returns a global it binds to the extension on first use),
    a kernel to port; and, as warnings, the model's calls of the module's wrappers of those
    calls: the autograd Functions and functions that make one, and the thin functions (three
    statements at most) that call a wrapper (`RWKV7_CLAMPW_CUDA(r, w, k, v, a, b)` in a block's
    `forward`), where the port swaps in a PyTorch path.

    ## Why is this bad?
    The module exists only where its CUDA build succeeded. On TPU, Trainium and the other
    targets the import fails (or a stub has nothing to run), and every function used from it
    needs a replacement. The import is where the program breaks first.

    ## Example
    ```python
    from mylib import _C

    out = _C.fused_gelu(x)
    ```

    ## Use instead
    Import it where CUDA is present and fall back to PyTorch code elsewhere:
    ```python
    try:
        from mylib import _C
    except ImportError:
        _C = None
    ```
    then branch on `_C is not None and x.device.type == "cuda"`.

    ## Targets
    An error on every target but ROCm, where the extension is hipified at build time; a call of
    a wrapper is at most a warning (the kernel call inside it is the error).

    ## Fix safety
    No automatic fix.
    """

    code = "PC607"
    name = "cuda-extension-import"
    message = "{what} `{module}`, which this repository builds from CUDA C++ ({where})"
    hint = "guard the import and keep a PyTorch path; port: {port}"
    severity = kernels.severity(kernels.EXTENSION)

    VALID = [
        Valid(
            "from torch.utils.cpp_extension import CppExtension\nCppExtension('mylib._C', ['a.cpp'])\nfrom mylib import _C\n"
        ),
        Valid("import torch.utils.cpp_extension\nimport mylib._C\n"),
        Valid("def f(torch):\n    import torch.cuda\n    return torch.cuda\n"),
        Valid("import torch as T\nfrom torch import nn\nfrom torch.nn import Linear as L\n"),
    ]
    INVALID = [
        Invalid(  # RWKV: a build named at run time, in each branch of an `if`, its kernels called beside it
            "import os\nimport torch\nfrom torch.utils.cpp_extension import load\nT_MAX = int(os.environ['T_MAX'])\n"
            "if os.environ['MODE'] == 'bf16':\n"
            "    wkv = load(name=f'wkv_{T_MAX}_bf16', sources=['wkv_op_bf16.cpp', 'wkv_bf16.cu'])\n"
            "    def run(w, y):\n        wkv.forward(w, y)\n"
            "else:\n    wkv = load(name=f'wkv_{T_MAX}', sources=['wkv_op.cpp', 'wkv.cu'])\n"
            "    def run(w, y):\n        wkv.forward(w, y)\n",
            lines=[8, 12],
            message="calls a kernel of `wkv_{T_MAX}",
        ),
        Invalid(
            "from torch.utils.cpp_extension import CUDAExtension\nCUDAExtension('mylib._C', ['k.cu'])\n"
            "import mylib._C\nfrom mylib import _C\nfrom mylib._C import gelu as g\n",
            lines=[3, 4, 5],
        ),
        Invalid(  # Swin Transformer's fused window kernels
            "from torch.utils.cpp_extension import CUDAExtension\nCUDAExtension('swin_wp', ['k.cu'])\n"
            "import torch\nimport swin_wp as W\nfrom swin_wp import backward as b\n"
            "def f(x):\n    return W.forward(x, 7) + b(x)\n",
            lines=[4, 5, 7, 7],
            message="which this repository builds from CUDA C++",
        ),
        Invalid(  # rosinality's stylegan2: built when the module is imported, called through its name
            "import torch\nfrom torch.utils.cpp_extension import load\nfused = load('fused', sources=['k.cu'])\n"
            "def act(x):\n    return fused.fused_bias_act(x, 3)\n",
            lines=[5],
            message="calls a kernel of `fused.fused_bias_act`",
        ),
        Invalid("import torch\nfused = torch.utils.cpp_extension.load('fused', ['f.cu'])\nimport fused\n", lines=[3]),
        Invalid(  # BasicSR: built where asked (BASICSR_JIT), else its prebuilt copy imported
            "import os\nimport torch\nif os.getenv('JIT') == 'True':\n    from torch.utils.cpp_extension import load\n"
            "    up_ext = load('up', sources=['up.cpp', 'up_kernel.cu'])\nelse:\n    try:\n        from . import up_ext\n"
            "    except ImportError:\n        pass\ndef up(x, k):\n    return up_ext.up(x, k)\n",
            lines=[12],
            message="calls a kernel of `up.up`",
        ),
        Invalid(  # stylegan2-ada and stylegan3: the repository's build helper, run on first use into a global
            "import torch\nfrom torch_utils import custom_ops\n_plugin = None\ndef _init():\n    global _plugin\n"
            "    sources = ['bias_act.cpp', 'bias_act.cu']\n"
            "    _plugin = custom_ops.get_plugin(module_name='bias_act_plugin', sources=sources)\n"
            "def act(x):\n    return _plugin.bias_act(x, 0)\n",
            lines=[9],
            message="calls a kernel of `bias_act_plugin.bias_act`, which this repository builds from CUDA C++ "
            "(custom_ops.get_plugin())",
        ),
        Invalid(  # RWKV-7: built without a Python module, its ops called through torch.ops, also by an alias
            "import torch\nfrom torch.utils.cpp_extension import load\n"
            "load(name='wkv', sources=['wkv.cu', 'wkv.cpp'], is_python_module=False)\nOP = torch.ops.wkv\n"
            "def run(r, w):\n    torch.ops.wkv.forward(r, w)\n    return OP.backward(r, w)\n",
            lines=[6, 7],
            message="calls a kernel of `wkv.",
        ),
        Invalid(  # RWKV-7: the model's calls of the module's wrappers (not the wrappers' own calls)
            "import torch\nfrom torch.utils.cpp_extension import load\nfused = load('fused', sources=['k.cu'])\n"
            "class FusedFn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
            "        return fused.forward(x)\ndef fused_op(x):\n    return FusedFn.apply(x)\n"
            "class Block(torch.nn.Module):\n    def forward(self, x):\n        return fused_op(x) + FusedFn.apply(x)\n"
            "def block(x):\n    y = x * 2\n    y = y + 1\n    y = y.relu()\n    return fused_op(y)\n",
            lines=[7, 12, 12, 17],
            message="which this repository builds from CUDA C++",
        ),
        Invalid(  # GroundingDINO: a PyTorch path beside the call; a test comparing the two; stylegan2: a
            # wrapper that runs the kernel in a branch on the device, which the port widens; a reference
            "import torch\nfrom torch.utils.cpp_extension import load\nfused = load('fused', sources=['k.cu'])\n"
            "class FusedFn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
            "        return fused.forward(x)\nclass Block(torch.nn.Module):\n    def forward(self, x):\n"
            "        if x.is_cuda:\n            return FusedFn.apply(x)\n        return x * 2\n"
            "class TestFused:\n    def test_forward(self, x):\n        assert FusedFn.apply(x) == x * 2\n"
            "def fused_act(x):\n    if x.device.type == 'cpu':\n        return x * 2\n    else:\n"
            "        return FusedFn.apply(x)\nclass Act(torch.nn.Module):\n    def forward(self, x):\n"
            "        return fused_act(x)\ndef scan_ref(x):\n    y = x * 2\n    y = y + 1\n    y = y.relu()\n"
            "    return FusedFn.apply(y)\n",
            lines=[7],
        ),
        Invalid(  # stable-dreamfusion: imported on first use into a global that a getter returns
            "from torch.utils.cpp_extension import CUDAExtension\nCUDAExtension('_rm', ['k.cu'])\nBACKEND = None\n"
            "def get_backend():\n    global BACKEND\n    if BACKEND is None:\n        import _rm as _backend\n"
            "        BACKEND = _backend\n    return BACKEND\ndef near_far(x):\n    return get_backend().near_far(x)\n",
            lines=[7, 11],
            message="which this repository builds from CUDA C++",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        # calls of a name's methods: with the chain, the values `=` binds the name to, and the
        # name where the module binds it (a function may too, after `global`)
        self._calls: list[tuple[cst.Call, tuple[cst.CSTNode, ...], list[cst.BaseExpression], str | None]] = []
        self._global_values: dict[str, list[cst.BaseExpression]] = {}
        # what the module's names (after `global`) and module functions' returns may hold, by
        # qualified name: stable-dreamfusion's `get_backend()` returns a global bound to an import
        self._global_modules: dict[str, set[str]] = {}
        self._returned: dict[str, set[str]] = {}  # per module function: the modules it may return
        self._returned_names: dict[str, set[str]] = {}  # and the names it returns them by
        self._getter_calls: list[tuple[cst.Call, tuple[cst.CSTNode, ...], str]] = []
        # the module's wrappers of the kernels: the definitions (functions, autograd Functions)
        # that call one, the module's definitions, and the calls of the module's names
        self._calling_kernels: dict[int, str] = {}  # by id: the wrapper, and the extension it runs
        self._definitions: dict[str, cst.CSTNode] = {}  # by name, the last: what a call finds
        self._named_calls: list[tuple[cst.Call, tuple[cst.CSTNode, ...], str, cst.CSTNode | None]] = []

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        return tuple(sorted({name.rpartition(".")[2].encode() for name in known.cuda_extensions}))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._check(node, patterns.dotted(alias.name))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        module = "." * len(node.relative) + (patterns.dotted(node.module) if node.module else "")
        base = self.ctx.module.absolute(module)
        for alias in node.names:
            name = patterns.dotted(alias.name)
            if not self._check(node, f"{base}.{name}" if base else name):
                self._check(node, base)

    def visit_Call(self, node: cst.Call) -> None:
        known = self.ctx.project
        if not known.complete:
            return
        for name in sorted(self.ctx.qualified_names(node.func)):
            if name.rpartition(".")[0] in known.cuda_extensions:
                self._report(node, "calls a kernel of", name)
                self._calls_kernel(self.ctx.ancestors, name.rpartition(".")[0])
                return
            library, op = _op_library(name), name.rpartition(".")[2]
            # `torch.ops.fused.forward(...)` after `load("fused", ...)`; PC605 tells of an op known CUDA-only
            if library in known.cuda_extensions:
                if f"{library}::{op}" not in known.cuda_only_ops:
                    self._report(node, "calls a kernel of", name.removeprefix("torch.ops."))
                self._calls_kernel(self.ctx.ancestors, library)
                return
        func, resolver = node.func, self.ctx.resolver
        called = func.value if type(func) is cst.Attribute and func.attr.value == "apply" else func
        if (
            type(called) is cst.Name
            and resolver is not None
            and resolver.scope_of(called.value) is resolver.module
            and not self._where_the_port_decides()
        ):  # `wrapper(x)`, `Fn.apply(x)`: maybe one of the module's wrappers
            self._named_calls.append((node, self.ctx.chain(node), called.value, _definition(self.ctx.ancestors)))
        # `fused.fused_bias_act(...)` after `fused = load("fused", ...)`
        if type(func) is cst.Attribute and type(func.value) is cst.Name and resolver is not None:
            name = func.value.value
            values = resolver.bound_values(func.value)
            held_globally = resolver.scope_of(name) is resolver.module
            self._calls.append((node, self.ctx.chain(node), values, name if held_globally else None))
        elif type(func) is cst.Attribute and type(func.value) is cst.Call and type(func.value.func) is cst.Name:
            self._getter_calls.append((node, self.ctx.chain(node), func.value.func.value))

    def visit_Return(self, node: cst.Return) -> None:
        ancestors = self.ctx.ancestors
        function = ancestors[1] if len(ancestors) > 1 else None
        if type(node.value) is not cst.Name or type(function) is not cst.FunctionDef or not self.ctx.project.complete:
            return
        self._returned.setdefault(function.name.value, set()).update(self.ctx.qualified_names(node.value))
        self._returned_names.setdefault(function.name.value, set()).add(node.value.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        """`_plugin = custom_ops.get_plugin(...)` after `global _plugin`: what the module's name holds."""
        scope = self.ctx.resolver.scope if self.ctx.resolver is not None else None
        for target in node.targets if scope is not None and scope.declared_global else ():
            if type(target.target) is cst.Name and target.target.value in scope.declared_global:  # type: ignore[union-attr]
                self._global_values.setdefault(target.target.value, []).append(node.value)
                modules = self._global_modules.setdefault(target.target.value, set())  # type: ignore[union-attr]
                modules.update(self.ctx.qualified_names(node.value))

    def leave_Module(self, node: cst.Module) -> None:
        """The calls of an extension's functions, knowing every value the module's names are given."""
        for call, chain, values, held_globally in self._calls:
            for built in (*_nearest_first(values, chain), *self._global_values.get(held_globally or "", ())):
                builder = self._builder(built)
                module = built_module(built) if builder is not None else None  # type: ignore[arg-type]
                if builder is None:  # `OP = torch.ops.fused`: the ops the extension registers
                    module = min(filter(None, map(_op_library, self.ctx.qualified_names(built))), default=None)
                    builder = "cpp_extension.load"
                if module in self.ctx.project.cuda_extensions:
                    method = call.func.attr.value  # type: ignore[attr-defined]
                    fields = self._fields("calls a kernel of", f"{module}.{method}", builder)
                    self.reports.append(self.report_here(call, chain=chain, **fields))
                    self._calls_kernel(chain, module)
                    break
        for call, chain, getter in self._getter_calls:
            names = self._returned_names.get(getter, ())
            held = self._returned.get(getter, set()).union(*(self._global_modules.get(name, ()) for name in names))
            module = min(held & self.ctx.project.cuda_extensions, default=None)
            if module is not None:
                method = call.func.attr.value  # type: ignore[attr-defined]
                fields = self._fields("calls a kernel of", f"{module}.{method}", f"`{getter}()` returns it")
                self.reports.append(self.report_here(call, chain=chain, **fields))
                self._calls_kernel(chain, module)
        self.reports.extend(self._wrapper_calls())

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._note_definition(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._note_definition(node)

    def _note_definition(self, node: cst.FunctionDef | cst.ClassDef) -> None:
        """The module's outermost definitions (also under module-level `if`s), the last of each
        name: what a call of the name finds once the module has run."""
        if self.ctx.project.complete and _definition(self.ctx.ancestors) is None:
            self._definitions[node.name.value] = node

    def _calls_kernel(self, chain: Sequence[cst.CSTNode], module: str) -> None:
        """Note the definition a kernel call is in, where it is a wrapper: a function, or an
        autograd Function (a model's class calling a kernel in its forward is no wrapper)."""
        definition = _definition(chain)
        if type(definition) is cst.FunctionDef or (
            type(definition) is cst.ClassDef and self._is_autograd_function(definition)
        ):
            self._calling_kernels.setdefault(id(definition), module)

    def _where_the_port_decides(self) -> bool:
        """Whether the walk is in a test (`test_forward()`, comparing the kernel with PyTorch) or
        a reference (`mamba_inner_ref`), under a check that keeps a PyTorch path beside (`if
        value.is_cuda:` ... `else:`), or in a branch on the device, whose test the port widens."""
        ancestors = self.ctx.ancestors
        tested = any(
            type(node) is cst.FunctionDef
            and (node.name.value.startswith("test") or fallbacks.looks_like_reference(node.name.value))
            for node in ancestors
        )
        return tested or _on_device(ancestors) or bool(fallbacks.fallback_evidence(ancestors))

    def _is_autograd_function(self, node: cst.ClassDef) -> bool:
        return any(self.ctx.qualified_names(base.value) & patterns.AUTOGRAD_FUNCTIONS for base in node.bases)

    def _wrapper_calls(self) -> list[Report]:
        """The model's calls of the module's wrappers of the kernels (RWKV-7's `forward` calling
        `RWKV7_CLAMPW_CUDA(r, w, k, v, a, b)`, which applies the autograd Function that calls
        them; a thin function calling a wrapper is one too): a warning each, where the port
        swaps in a PyTorch path (the kernel call itself is the error)."""
        wrappers = {
            name: self._calling_kernels[id(definition)]
            for name, definition in self._definitions.items()
            if id(definition) in self._calling_kernels
        }
        calls: dict[int, set[str]] = {}  # by id of the definition: the module's names it calls
        for _, _, name, definition in self._named_calls:
            calls.setdefault(id(definition), set()).add(name)
        grown = True
        while grown:  # a function that calls a wrapper is one too
            more = {
                name: wrappers[min(used & wrappers.keys())]
                for name, definition in self._definitions.items()
                if name not in wrappers
                and type(definition) is cst.FunctionDef
                and _thin(definition)
                and (used := calls.get(id(definition), set())) & wrappers.keys()
            }
            wrappers.update(more)
            grown = bool(more)
        reports = []
        for call, chain, name, definition in self._named_calls:
            title = definition.name.value if definition is not None else None  # type: ignore[attr-defined]
            if name in wrappers and title not in wrappers:
                fields = self._fields(f"calls `{name}`, which runs kernels of", wrappers[name], "called in this module")
                severity = at_most_warning(self.severity)  # type: ignore[arg-type]
                reports.append(self.report_here(call, chain=chain, severity=severity, **fields))
        return reports

    def _builder(self, value: cst.BaseExpression) -> str | None:
        """How a value was built, where it is an extension module: `cpp_extension.load`, or the
        repository's helper given sources (`custom_ops.get_plugin()`, PC602)."""
        if type(value) is not cst.Call:
            return None
        if self.ctx.qualified_names(value.func) & kernels.EXTENSION_LOADERS:
            return "cpp_extension.load"
        if patterns.keyword(value, "sources") is not None and type(value.func) in (cst.Name, cst.Attribute):
            return f"{patterns.dotted(value.func)}()"
        return None

    def _check(self, node: cst.CSTNode, module: str) -> bool:
        known = self.ctx.project
        if not known.complete or module not in known.cuda_extensions:
            return False
        self.record(project.CALL, module, node, fallback=fallbacks.fallback_evidence(self.ctx.ancestors))
        self._report(node, "imports", module)
        return True

    def _report(self, node: cst.CSTNode, what: str, module: str) -> None:
        self.report(node, **self._fields(what, module, "CUDAExtension"))

    def _fields(self, what: str, module: str, where: str) -> dict[str, str]:
        port = kernels.port_hint(kernels.EXTENSION, self.ctx.targets)
        return {"what": what, "module": module, "where": where, "port": port}


def _op_library(name: str) -> str | None:
    """`fused` for `torch.ops.fused` and `torch.ops.fused.forward`: the library whose ops an
    extension built without a Python module (`load(..., is_python_module=False)`) registers."""
    parts = name.split(".")
    return parts[2] if len(parts) in (3, 4) and parts[:2] == ["torch", "ops"] else None


def _definition(chain: Sequence[cst.CSTNode]) -> cst.FunctionDef | cst.ClassDef | None:
    """The outermost function or class the node below `chain` is in (under module-level `if`s)."""
    return next((node for node in chain if type(node) in (cst.FunctionDef, cst.ClassDef)), None)  # type: ignore[return-value]


def _on_device(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Under a test of the device (`if input.device.type == "cpu":`, `x if t.is_cuda else y`)."""
    return any(
        type(node) in (cst.If, cst.IfExp)
        and any(
            (type(part) is cst.Attribute and part.attr.value in ("device", "is_cuda"))
            or (type(part) is cst.Name and "device" in part.value)
            for part in descendants(node.test)
        )
        for node in ancestors
    )


def _thin(function: cst.FunctionDef) -> bool:
    """A function of at most three statements besides its docstring: one that only prepares
    a kernel's arguments and calls it (`RWKV7_CLAMPW_CUDA`), not model code that calls one."""
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else [function.body]
    return len(body) - (function.get_docstring() is not None) <= 3


def _nearest_first(values: Sequence[cst.BaseExpression], chain: Sequence[cst.CSTNode]) -> list[cst.BaseExpression]:
    """The values a name is bound to, those assigned in a block around the call first (RWKV's
    `wkv_cuda = load(...)` in each branch of an `if`, with the kernel's wrapper beside it)."""
    around = {
        id(small.value)
        for block in chain
        if type(block) is cst.IndentedBlock
        for line in block.body
        if type(line) is cst.SimpleStatementLine
        for small in line.body
        if type(small) is cst.Assign
    }
    return sorted(values, key=lambda value: id(value) not in around)
