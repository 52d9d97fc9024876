from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from portcheck import fallbacks, flow, kernels, patterns, project
from portcheck.project import Project
from portcheck.resolve import Resolver
from portcheck.rule import (
    ERROR,
    INFO,
    UNPLACED,
    WARNING,
    FileContext,
    Invalid,
    Report,
    Rule,
    Valid,
    at_most_info,
    at_most_warning,
    per_target,
)
from portcheck.rules.dependencies import by_choice, optional_import
from portcheck.rules.kernels.triton_kernel import reachable, top_owner
from portcheck.rules.kernels.unguarded_kernel_import import imports_cause_itself
from portcheck.targets import packages
from portcheck.walk import descendants

_DECLARED = (
    "whose import is guarded, but the project declares {package}: installed on the target, the import "
    "succeeds and this call runs there without CUDA"
)
_DECLARED_BASE = (
    "whose import is guarded, but the project declares {package}: installed on the target, the import "
    "succeeds and this class is built on it there, without CUDA"
)
_UNDECLARED = (
    "behind a guarded import; the project does not declare {package}, so the target takes the other path, "
    "without what this call does"
)
_STAND_IN = (
    "behind a guarded import whose handler {leaves}, and nothing here checks it: where this runs, the target "
    "raises {error}"
)
_NOT_CALLABLE = "TypeError ('NoneType' object is not callable)"
_NO_ATTRIBUTE = "AttributeError ('NoneType' object has no attribute '{attribute}')"
_UNBOUND = "NameError (name '{name}' is not defined)"
_IMPORTED = "whose import PC701 reports (no backend for the target): each call needs a replacement too"
_IMPORTED_LOCAL = (
    "whose module fails to import on the target first (PC610): the definition needs a portable path, or each "
    "call a replacement"
)
_LAUNCHING = (
    "whose module fails to import on the target first (PC610), and which launches Triton kernel `{kernel}` "
    "whenever it is called, with no PyTorch path: each call needs a replacement"
)
_APPLYING = (
    "whose module fails to import on the target first (PC610), and which runs kernels of the repository's CUDA "
    "extension `{extension}`: each call needs a replacement"
)
_RUNNING = (
    "whose module fails to import on the target first (PC610), and which calls `{runs}` whenever it is called, "
    "with no PyTorch path: each call needs a replacement"
)
_DECLARED_TRITON = (
    "whose import is guarded, but the project declares triton: installed on the target, the import succeeds "
    "and this call launches Triton kernel `{kernel}` there, which has no driver to run on"
)
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_TRITON_JIT = frozenset({"triton.jit", "triton.runtime.jit.jit"})
_REQUIRED = (
    "behind a guarded import, but this function raises without it (`{test}`): there is no other path, "
    "and the target fails here"
)


class CudaOnlyPackageCall(Rule):
    """## What it does
    Reports calls into a CUDA-only package (the table of cuda-only-package-import, PC701)
    whose import is optional: inside `try/except ImportError`, under an availability check or
    a test that selects the package (`xformers.ops.memory_efficient_attention(q, k, v)` after
    `try: import xformers.ops`). Where the repository declares the package as a dependency
    (requirements, pyproject.toml, setup.py, a conda file, a Dockerfile), at the package's
    severity; elsewhere a warning: the target takes the other path, without what the call
    does (a fused kernel, a memory-efficient attention), which a port replaces with the
    target's own or drops. Calls where the import is not optional are a warning: the import
    is PC701's error (where the target fails first, or, for a package that imports without
    CUDA, such as detectron2's deformable convolutions, where the port starts), and each call
    still needs its replacement
    (`amp.initialize(...)`, `amp.scale_loss(...)` after `from apex import amp`, also in a
    function defined above an import under `if __name__ == "__main__":`), and so does each
    use of the package as a value (`restore(ckp, amp=apex.amp)`, `norm_layer=FusedLayerNorm`);
    once per function that imports the package itself, which is replaced whole (arcface's
    DALI pipeline in `dali_data_iter()`). A class built on one of an optional import's classes
    (lit-llama's `class Linear8bitLt(bnb.nn.Linear8bitLt)` under `if bnb is not None:`) counts
    where the project declares the package, or where nothing checks what the handler left: it
    is then defined on the target, and its instances run the package's kernels.
    The repository's own modules that fail to import without Triton or one of its CUDA extensions
    (unguarded-kernel-import's chains, PC610) count as such packages where an optional import
    of one leaves None and a call does not check it (`WindowProcess.apply(...)` after
    `except ImportError: WindowProcess = None`); as info, calls of what an unguarded import
    binds from a module that imports Triton or the extension itself, the kernels' wrappers:
    the wrapper's one definition may take a portable path instead, or each call needs a
    replacement; not a model class from a module further away, which loads once that one is
    fixed. A wrapper that launches one of
    the repository's Triton kernels whenever it is called, with no PyTorch path on the way
    (mamba's `layer_norm_fn(...)` -> `LayerNormFn.apply` -> `_layer_norm_fwd` -> the launch),
    has no portable path to take: its calls are warnings, also through a module-level name
    bound to it (`ReLUSqrdMLP = FusedLinearReLUSquareFunction.apply`), and so are those of an
    autograd Function's `apply` from a module that imports one of the repository's CUDA
    extensions (Deformable-DETR's `MSDeformAttnFunction.apply`), and of what a module importing
    a CUDA-only package defines that calls it whenever it runs, itself or through the module's
    other functions and autograd Functions, also as a module-level name or a package's re-export
    (TinyLlama's `apply_rotary_emb_func = ApplyRotaryEmb.apply` over flash-attn's `rotary_emb`,
    and `FusedCrossEntropyLoss`; not a model built of such layers, nor a function named as a
    PyTorch reference), and of what the module that
    builds or imports the extension itself defines, also as its package re-exports it
    (stylegan2's `upfirdn2d` and `FusedLeakyReLU`, whose one portable path is for the CPU);
    not a function named as a PyTorch reference (`selective_scan_ref`). Not in a module that writes
    kernels (a function decorated with TileLang's `@T.prim_func` or CuTe's `@cute.jit`): its
    every line is kernel code (the language's calls, helpers of other kernel packages), the
    source is rewritten whole, and PC701 and PC610 report its imports; in one that writes
    Triton kernels (`@triton.jit`), not the launchers of the repository's other kernel
    modules, but still the calls of a listed package (nanotron's ring attention calls
    flash-attn's varlen kernels beside its Triton helpers). Where the project
    declares triton, an optional import of such a module succeeds on the target (Triton
    installs without a GPU), so its checked calls launch there: an error.

    ## Why is this bad?
    The guard only asks whether the package is installed, not whether there is a CUDA device.
    Installed from the project's own requirements on a TPU or Trainium host, the import
    succeeds (xFormers and bitsandbytes import without a GPU), the code takes the CUDA path,
    and the call fails there: "No operator found for `memory_efficient_attention_forward`".
    The portable path the guard was written for never runs.

    ## Example
    ```python
    try:
        from xformers.ops import memory_efficient_attention
        XFORMERS = True
    except ImportError:
        XFORMERS = False

    def attend(q, k, v):
        if XFORMERS:
            return memory_efficient_attention(q, k, v)
        return F.scaled_dot_product_attention(q, k, v)
    ```

    ## Use instead
    Choose the path by the device as well (`q.is_cuda and XFORMERS`), or use the portable
    call alone (each package's alternative is named in the finding), and move the package to
    an optional CUDA extra.

    ## Targets
    The package's severity where the project declares it (an error where it has no backend, a
    warning where a partial one exists), or where the function raises without the package
    (`if natten is None: raise ModuleNotFoundError(...)`: there is no portable path to take),
    or asserts it (`assert has_apex and ...`), or raises in the `else:` of a test of it (open-muse's
    `if is_apex_available: optimizer_cls = apex.optimizers.FusedAdam else: raise ImportError(...)`,
    where a use of the package as a value counts too), or where the handler binds the name to None, or
    leaves it unbound while it sets a flag, and nothing around the call checks it or the flag
    (Swin's `FusedAdam = None`, then `FusedAdam(params)` where the config asks for it: the
    target raises TypeError, AttributeError for `name.attribute(...)`, or NameError for an
    unbound name, there); info elsewhere, since the target's environment then lacks it and the guard takes the
    portable path. Under a CUDA check (`if q.is_cuda:`) it is info: the check keeps the call
    on CUDA. Behind an unguarded import, at most a warning (the import is the error).

    ## Fix safety
    No automatic fix.
    """

    code = "PC707"
    name = "cuda-only-package-call"
    message = "{verb} `{called}` of {package}, {declared}"
    hint = "{what}: choose the path by the device too (`x.is_cuda and ...`), or use instead: {instead}"
    severity = per_target(ERROR)
    triggers = tuple(sorted({name.split(".")[0].encode() for p in packages.packages() for name in p.imports}))
    cuda_only = True

    VALID = [
        Valid(  # ConvNeXt-V2: an isinstance test against the package's classes uses none of its kernels
            "import torch\nfrom MinkowskiEngine import MinkowskiConvolution, MinkowskiLinear\n"
            "def init_weights(m):\n    if isinstance(m, (MinkowskiConvolution, MinkowskiLinear)):\n"
            "        torch.nn.init.zeros_(m.bias)\n    return issubclass(type(m), MinkowskiLinear)\n"
        ),
        Valid(  # mamba's TileLang kernels: the language's calls are the kernel's source (PC701 reports the import)
            "import tilelang\nimport tilelang.language as T\n@tilelang.jit(out_idx=[-1])\ndef scale(M, N):\n"
            "    @T.prim_func\n    def kernel(A: T.Tensor((M, N), 'float16')):\n"
            "        with T.Kernel(T.ceildiv(N, 128)) as bx:\n            T.clear(A)\n    return kernel\n"
        ),
        Valid(  # mamba's CuTe step: another kernel package's helpers are the kernel's source too
            "import cutlass.cute as cute\nfrom quack.compile_utils import make_fake_tensor\n"
            "@cute.jit\ndef step(a: cute.Tensor):\n    cute.copy(a, a)\n"
            "def compile_step(dtype, shape):\n    return cute.compile(step, make_fake_tensor(dtype, shape))\n"
        ),
        Valid(  # mamba's CuTe step: a helper of the kernel above its `@cute.kernel`
            "import cutlass\nimport cutlass.cute as cute\nfrom cutlass import Float32\n"
            "def transpose_view(a):\n    return cute.composition(a, cute.make_ordered_layout((2, 2), order=(1, 0)))\n"
            "@cute.kernel\ndef step(a: cute.Tensor, b: Float32):\n    cute.copy(a, transpose_view(a))\n"
        ),
        Valid("import apex\nprint('apex', apex.__version__)\n"),  # asks for the version: uses nothing
        Valid(  # a parameter of the imported name's spelling
            "try:\n    import xformers\nexcept ImportError:\n    xformers = None\n"
            "def attend(xformers, q, torch):\n    return xformers.ops.memory_efficient_attention(q, q, q)\n"
        ),
        Valid(
            "import torch as T\nimport torch.nn.functional as F\nfrom torch.nn import Linear as L\nfrom torch import nn\n"
            "try:\n    import xformers.ops as xops\nexcept ImportError:\n    xops = None\n"
            "def attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
        ),
        Valid(  # defined only where the import succeeded, and the project does not declare bitsandbytes
            "import torch\ntry:\n    import bitsandbytes as bnb\nexcept ImportError:\n    bnb = None\n"
            "if bnb is not None:\n    class Linear8bitLt(bnb.nn.Linear8bitLt):\n        pass\n"
        ),
    ]
    INVALID = [
        Invalid(  # nanotron's ring attention: flash-attn's varlen kernels called beside the module's own Triton helpers
            "import torch\nimport triton\nimport triton.language as tl\n"
            "from flash_attn.flash_attn_interface import _flash_attn_varlen_forward\n"
            "def ring_forward(q, k, v, params):\n    return _flash_attn_varlen_forward(q, k, v, **params)\n"
            "@triton.jit\ndef flatten_kernel(OUT, LSE):\n    tl.store(OUT, tl.load(LSE))\n",
            lines=[6],
            message="calls `_flash_attn_varlen_forward` of flash_attn",
        ),
        Invalid(  # tacotron2: the import fails first (PC701's error); each call needs its replacement too
            "import torch\ndef train(model, optimizer, fp16):\n    if fp16:\n        from apex import amp\n"
            "        model, optimizer = amp.initialize(model, optimizer, opt_level='O2')\n",
            lines=[5],
            message="whose import PC701 reports (no backend for the target)",
        ),
        Invalid(  # arcface: a function that imports NVIDIA DALI itself and builds its pipeline: replaced whole
            "import torch\ndef dali_iter(path, rank):\n    import nvidia.dali.fn as fn\n"
            "    import nvidia.dali.types as types\n    from nvidia.dali.pipeline import Pipeline\n"
            "    pipe = Pipeline(batch_size=128, num_threads=2, device_id=rank)\n"
            "    flip = fn.random.coin_flip(probability=0.5)\n    with pipe:\n"
            "        images = fn.decoders.image(path, device='mixed')\n"
            "        images = fn.cast(images, dtype=types.FLOAT)\n    return pipe, images, flip\n",
            lines=[6],
            message="whose import PC701 reports",
        ),
        Invalid(  # stable-dreamfusion: an export function's own optional import is not the module's
            "import nvdiffrast.torch as dr\ndef render(glctx, pos, tri):\n    return dr.rasterize(glctx, pos, tri)\n"
            "def export_mesh(pos, tri):\n    try:\n        import nvdiffrast.torch as dr\n    except ImportError:\n"
            "        return None\n    return dr.rasterize(dr.RasterizeCudaContext(), pos, tri)\n",
            lines=[3, 9, 9],
        ),
        Invalid(  # swav: apex's amp given to a helper as a value, and a fused class as a layer factory
            "import torch\nimport apex\nfrom apex.normalization import FusedLayerNorm\n"
            "def build(restore, ckp, make):\n    restore(ckp, amp=apex.amp)\n    return make(norm_layer=FusedLayerNorm)\n",
            lines=[5, 6],
            message="whose import PC701 reports (no backend for the target)",
        ),
        Invalid(  # qlora: the class of the quantised layers chosen by the bit width
            "import torch\nimport bitsandbytes as bnb\ndef linear_names(model, bits):\n"
            "    cls = bnb.nn.Linear4bit if bits == 4 else (bnb.nn.Linear8bitLt if bits == 8 else torch.nn.Linear)\n"
            "    return [name for name, module in model.named_modules() if isinstance(module, cls)]\n",
            lines=[4, 4],
            message="of bitsandbytes, whose import PC701 reports",
        ),
        Invalid(  # LoRA: a function calls what the main block imports further down
            "import torch\ndef optimizer_step(loss, optimizer, fp16):\n    if fp16:\n"
            "        with amp.scale_loss(loss, optimizer) as scaled:\n            scaled.backward()\n"
            "if __name__ == '__main__':\n    from apex import amp\n    model, opt = amp.initialize(model, opt)\n",
            lines=[4, 8],
            message="whose import PC701 reports (no backend for the target)",
        ),
        Invalid(  # Swin Transformer: the handler leaves None, and only the config decides
            "import torch\ntry:\n    from apex.optimizers import FusedAdam\nexcept ImportError:\n    FusedAdam = None\n"
            "def build(name, params):\n    if name == 'fused_adam':\n        return FusedAdam(params)\n"
            "    return torch.optim.AdamW(params)\n",
            lines=[8],
            message="whose handler sets `FusedAdam = None`, and nothing here checks it",
        ),
        Invalid(  # ConvNeXt: the handler leaves the names unbound and sets a flag that the function asserts
            "import torch\ntry:\n    from apex.optimizers import FusedAdam, FusedSGD\n    has_apex = True\n"
            "except ImportError:\n    has_apex = False\ndef create_optimizer(name, params):\n"
            "    if 'fused' in name:\n        assert has_apex and torch.cuda.is_available(), 'APEX and CUDA required'\n"
            "    if name == 'fusedsgd':\n        return FusedSGD(params)\n    return torch.optim.AdamW(params)\n",
            lines=[11],
            message="this function raises without it (`assert has_apex and torch.cuda.is_available()`)",
        ),
        Invalid(  # open-muse: the fused optimizer's class picked as a value, and no other path without apex
            "import torch\ntry:\n    import apex\n    is_apex_available = True\nexcept ImportError:\n"
            "    is_apex_available = False\ndef optimizer_class(name):\n    if name == 'fused_adamw':\n"
            "        if is_apex_available:\n            return apex.optimizers.FusedAdam\n"
            "        else:\n            raise ImportError('Please install apex')\n    return torch.optim.AdamW\n",
            lines=[10],
            message="uses `apex.optimizers.FusedAdam` of apex, behind a guarded import, but this function raises "
            "without it (`if is_apex_available: ... else: raise`)",
        ),
        Invalid(  # lit-llama's 8-bit layer, built on bitsandbytes' class where the import left None
            "import torch\ntry:\n    import bitsandbytes as bnb\nexcept ImportError:\n    bnb = None\n"
            "class Linear8bitLt(bnb.nn.Linear8bitLt):\n    pass\n",
            lines=[6],
            message="subclasses `bnb.nn.Linear8bitLt` of bitsandbytes, behind a guarded import whose handler sets "
            "`bnb = None`, and nothing here checks it: where this runs, the target raises AttributeError",
        ),
        Invalid(  # the flag the handler sets picks the portable path, and a fallback is bound after the `try`: info
            "import torch\ntry:\n    from apex.optimizers import FusedAdam\n    from apex.normalization import FusedLayerNorm\n"
            "    has_apex = True\nexcept ImportError:\n    has_apex = False\nif not has_apex:\n"
            "    FusedLayerNorm = torch.nn.LayerNorm\ndef build(params, dim):\n"
            "    opt = FusedAdam(params) if has_apex else torch.optim.AdamW(params)\n    return opt, FusedLayerNorm(dim)\n",
            lines=[11, 12],
            message="so the target takes the other path",
        ),
        Invalid(  # nothing checks the flag: the name is unbound where the import failed
            "import torch\ntry:\n    from apex.optimizers import FusedLAMB\n    APEX = True\n"
            "except ImportError:\n    APEX = False\ndef create_optimizer(name, params):\n"
            "    if name == 'lamb':\n        return FusedLAMB(params)\n    return torch.optim.AdamW(params)\n",
            lines=[9],
            message="whose handler leaves `FusedLAMB` unbound, and nothing here checks it: where this runs, the target raises NameError",
        ),
        Invalid(  # the call checks what the handler left, through a helper of the module (k-diffusion): info
            "import torch\ntry:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n"
            "def use_flash(x):\n    return flash_attn is not None and x.is_cuda\n"
            "def attend(qkv):\n    if use_flash(qkv):\n        return flash_attn.flash_attn_qkvpacked_func(qkv)\n"
            "    return qkv\n",
            lines=[10],
            message="so the target takes the other path",
        ),
        # dinov2: xFormers declared in requirements.txt, imported under try, called in forward
        Invalid(
            "import torch\ntry:\n    from xformers.ops import memory_efficient_attention, unbind\n"
            "    XFORMERS_AVAILABLE = True\nexcept ImportError:\n    XFORMERS_AVAILABLE = False\n"
            "class MemEffAttention(torch.nn.Module):\n    def forward(self, q, k, v):\n"
            "        if not XFORMERS_AVAILABLE:\n            return super().forward(q)\n"
            "        return memory_efficient_attention(q, k, v)\n",
            lines=[11],
            message="the project does not declare xformers",
        ),
        Invalid(  # k-diffusion: no other path, the function raises without NATTEN
            "import torch\ntry:\n    import natten\nexcept ImportError:\n    natten = None\n"
            "class NeighborhoodAttention(torch.nn.Module):\n    def forward(self, q, k, v):\n"
            "        if natten is None:\n            raise ModuleNotFoundError('natten is required')\n"
            "        if natten.has_fused_na():\n            return natten.functional.na2d(q, k, v, 7)\n"
            "        return natten.functional.na2d_av(natten.functional.na2d_qk(q, k, 7).softmax(-1), v, 7)\n",
            lines=[11, 12, 12],
            message="there is no other path",
        ),
        Invalid(  # the device decides too: only CUDA takes the xFormers path
            "import torch\ntry:\n    import xformers.ops as xops\nexcept ImportError:\n    xops = None\n"
            "def attend(q, k, v):\n    if q.is_cuda and xops is not None:\n"
            "        return xops.memory_efficient_attention(q, k, v)\n    return q\n",
            lines=[8],
            message="reached only under a CUDA check",
        ),
    ]

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """The import names of the CUDA-only packages the project declares, and the names of
        its own modules that fail to import (`_failing_module`)."""
        declared = {name.split(".")[0] for key in known.declared_packages for name in packages.by_key(key).imports}
        failing = {chain[0].rpartition(".")[2] for chain in known.import_failures}
        return tuple(sorted(name.encode() for name in declared | failing))

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        # names an optional import binds, by scope (see `_key`): a function's own import of a name
        # (an export's) is not the module's
        self._optional: dict[tuple[int, str], packages.Package] = {}
        self._by_choice: dict[tuple[int, str], bool] = {}  # the same: imported only by the user's choice
        # names whose handler binds None or nothing: the names a check of them would read (flags
        # the try sets), and whether it leaves them unbound (`_stand_in`)
        self._stand_ins: dict[tuple[int, str], tuple[frozenset[str], bool]] = {}
        self._askers: dict[frozenset[str], frozenset[str]] = {}  # see `_asking`
        self._imported: dict[str, packages.Package] = {}  # local names an unguarded import binds
        # the function an unguarded import of the name is in, where it is in one; and the
        # functions and packages already reported there
        self._importing: dict[str, cst.FunctionDef] = {}
        self._reported_in: set[tuple[int, str]] = set()
        self._local: set[str] = set()  # names bound to the repository's failing modules (`_failing_module`)
        self._targets: dict[str, str] = {}  # what each of those names stands for (`pkg.ops.layer_norm_fn`)
        # module-level names bound to one of those (modded-nanogpt's `ReLUSqrdMLP = FusedFn.apply`)
        self._aliases: dict[str, str] = {}
        self._shown: dict[str, str] = {}  # how a listed package is named in messages, by the name bound
        # calls in functions of names no import had bound yet: judged at the end of the module
        self._ahead: list[tuple[cst.BaseExpression, str, tuple[cst.CSTNode, ...]]] = []
        # uses of what unguarded imports bind, each with whether it is of the repository's own
        # modules: kept at the end as the kernels the module writes allow (`leave_Module`)
        self._uses: list[tuple[Report, bool]] = []
        self._kernels_written = ""  # the language of the module's kernels: "triton", "other" or none
        # first pass: the module's functions and classes, the CUDA-only package calls each makes,
        # the others each uses, and module-level names bound to them (`_record_runners`)
        self._top: dict[str, cst.FunctionDef | cst.ClassDef] = {}
        self._runs: dict[str, dict[str, int]] = {}  # owner -> call -> its place in the walk
        self._uses_top: dict[str, set[str]] = {}
        self._top_aliases: dict[str, str] = {}

    def visit_Module(self, node: cst.Module) -> None:
        if not self.ctx.project.complete:
            self._top = {s.name.value: s for s in node.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = patterns.dotted(alias.name)
            listed = self._listed(module)
            package = listed or self._failing_module(module)
            if package is not None and alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._note(alias.asname.name.value, module, package, local=listed is None, target=module)
            elif package is not None:
                top = module.split(".")[0]
                self._note(top, module, package, local=listed is None, target=top)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar) or (node.module is None and not node.relative):
            return
        written = patterns.dotted(node.module) if node.module is not None else ""
        module = self.ctx.module.absolute("." * len(node.relative) + written) if node.relative else written
        for alias in node.names:
            name = f"{module}.{patterns.dotted(alias.name)}"
            listed = None if node.relative else self._listed(name) or self._listed(module)
            package = listed or self._failing_module(name) or self._failing_module(module)
            bound = alias.asname.name if alias.asname is not None else alias.name
            if package is not None and isinstance(bound, cst.Name):
                self._note(bound.value, module, package, local=listed is None, target=name)

    def _listed(self, module: str) -> packages.Package | None:
        """The CUDA-bound package a module belongs to, but for the repository's own copy of one
        (scanning mamba itself, whose modules are judged as the repository's own)."""
        return None if self.ctx.project.is_local(module) else packages.by_import(module)

    def _failing_module(self, module: str) -> packages.Package | None:
        """One of the repository's modules that fails to import without Triton or one of its
        CUDA extensions (the chains of unguarded-kernel-import, PC610), as the package its
        optional import's calls need (`from .ops import Fused` where `ops` imports the
        extension `fused_ext`). Known once the project pass has run."""
        known = self.ctx.project
        chain = known.failing_import(module, self.ctx.module.name) if known.complete and module else None
        if chain is None:
            return None
        cause = chain[-1]
        kind = kernels.TRITON if cause.split(".")[0] == project.TRITON else kernels.EXTENSION
        needs = "Triton" if kind == kernels.TRITON else f"the repository's CUDA extension `{cause}`"
        return packages.Package(
            key=f"`{chain[0]}`",
            imports=(chain[0],),
            pip=(),
            what=f"`{chain[0]}` needs {needs} ({' -> '.join(chain)})",
            instead=kernels.port_hint(kind, self.ctx.targets),
            severity=ERROR,
            per_target=kernels.severity(kind),
        )

    def _key(self, name: str) -> tuple[int, str]:
        """A name as the scope the walk is in sees it: the scope that binds it, and the name."""
        resolver = self.ctx.resolver
        return (id(resolver.scope_of(name) if resolver is not None else None), name)

    def _kernels_module(self, module: str) -> bool:
        """Whether one of the repository's modules fails to import because it imports Triton or
        a CUDA extension itself (mamba's `ops.triton.layer_norm`): what it defines are the
        kernels' wrappers, each call of which needs a replacement. A module further from the
        cause loads once that one is fixed."""
        chain = self.ctx.project.failing_import(module, self.ctx.module.name)
        return chain is not None and imports_cause_itself(chain)

    def _note(self, name: str, module: str, package: packages.Package, *, local: bool, target: str) -> None:
        """A name an import of `module` binds to `target`, where the import is optional (else
        PC701's finding stands, or PC610's for a `local` module, one of the repository's own
        that fails to import)."""
        if local:
            self._local.add(name)
            self._targets[name] = target
        else:
            self._local.discard(name)
            top = module.split(".")[0]
            # a package that groups several (`cutlass` among the CUDA GEMM libraries) is named as imported
            self._shown[name] = top if any(each.split(".")[0] == top for each in package.imports) else package.key
        optional, key = optional_import(self.ctx.ancestors, self.ctx, package), self._key(name)
        if optional:
            self._optional[key] = package
            self._by_choice[key] = by_choice(optional)
            stand_in = _stand_in(self.ctx.ancestors, name)
            if stand_in is not None:
                self._stand_ins[key] = stand_in
            else:
                self._stand_ins.pop(key, None)
        else:
            self._optional.pop(key, None)  # also imported for sure: the import fails first
            if not local or self._kernels_module(module):
                self._imported[name] = package
                function = flow.enclosing_function(self.ctx.ancestors)
                if function is not None:
                    self._importing[name] = function
                else:
                    self._importing.pop(name, None)

    def visit_Assign(self, node: cst.Assign) -> None:
        """A module-level name bound to what an unguarded import of a failing module binds, or
        an attribute of it (`ReLUSqrdMLP = FusedLinearReLUSquareFunction.apply`); in the first
        pass, also one bound to the module's own function or class (`_record_runners`)."""
        target = node.targets[0].target if len(node.targets) == 1 else None
        if len(self.ctx.ancestors) != 2 or type(target) is not cst.Name:
            return
        value = patterns.dotted(node.value)
        first = value.split(".")[0]
        if first in self._top:
            self._top_aliases[target.value] = value
        if first in self._local.intersection(self._imported) and self.ctx.qualified_names(node.value):
            self._aliases[target.value] = value

    def _unaliased(self, called: str) -> str:
        """`called` with a module-level alias (`_aliases`) replaced by what it stands for,
        where the alias is what the name means here (not a local of its name)."""
        first, dot, rest = called.partition(".")
        resolver = self.ctx.resolver
        if first in self._aliases and resolver is not None and resolver.scope_of(first) is resolver.module:
            return self._aliases[first] + dot + rest
        return called

    def visit_Call(self, node: cst.Call) -> None:
        written = patterns.dotted(node.func)
        called = self._unaliased(written)
        package = self._optional.get(self._key(called.split(".")[0]))
        if "__" in called or called.rpartition(".")[2].startswith(("has_", "is_")):
            return  # `trt.__version__.split(".")`, `natten.has_fused_na()`: questions, no work
        imported = self._imported.get(called.split(".")[0])
        if imported is not None and self._top and called.split(".")[0] not in self._local:
            self._note_run(called, imported)
        if called != written and imported is not None and self.ctx.project.complete:
            self._imported_call(node.func, written, imported, self.ctx.chain(node.func))
            return
        if package is None and imported is not None and self.ctx.qualified_names(node.func):
            if not self.ctx.project.complete or called.split(".")[0] in self._local:  # the project pass knows those
                self._imported_call(node.func, called, imported, self.ctx.chain(node.func))
            return
        if package is None and self.ctx.qualified_names(node.func) and flow.enclosing_function(self.ctx.ancestors):
            # a function may call what the module imports further down (`if __name__ == "__main__":`)
            self._ahead.append((node.func, called, self.ctx.chain(node.func)))
        if package is None or not self.ctx.qualified_names(node.func):
            return  # not the imported name here (a parameter or local of the same name)
        self._optional_use(node.func, called, package)

    def _optional_use(
        self, node: cst.BaseExpression, called: str, package: packages.Package, verb: str = "calls"
    ) -> None:
        """A call of what an optional import binds, or (`verb="uses"`) a use of it as a value,
        which only counts where the target has no other path or installs the package."""
        declared = package.key in self.ctx.project.declared_packages
        name = called.split(".")[0]
        module_flow = self.ctx.flow
        assert module_flow is not None, "a Python rule"
        local = name in self._local  # known only to the project pass
        if self.ctx.project.complete and not declared and not local:
            return  # the first pass reported it
        stand_in = self._stand_ins.get(self._key(name))
        checks = stand_in[0] if stand_in is not None else frozenset({name})
        function = flow.enclosing_function(self.ctx.ancestors)
        required = _raises_without(function, checks, module_flow.resolver)
        if required is not None:
            severity, saying = package.severities(), _REQUIRED.format(test=required)
        elif verb == "uses":
            return  # a value the portable path may never use; where it is declared, its calls tell
        elif declared:
            declaring = _DECLARED_BASE if verb == "subclasses" else _DECLARED
            severity, saying = package.severities(), declaring.format(package=self._shown.get(name, package.key))
        elif local and self._launched(called) and "triton" in self.ctx.project.declared_packages:
            severity, saying = package.severities(), _DECLARED_TRITON.format(kernel=self._launched(called))
        elif stand_in is not None and not _checked(self.ctx.ancestors, checks | self._asking(checks)):
            attribute = called.split(".")[1] if "." in called else ""
            if stand_in[1]:
                leaves, error = f"leaves `{name}` unbound", _UNBOUND.format(name=name)
            else:
                leaves = f"sets `{name} = None`"
                error = _NO_ATTRIBUTE.format(attribute=attribute) if attribute else _NOT_CALLABLE
            severity, saying = package.severities(), _STAND_IN.format(leaves=leaves, error=error)
        elif local or verb == "subclasses":
            # the target takes the other path (PC610 tells of a local module, if it must); an
            # undeclared package's class is defined only where the checked import succeeded
            return
        else:
            most = at_most_info if self._by_choice.get(self._key(name)) else at_most_warning  # an export, a pick
            severity, saying = (
                most(package.severities()),
                _UNDECLARED.format(package=self._shown.get(name, package.key)),
            )
        self.report(
            node,
            severity=severity,
            verb=verb,
            called=called,
            package=self._shown.get(name, package.key),
            declared=saying,
            what=package.what,
            instead=package.instead,
        )

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self._top and self._imported:
            owner = self._owner()
            if owner and owner != node.value:
                self._uses_top.setdefault(owner, set()).add(node.value)
        self._referenced(node)

    def _owner(self) -> str:
        return top_owner(self.ctx.ancestors, self._top)

    def _note_run(self, called: str, package: packages.Package) -> None:
        """A call of a package with no build for some target, in one of the module's functions
        or classes, on no fallback's path (first pass)."""
        owner = self._owner()
        if owner and package.fails_to_import() and not fallbacks.fallback_evidence(self.ctx.ancestors):
            runs = self._runs.setdefault(owner, {})
            runs.setdefault(called, sum(map(len, self._runs.values())))

    def _record_runners(self) -> None:
        """Record the module's functions, `apply` and construction of its classes, and the
        module-level names bound to either, that reach a call of a CUDA-only package through
        the module's own functions and autograd Functions (PACKAGE_RUNNER): TinyLlama's
        `apply_rotary_emb_func = ApplyRotaryEmb.apply`, whose forward calls `rotary_emb`. Not
        through its other classes: a model built of layers that call the package (nanotron's
        `LlamaModel`) is fixed in the layer, not at each construction."""
        module = self.ctx.module.name
        wrappers = {
            name
            for name, defined in self._top.items()
            if isinstance(defined, cst.FunctionDef)
            or any(self.ctx.qualified_names(base.value) & patterns.AUTOGRAD_FUNCTIONS for base in defined.bases)
        }
        through = {owner: used & wrappers for owner, used in self._uses_top.items()}
        found: dict[str, str] = {}
        for name, defined in self._top.items():
            runs = [run for used in reachable(name, through) for run in self._runs.get(used, {}).items()]
            if runs and not fallbacks.looks_like_reference(name):  # `mamba_inner_ref`: named as the PyTorch path
                found[name] = min(runs, key=lambda run: (run[1], run[0]))[0]  # the first in the source
                if isinstance(defined, cst.ClassDef):
                    found[f"{name}.apply"] = found[name]
        for alias, value in self._top_aliases.items():
            if value in found:
                found[alias] = found[value]
        for name, runs in sorted(found.items()):
            self.record(project.PACKAGE_RUNNER, f"{module}.{name}" if module else name, UNPLACED, runs=runs)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._referenced(node)

    def _referenced(self, node: cst.Name | cst.Attribute) -> None:
        """What an unguarded import of a CUDA-only package binds, given as a value rather than
        called (swav's `restore(..., amp=apex.amp)`, `norm_layer=FusedLayerNorm`, also as one
        choice of a conditional expression): the value
        must change with the calls (first pass; a call is `visit_Call`'s). So must what an
        optional import binds, where the target has no other path (open-muse's
        `optimizer_cls = apex.optimizers.FusedAdam`, whose `else:` raises)."""
        if not self._imported and not self._optional:
            return  # nothing imported from CUDA-only packages (yet): most modules
        parent = self.ctx.parent
        given = (
            type(parent) in (cst.Arg, cst.Element, cst.Return)
            or (type(parent) is cst.Assign and parent.value is node)
            or (type(parent) is cst.DictElement and parent.value is node)
            or (type(parent) is cst.IfExp and parent.test is not node)  # qlora's `bnb.nn.Linear4bit if bits == 4 else`
        )
        if not given or self._type_test():
            return
        used = patterns.dotted(node)
        first = used.split(".")[0]
        unaliased = self._unaliased(used)
        optional = self._optional.get(self._key(unaliased.split(".")[0]))
        if optional is not None and "__" not in used and self.ctx.qualified_names(node):
            self._optional_use(node, unaliased, optional, "subclasses" if self._class_base() else "uses")
            return
        imported = self._imported.get(first)
        if imported is None or self._key(first) in self._optional or first in self._local or "__" in used:
            return  # `print(apex.__version__)` asks, and uses nothing
        if self.ctx.project.complete or not self.ctx.qualified_names(node):
            return
        self._imported_call(node, used, imported, self.ctx.chain(node), "uses")

    def _class_base(self) -> bool:
        """Whether the name the walk is at is a base of the class being defined (lit-llama's
        `class Linear8bitLt(bnb.nn.Linear8bitLt)`): the definition runs where the import
        succeeds, and what it builds runs the package's kernels."""
        ancestors = self.ctx.ancestors
        if len(ancestors) < 2 or type(ancestors[-2]) is not cst.ClassDef:
            return False
        return any(base is ancestors[-1] for base in ancestors[-2].bases)

    def _type_test(self) -> bool:
        """Whether the name the walk is at is a class an `isinstance` or `issubclass` test is
        given (ConvNeXt-V2's `isinstance(m, MinkowskiConvolution)` in `_init_weights`): a test
        of what the model holds, no use of the package's kernels."""
        ancestors = self.ctx.ancestors
        index = len(ancestors) - 1
        while index > 0 and type(ancestors[index]) in (cst.Element, cst.Tuple, cst.Arg):
            index -= 1
        call = ancestors[index]
        return (
            index < len(ancestors) - 1
            and type(call) is cst.Call
            and type(call.func) is cst.Name
            and call.func.value in ("isinstance", "issubclass")
            and not self.ctx.qualified_names(call.func)
        )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """A function decorated by what an unguarded import binds (`@T.prim_func` of TileLang,
        `@cute.jit` and `@cute.kernel` of CuTe), or a Triton kernel (`@triton.jit`): the
        module writes kernels in that language."""
        for decorator in node.decorators:
            func = decorator.decorator.func if type(decorator.decorator) is cst.Call else decorator.decorator
            imported = self._imported.get(patterns.dotted(func).split(".")[0])
            names = self.ctx.qualified_names(func)
            if imported is not None and names and not names & _TRITON_JIT:
                self._kernels_written = "other"
            elif names & _TRITON_JIT and not self._kernels_written:
                self._kernels_written = "triton"

    def leave_Module(self, node: cst.Module) -> None:
        """Calls in functions of what an unguarded import further down binds (LoRA's
        `amp.scale_loss(...)` in `optimizer_step`, with `from apex import amp` under `if
        __name__ == "__main__":`): by the time the function runs, the import has failed.
        Then the uses of unguarded imports, but none where the module writes kernels in a
        package's language (mamba's TileLang and CuTe kernels, whose every line calls `T.` or
        `cute.` and helpers of other kernel packages), and where it writes Triton kernels, none
        of the repository's own modules (mamba's wrappers chain the launchers of its other
        kernel modules): the kernel source is rewritten whole, and PC701 and PC610 report its
        imports. A Triton module's calls of a listed package stay (nanotron's ring attention
        calls flash-attn's varlen kernels beside its own Triton helpers)."""
        for func, called, chain in self._ahead if not self.ctx.project.complete else ():
            first = called.split(".")[0]
            imported = self._imported.get(first)
            if imported is not None and self._key(first) not in self._optional:  # the module's binding, here
                self._imported_call(func, called, imported, chain)
        if self._kernels_written != "other":
            self.reports.extend(report for report, local in self._uses if not (local and self._kernels_written))
        if self._top and not self.ctx.project.complete:
            self._record_runners()

    def _imported_call(
        self,
        func: cst.BaseExpression,
        called: str,
        imported: packages.Package,
        chain: tuple[cst.CSTNode, ...],
        verb: str = "calls",
    ) -> None:
        """Notes the report of a call of what an unguarded import binds (kept or not at the end
        of the module): at most a warning, since the import is PC701's error; info for what one
        of the repository's kernels modules defines (PC610's), whose one definition may take a
        portable path instead. Once per function and package where the function imports it
        itself (arcface's `dali_data_iter()`, which builds a whole DALI pipeline after `import
        nvidia.dali.fn as fn`): the function is the package's path, to be replaced whole."""
        importing = self._importing.get(called.split(".")[0])
        if importing is not None and any(node is importing for node in chain):
            key = (id(importing), imported.key)
            if key in self._reported_in:
                return
            self._reported_in.add(key)
        local = self._unaliased(called).split(".")[0] in self._local
        kernel = self._launched(called) if local else ""
        extension = self._applied_extension(called) if local and not kernel else ""
        runs = self._package_run(called) if local and not kernel and not extension else ""
        ceiling = INFO if local and not kernel and not extension and not runs else WARNING
        if kernel or extension:
            declared = _LAUNCHING.format(kernel=kernel) if kernel else _APPLYING.format(extension=extension)
        elif runs:
            declared = _RUNNING.format(runs=runs)
        else:
            declared = _IMPORTED_LOCAL if local else _IMPORTED
        report = self.report_here(
            func,
            severity={t: min(level, ceiling) for t, level in imported.severities().items()},
            chain=chain,
            verb=verb,
            called=called,
            package=self._shown.get(called.split(".")[0], imported.key),
            declared=declared,
            what=imported.what,
            instead=imported.instead,
            hint=f"{imported.what}: use instead: {imported.instead}",
        )
        self._uses.append((report, local))

    def _launched(self, called: str) -> str:
        """The Triton kernel a call of one of the repository's functions always launches (the
        short name; empty if none): `layer_norm_fn(...)`, `Fn.apply(...)`."""
        first, _, rest = self._unaliased(called).partition(".")
        target = self._targets.get(first)
        kernel = self.ctx.project.launched_by(f"{target}.{rest}" if rest else target) if target else None
        return kernel.rpartition(".")[2] if kernel else ""

    def _package_run(self, called: str) -> str:
        """The call of a CUDA-only package a call of one of the repository's functions always
        makes (empty if none): `apply_rotary_emb_func(...)`, `FusedCrossEntropyLoss()`."""
        first, _, rest = self._unaliased(called).partition(".")
        target = self._targets.get(first)
        runs = self.ctx.project.package_run(f"{target}.{rest}" if rest else target) if target else None
        return runs or ""

    def _applied_extension(self, called: str) -> str:
        """The CUDA extension a call runs, where what it calls comes from a module that fails
        to import for want of it: an autograd Function's `apply` (Deformable-DETR's
        `MSDeformAttnFunction.apply`, whose module imports `MultiScaleDeformableAttention`),
        or a function or class of the very module that builds or imports the extension
        (stylegan2's `upfirdn2d` and `FusedLeakyReLU`, which run it on every device but the
        CPU), also as its package re-exports it; empty elsewhere. A function named as a
        PyTorch reference (`selective_scan_ref`), what a module further from the cause defines
        (`conv2d_gradfix.conv2d`, failing only with its package), and what a module importing
        a package with no build defines (it may not use the package), stay info."""
        first, _, rest = self._unaliased(called).partition(".")
        known = self.ctx.project
        target = self._targets.get(first, "")
        if rest == "apply" and patterns.class_like(target):
            chain = known.failing_import(target.rpartition(".")[0], self.ctx.module.name)
        else:
            defined = known.defined_as(f"{target}.{rest}" if rest else target)
            module, _, name = defined.rpartition(".")
            chain = known.failing_import(module, self.ctx.module.name)
            if chain is None or chain[0] != module or len(chain) != 2 or fallbacks.looks_like_reference(name):
                return ""
        cause = chain[-1] if chain else ""
        if not cause or cause.split(".")[0] == project.TRITON or project.failing_package(cause, known.cuda_extensions):
            return ""  # a package with no build: what the module defines may not use it (OpenSora's `rope`)
        return cause

    def _asking(self, names: frozenset[str]) -> frozenset[str]:
        """The module's functions that read one of `names`: a call of one in a test checks them
        (k-diffusion's `if use_flash_2(qkv):`, which tests `flash_attn is None`)."""
        if names not in self._askers:
            module_flow = self.ctx.flow
            assert module_flow is not None, "a Python rule"
            self._askers[names] = frozenset(
                title
                for title, function in module_flow.module_functions().items()
                if any(type(each) is cst.Name and each.value in names for each in descendants(function.body))
            )
        return self._askers[names]


def _stand_in(ancestors: Sequence[cst.CSTNode], name: str) -> tuple[frozenset[str], bool] | None:
    """For an import in `try:` whose handler binds `name = None` (Swin's `FusedAdam = None`)
    or leaves it unbound (ConvNeXt's `except ImportError: has_apex = False`): the names a
    check of it would read (`name` and the flags the `try` or handler binds,
    `XFORMERS_AVAILABLE = True`), and whether the handler leaves it unbound; None for any other fallback
    (a portable stand-in, also one the module binds outside the `try`)."""
    path = list(ancestors)
    found = next(
        (
            parent
            for parent, child in zip(reversed(path[:-1]), reversed(path[1:]))
            if type(parent) is cst.Try and child is parent.body
        ),
        None,
    )
    if found is None:
        return None
    bound: dict[str, list[cst.BaseExpression | None]] = {}
    for block in (found.body, *(handler.body for handler in found.handlers)):
        for node in descendants(block, _SCOPES):
            for target, value in _bindings(node):
                bound.setdefault(target, []).append(value)
    flags = {
        flag
        for flag, values in bound.items()
        if any(type(v) is cst.Name and v.value in ("True", "False") for v in values)
    }
    handled = [
        value
        for handler in found.handlers
        for node in descendants(handler.body, _SCOPES)
        for target, value in _bindings(node)
        if target == name
    ]
    if any(type(value) is cst.Name and value.value == "None" for value in handled):
        return frozenset({name, *flags}), False
    if handled or not flags or _bound_outside(path[0], found, name):
        return None
    return frozenset({name, *flags}), True


def _bindings(node: cst.CSTNode) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """The names a statement binds, with the value where it assigns one (None for an import,
    a `def` or a `class`)."""
    if type(node) is cst.Assign:
        for target in node.targets:
            if type(target.target) is cst.Name:
                yield target.target.value, node.value
    elif type(node) is cst.AnnAssign and type(node.target) is cst.Name:
        yield node.target.value, node.value
    elif type(node) in (cst.Import, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if type(bound) is cst.Name:
                yield bound.value, None
            elif type(alias.name) is cst.Attribute:  # `import a.b` binds `a`
                yield patterns.dotted(alias.name).split(".")[0], None
    elif type(node) in (cst.FunctionDef, cst.ClassDef):
        yield node.name.value, None


def _bound_outside(module: cst.CSTNode, guarded: cst.Try, name: str) -> bool:
    """Whether the module binds `name` somewhere other than in the `try` (a fallback set later)."""
    inside = set(map(id, descendants(guarded)))
    return any(
        target == name for node in descendants(module) if id(node) not in inside for target, _ in _bindings(node)
    )


def _checked(ancestors: Sequence[cst.CSTNode], names: frozenset[str]) -> bool:
    """Whether a test around the node, or an `if` of its function (an early `return`), reads
    one of `names` (`if FusedAdam is not None:`, `x if XFORMERS_AVAILABLE else y`, `use_apex
    and amp`), or the node runs only where a caller turns on a flag of its function that is
    off by default (InternViT's `if use_flash_attn:`, which the model builds from
    `use_flash_attn and has_flash_attn`): the caller checks."""
    function = flow.enclosing_function(ancestors)
    checks = [node for node in descendants(function.body, _SCOPES) if type(node) is cst.If] if function else []
    flags = frozenset(
        param.name.value
        for param in (function.params.params if function is not None else ())
        if type(param.default) is cst.Name and param.default.value == "False"
    )
    if flags and any(
        type(node) in (cst.If, cst.IfExp) and _reads_names(node.test, flags) and child is node.body
        for node, child in zip(ancestors, ancestors[1:])
    ):
        return True
    for node in (*ancestors, *checks):
        test = (
            node.test
            if type(node) in (cst.If, cst.IfExp, cst.While)
            else node.left
            if type(node) is cst.BooleanOperation
            else None
        )
        if test is not None and _reads_names(test, names):
            return True
    return False


def _reads_names(test: cst.BaseExpression, names: frozenset[str]) -> bool:
    return any(type(each) is cst.Name and each.value in names for each in (test, *descendants(test)))


def _raises_without(function: cst.FunctionDef | None, names: frozenset[str], resolver: Resolver) -> str | None:
    """How the function raises if the optional import left one of `names` unset or a flag
    False: `if name is None: raise ...`, `if not name: raise ...` (k-diffusion's NATTEN
    attention), `assert has_apex and ...` (ConvNeXt's fused optimizers) or `if has_apex: ...
    else: raise ...` (open-muse's fused Adam), as written."""
    if function is None:
        return None
    for node in descendants(function.body, _SCOPES):
        if type(node) is cst.If and _tests_missing(node.test, names) and flow.raises(node.body, resolver):
            return f"if {cst.Module([]).code_for_node(node.test)}: raise"
        if type(node) is cst.Assert and _asserts(node.test, names):
            return f"assert {cst.Module([]).code_for_node(node.test)}"
        if (
            type(node) is cst.If
            and type(node.orelse) is cst.Else
            and _asserts(node.test, names)
            and flow.raises(node.orelse.body, resolver)
        ):
            return f"if {cst.Module([]).code_for_node(node.test)}: ... else: raise"
    return None


def _asserts(test: cst.BaseExpression, names: frozenset[str]) -> bool:
    """`has_apex`, `name is not None`, or either among what `and` joins."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return _asserts(test.left, names) or _asserts(test.right, names)
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        compared = test.comparisons[0]
        return (
            type(compared.operator) is cst.IsNot
            and type(test.left) is cst.Name
            and test.left.value in names
            and type(compared.comparator) is cst.Name
            and compared.comparator.value == "None"
        )
    return type(test) is cst.Name and test.value in names


def _tests_missing(test: cst.BaseExpression, names: frozenset[str]) -> bool:
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return type(test.expression) is cst.Name and test.expression.value in names
    if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.comparisons[0].operator) is cst.Is:
        compared = test.comparisons[0].comparator
        return (
            type(test.left) is cst.Name
            and test.left.value in names
            and type(compared) is cst.Name
            and compared.value == "None"
        )
    return False
