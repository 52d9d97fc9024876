from __future__ import annotations

import libcst as cst

from portcheck import flow, kernels, patterns, project, walk
from portcheck.rule import FileContext, Invalid, Rule, Valid
from portcheck.rules.kernels import built_module
from portcheck.rules.kernels.unguarded_kernel_import import runs_unguarded_on_import

_EXTENSION = frozenset({"torch.utils.cpp_extension.CUDAExtension"})
_LOAD = frozenset({"torch.utils.cpp_extension.load"})
_LOAD_INLINE = frozenset({"torch.utils.cpp_extension.load_inline"})
_FFI = frozenset({"torch.utils.ffi.create_extension"})  # torch 0.4's, gone since 1.0 (PC710)
_CUDA_SUFFIXES = (".cu", ".cuh")


class CudaExtensionBuild(Rule):
    """## What it does
    Reports CUDA C++ extensions built from Python: `CUDAExtension(...)` (in setup.py or
    anywhere, also through a name one of whose `=` binds it: `extension = CUDAExtension`,
    reported there), `torch.utils.cpp_extension.load(...)` with `.cu` sources (also named in
    a comprehension), `with_cuda=True` or `extra_cuda_cflags`, `load_inline(...)` with
    `cuda_sources=`, and a call of the repository's own build helper given `.cu` sources or
    `extra_cuda_cflags` (stylegan2-ada's `custom_ops.get_plugin("bias_act_plugin",
    sources=sources)`), and torch 0.4's `torch.utils.ffi.create_extension(..., with_cuda=...)`
    (CenterNet's DCNv2; the module, beside the build script where it is `relative_to=__file__`).
    It records the module each one builds, so that
    imports of that module (PC607) and `portcheck kernels` can find it; where a helper names
    the module from its parameters (BasicSR's and mmcv's `make_cuda_ext(name, module, ...)`,
    building `f"{module}.{name}"`), each of the module's calls of it that gives them as
    strings names one. `BuildExtension` itself
    is not reported: it builds whatever extensions it is given, and the CUDA ones are reported
    where they are declared.

    ## Why is this bad?
    CUDA C++ only compiles with nvcc for NVIDIA GPUs (and, after hipify, for AMD). On TPU,
    Trainium, MPS, Gaudi and CPU the build fails or the module has nothing to run, so every op
    it provides must be rewritten or replaced by PyTorch code.

    ## Example
    ```python
    setup(ext_modules=[CUDAExtension("mylib._C", ["csrc/ops.cpp", "csrc/kernels.cu"])],
          cmdclass={"build_ext": BuildExtension})
    ```

    ## Use instead
    Build the CUDA extension only where CUDA exists (keep a `CppExtension` or pure-PyTorch path
    for everything else), and port the kernels: Pallas through `torch.tpu.pallas.jax_op` on TPU,
    NKI on Trainium, SYCL (`SyclExtension`) on Intel GPUs, Metal on MPS.

    ## Targets
    An error on every target but ROCm, where `CUDAExtension` sources are hipified at build time
    (a warning: review warp-size and intrinsic assumptions).

    ## Fix safety
    No automatic fix: kernels are rewritten by a person.
    """

    code = "PC602"
    name = "cuda-extension-build"
    message = "{what} builds CUDA C++ that only nvcc (or hipify) can compile"
    hint = "port: {port}"
    severity = kernels.severity(kernels.EXTENSION)
    triggers = (b"CUDAExtension", b"cpp_extension", b"extra_cuda_cflags", b".cu'", b'.cu"', b"create_extension")

    VALID = [
        Valid(  # a CPU-only FFI build
            "import torch\nfrom torch.utils.ffi import create_extension\n"
            "ffi = create_extension('_ext.my_lib', headers=['src/my_lib.h'], sources=['src/my_lib.c'], with_cuda=False)\n"
        ),
        Valid("from torch.utils.cpp_extension import CppExtension\next = CppExtension('m', ['m.cpp'])\n"),
        Valid("from torch.utils.cpp_extension import load\nm = load('m', sources=['m.cpp'])\n"),
        Valid("def build(torch):\n    return torch.utils.cpp_extension.CUDAExtension('m', ['m.cu'])\n"),
        Valid("from torch.utils.cpp_extension import load_inline\nm = load_inline('m', cpp_sources='int f();')\n"),
        Valid("from torch.utils import cpp_extension\nsources = ['m.cpp']\nm = get_plugin('m', sources=sources)\n"),
    ]
    INVALID = [
        Invalid(  # CenterNet's DCNv2 (torch 0.4), whose build PC710 also reports as gone
            "import torch\nfrom torch.utils.ffi import create_extension\nwith_cuda = torch.cuda.is_available()\n"
            "ffi = create_extension(\n    '_ext.dcn_v2', headers=['src/dcn_v2.h'], sources=['src/dcn_v2.c'],\n"
            "    relative_to=__file__, with_cuda=with_cuda,\n)\n",
            lines=[4],
            message="torch.utils.ffi.create_extension",
        ),
        Invalid(
            "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
            "setup(ext_modules=[CUDAExtension('mylib._C', ['csrc/ops.cpp', 'csrc/k.cu'])],\n"
            "      cmdclass={'build_ext': BuildExtension})\n",
            lines=[3],
        ),
        Invalid("import torch\nm = torch.utils.cpp_extension.load(name='fused', sources=['fused.cu'])\n", lines=[2]),
        Invalid(  # stable-dreamfusion's backends: sources named in a comprehension; nvcc flags
            "import os\nfrom torch.utils.cpp_extension import load\n"
            "_backend = load(name='_grid_encoder', sources=[os.path.join(src, f) for f in ['grid.cu', 'bind.cpp']])\n"
            "_other = load(name='_march', extra_cuda_cflags=['-O3'], sources=SOURCES)\n",
            lines=[3, 4],
        ),
        Invalid(  # rosinality's stylegan2: sources joined to the module's folder
            "import os\nfrom torch.utils.cpp_extension import load\nhere = os.path.dirname(__file__)\n"
            "fused = load('fused', sources=[os.path.join(here, 'fused_bias_act.cpp'), os.path.join(here, 'kernel.cu')])\n",
            lines=[4],
        ),
        Invalid("import torch as T\nm = T.utils.cpp_extension.load('f', ['f.cpp'], with_cuda=True)\n", lines=[2]),
        Invalid(
            "from torch.utils import cpp_extension\nimport torch.cuda\n"
            "m = cpp_extension.load_inline('k', cpp_sources='', cuda_sources=SRC)\n",
            lines=[3],
        ),
        Invalid(
            "from torch.utils.cpp_extension import CUDAExtension as Ext\nfrom torch import cuda\next = Ext(name='x._C', sources=[])\n",
            lines=[3],
        ),
        Invalid(  # stylegan2-ada: the repository's helper around cpp_extension.load, given CUDA sources
            "import os\nfrom torch_utils import custom_ops\ndef _init():\n"
            "    sources = ['bias_act.cpp', 'bias_act.cu']\n"
            "    sources = [os.path.join(os.path.dirname(__file__), s) for s in sources]\n"
            "    return custom_ops.get_plugin('bias_act_plugin', sources=sources)\n"
            "def _init_other():\n    return custom_ops.get_plugin('k', sources=SRC, extra_cuda_cflags=['-O3'])\n",
            lines=[6, 8],
            message="`custom_ops.get_plugin()` builds CUDA C++",
        ),
        Invalid(  # GroundingDINO's setup.py: the class chosen where CUDA is found
            "import torch\nfrom torch.utils.cpp_extension import CUDA_HOME, CppExtension, CUDAExtension\n"
            "def get_extensions():\n    extension = CppExtension\n    if CUDA_HOME is not None:\n"
            "        extension = CUDAExtension\n    return [extension('groundingdino._C', ['vision.cpp'])]\n",
            lines=[6],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        # `extension = CUDAExtension`: each value written so, with its chain (`_chosen_extension`)
        self._choices: dict[int, tuple[cst.CSTNode, ...]] = {}
        # builds in a helper that names the module from its parameters, with the kind and sources
        self._by_helper: list[tuple[cst.FunctionDef, cst.FormattedString, tuple[cst.CSTNode, ...], str, str]] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.ctx.qualified_names(node.value) & _EXTENSION:
            self._choices[id(node.value)] = self.ctx.chain(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if names & _EXTENSION:
            self._extension(node, "CUDAExtension", kernels.EXTENSION, _sources(node))
        elif (chosen := self._chosen_extension(node.func)) is not None:
            self._extension(node, "CUDAExtension", kernels.EXTENSION, _sources(node), chosen=chosen)
        elif names & _LOAD:
            sources = _sources(node)
            with_cuda = patterns.keyword(node, "with_cuda")
            if (
                any(s.endswith(_CUDA_SUFFIXES) for s in sources)
                or (with_cuda is not None and isinstance(with_cuda.value, cst.Name) and with_cuda.value.value == "True")
                or patterns.keyword(node, "extra_cuda_cflags") is not None
            ):
                self._extension(node, "cpp_extension.load", kernels.EXTENSION, sources)
        elif names & _FFI and _with_cuda(node):
            # torch 0.4's `create_extension("_ext.dcn_v2", ..., relative_to=__file__, with_cuda=True)`
            named = built_module(node)
            relative = patterns.keyword(node, "relative_to") is not None and self.ctx.module.package
            module = f"{self.ctx.module.package}.{named}" if named and relative else named
            self._extension(node, "torch.utils.ffi.create_extension", kernels.EXTENSION, [], module=module)
        elif names & _LOAD_INLINE and patterns.keyword(node, "cuda_sources") is not None:
            self._extension(node, "cpp_extension.load_inline", kernels.INLINE, [])
        elif not names & (_LOAD | _LOAD_INLINE) and type(node.func) in (cst.Name, cst.Attribute):
            sources = self._named_sources(node)
            if any(s.endswith(_CUDA_SUFFIXES) for s in sources) or patterns.keyword(node, "extra_cuda_cflags"):
                # the repository's own build helper (stylegan2-ada's `custom_ops.get_plugin`)
                self._extension(node, f"{patterns.dotted(node.func)}()", kernels.EXTENSION, sources)

    def leave_Module(self, node: cst.Module) -> None:
        """Record the modules the module's calls of a build helper name (`make_cuda_ext(name=
        "deform_conv_ext", module="basicsr.ops.dcn", ...)`), where each gives its parameters as
        strings."""
        module_flow = self.ctx.flow
        for helper, named, chain, kind, sources in self._by_helper if module_flow is not None else ():
            shown = [part for part in named.parts if type(part) is cst.FormattedStringExpression]
            passed = [module_flow.passed_arguments(helper, part.expression.value) for part in shown]  # type: ignore[attr-defined]
            for call in zip(*passed) if all(passed) else ():  # type: ignore[arg-type]
                given = iter(patterns.string_value(value) for value, _ in call)
                parts = [part.value if type(part) is cst.FormattedStringText else next(given) for part in named.parts]
                if all(part is not None for part in parts):
                    module = "".join(parts)  # type: ignore[arg-type]
                    self.record(project.CUDA_EXTENSION, module, chain[-1], chain=chain, sources=sources)
                    self.record(project.KERNEL, module, chain[-1], chain=chain, kind=kind, sources=sources)

    def _named_sources(self, call: cst.Call) -> list[str]:
        """The files given as `sources=`, also through a name the scope binds to a list of
        them, or to a comprehension over one (`sources = [os.path.join(here, s) for s in sources]`)."""
        arg = patterns.keyword(call, "sources")
        if arg is None or self.ctx.resolver is None:
            return []
        listed, seen = [arg.value], set()
        while listed:
            value = _iterated(listed.pop())
            if isinstance(value, (cst.List, cst.Tuple)):
                return _files(value)
            if isinstance(value, cst.Name) and value.value not in seen:
                seen.add(value.value)
                listed.extend(self.ctx.resolver.explicit_values(value))
        return []

    def _chosen_extension(self, func: cst.BaseExpression) -> tuple[cst.CSTNode, tuple[cst.CSTNode, ...]] | None:
        """Where a name is bound to CUDAExtension by one of its `=` before the call (detectron2's
        and GroundingDINO's `extension = CppExtension`, then `extension = CUDAExtension` where
        CUDA is found), with that value's chain: the line that chooses CUDA."""
        if type(func) is not cst.Name or self.ctx.resolver is None:
            return None
        values = self.ctx.resolver.explicit_values(func)
        return next(((value, self._choices[id(value)]) for value in values if id(value) in self._choices), None)

    def _extension(
        self,
        node: cst.Call,
        what: str,
        kind: str,
        sources: list[str],
        chosen: tuple[cst.CSTNode, tuple[cst.CSTNode, ...]] | None = None,
        module: str | None = None,
    ) -> None:
        named = patterns.argument(node, 0, "name")
        helper = flow.enclosing_function(self.ctx.ancestors)
        if module is None and helper is not None and named is not None and _formats_parameters(named.value, helper):
            # BasicSR's and mmcv's `make_cuda_ext(name, module, ...)`: its calls name the modules
            self._by_helper.append((helper, named.value, self.ctx.chain(node), kind, ",".join(sources)))  # type: ignore[arg-type]
            module = ""
        module = built_module(node) if module is None else module
        if module:
            self.record(project.CUDA_EXTENSION, module, node, sources=",".join(sources))
            self.record(project.KERNEL, module, node, kind=kind, sources=",".join(sources))
            if what != "CUDAExtension" and runs_unguarded_on_import([*self.ctx.ancestors, node]):
                # built when the module is imported (stylegan2's `fused = load(...)` in op/fused_act.py):
                # importing the module imports the extension, for PC610's chains
                self.record(project.IMPORT, self.ctx.module.name, node, module=module, written="")
        fields = {"what": f"`{what}`", "port": kernels.port_hint(kind, self.ctx.targets)}
        if chosen is None:
            self.report(node, **fields)
        else:
            self.reports.append(self.report_here(chosen[0], chain=chosen[1], **fields))


def _formats_parameters(value: cst.BaseExpression, function: cst.FunctionDef) -> bool:
    """`f"{module}.{name}"` in `make_cuda_ext(name, module, ...)`: a name formatted of the
    function's parameters only."""
    if type(value) is not cst.FormattedString:
        return False
    given = flow.parameter_names(function)
    shown = [part.expression for part in value.parts if type(part) is cst.FormattedStringExpression]
    return bool(shown) and all(type(each) is cst.Name and each.value in given for each in shown)


def _with_cuda(call: cst.Call) -> bool:
    """`with_cuda=` given, and not `False`: a name set where CUDA is found counts (DCNv2's)."""
    given = patterns.keyword(call, "with_cuda")
    return given is not None and not (isinstance(given.value, cst.Name) and given.value.value == "False")


def _sources(call: cst.Call) -> list[str]:
    arg = patterns.argument(call, 1, "sources")
    listed = _iterated(arg.value) if arg is not None else None
    return _files(listed) if isinstance(listed, (cst.List, cst.Tuple)) else []


def _iterated(value: cst.BaseExpression) -> cst.BaseExpression:
    """What a comprehension iterates (`[os.path.join(src, f) for f in ["k.cu", ...]]`), else the value."""
    return value.for_in.iter if isinstance(value, (cst.ListComp, cst.GeneratorExp)) else value


def _files(listed: cst.List | cst.Tuple) -> list[str]:
    return [value for element in listed.elements if (value := _file_name(element.value))]


def _file_name(source: cst.BaseExpression) -> str | None:
    """A source's file name: the string itself, or the last string written in a path built
    from parts (`os.path.join(module_path, "kernel.cu")`, `root / "kernel.cu"`)."""
    value = patterns.string_value(source)
    if value is not None:
        return value
    parts = [text for node in walk.descendants(source) if (text := patterns.string_value(node)) is not None]
    return parts[-1] if parts else None
