from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.rewrites import calls
from portcheck.rewrites.edits import Edit
from portcheck.rule import ERROR, WARNING, FileContext, Invalid, Rule, Valid

# What torch no longer has (checked against torch 2.13.0), and what replaces it.
# Modules: importing them, or anything from them, raises ModuleNotFoundError.
_GONE_MODULES = {
    "torch._six": "Python's own names: `math.inf`, `str` (string_classes), `int` (int_classes), `collections.abc`",
    "torch.utils.ffi": "torch.utils.cpp_extension",
    "torch.distributed.deprecated": "torch.distributed",
    "torch.legacy": "torch.nn",
    "torch.utils.trainer": "a training loop of your own",
    "torch.nn._functions": "torch.nn.functional",
}
# Names: importing them raises ImportError, reading them AttributeError.
_GONE_NAMES = {
    "torch.rfft": "torch.fft.rfftn (complex output: torch.view_as_real gives the old layout)",
    "torch.irfft": "torch.fft.irfftn (takes complex input: torch.view_as_complex)",
    "torch.ifft": "torch.fft.ifftn",
    "torch.utils.data.dataloader.numpy_type_map": "torch.utils.data.default_collate",
    "torch.utils.data.dataloader.string_classes": "str",
    "torch.utils.data.dataloader.int_classes": "int",
    "torch.utils.data.dataloader._use_shared_memory": "torch.utils.data.get_worker_info() is not None",
    "torch._utils._accumulate": "itertools.accumulate",
    "torch.utils.data.dataset._accumulate": "itertools.accumulate",
}
# Functions still there, raising "This function was deprecated since version 1.9 and is now removed".
_RAISING = {
    "torch.symeig": "torch.linalg.eigh (lower triangle by default; `UPLO='U'` for the old default)",
    "torch.eig": "torch.linalg.eig (complex results)",
    "torch.lstsq": "torch.linalg.lstsq (arguments swapped: A first)",
    "torch.solve": "torch.linalg.solve (arguments swapped: A first; no LU returned)",
    "torch.matrix_rank": "torch.linalg.matrix_rank",
}


def _severity() -> dict:
    """An error where the backend is a plugin built for a recent torch (TorchTPU, TorchNeuron,
    torch_xla...); a warning elsewhere, where a port may keep an old torch for a while."""
    return {name: ERROR if t.torch_versions else WARNING for name, t in target_data.all_targets().items()}


class RemovedTorchApi(Rule):
    """## What it does
    Reports what older code uses from torch that the releases the targets need no longer have:
    the `torch._six` module (`from torch._six import inf, string_classes`), `torch.legacy`,
    `torch.utils.ffi`, `torch.distributed.deprecated`, the DataLoader's old `numpy_type_map` and
    `string_classes`, the FFT functions `torch.rfft`, `torch.irfft`, `torch.ifft` (now the
    `torch.fft` module), and the linear-algebra functions that now raise when called
    (`torch.symeig`, `torch.eig`, `torch.lstsq`, `torch.solve`, `torch.matrix_rank`); and
    `torch.stft(...)` without `return_complex=`, which torch 2 refuses for a real signal. An
    import is reported where it is written; a function at each call.

    ## Why is this bad?
    TorchTPU needs torch 2.11 to 2.15 and TorchNeuron torch 2.14, so a port is also an upgrade
    of torch. Code written for torch 1.x then fails before it reaches the accelerator: the
    import raises `ModuleNotFoundError: No module named 'torch._six'` at start-up, and the
    linear-algebra functions raise `RuntimeError: This function was deprecated since version
    1.9 and is now removed`. Nothing in the line says "cuda".

    ## Example
    ```python
    from torch._six import inf
    eigenvalues, eigenvectors = torch.symeig(cov, eigenvectors=True)
    ```

    ## Use instead
    ```python
    from math import inf
    eigenvalues, eigenvectors = torch.linalg.eigh(cov)
    ```

    ## Targets
    An error where the backend is a plugin built for recent torch releases (tpu, neuron, xla,
    npu, hpu); a warning elsewhere.

    ## Fix safety
    Safe: `from torch._six import inf` (and `nan`) becomes `from math import inf`, the same
    float. Unsafe: `torch.stft(x, n)` becomes `torch.view_as_real(torch.stft(x, n,
    return_complex=True))`, the real view torch 1.x returned for a real signal; for a complex
    one, which needed no change, it turns the complex result into its real view. Not fixed otherwise: the replacements differ in arguments or results (complex FFT
    output, swapped arguments, the triangle `eigh` reads), or in what they name (`str` for
    `string_classes`, a module for `container_abcs`).
    """

    code = "PC710"
    name = "removed-torch-api"
    message = "`{name}` is gone from the torch releases the target needs: {effect}"
    hint = "use {instead}"
    severity = _severity()
    fix_safety = FixSafety.SAFE
    # The distinctive part of each name (`eig(`: "eig" alone is in every "weight").
    triggers = (b"_six", b"ffi", b"deprecated", b"legacy", b"trainer", b"_functions", b"fft", b"_map", b"_classes",
                b"_use_shared_memory", b"_accumulate", b"eig(", b"lstsq", b"solve", b"matrix_rank", b"stft")  # fmt: skip
    watched_names = (*_GONE_MODULES, *_GONE_NAMES, *_RAISING)

    VALID = [
        Valid("import math\nfrom torch import linalg\nw, v = linalg.eigh(cov)\nx = math.inf\n"),
        Valid("import torch\nspectrum = torch.fft.rfft(signal)\n"),
        Valid("import torch as T\nfrom torch.nn import functional as F\nw = T.linalg.solve(A, B)\n"),
        Valid("import torch.fft\nfrom torch.utils.data import default_collate\n"),
        Valid("import torch\nspec = torch.stft(y, 1024, return_complex=True)\nmel = librosa.stft(y)\n"),
        # `torch` is a parameter here
        Valid("def eig(torch, a):\n    return torch.symeig(a)\n"),
    ]
    INVALID = [
        Invalid(  # MAE
            "from torch._six import inf\nimport torch\ntotal = torch.tensor(inf)\n",
            lines=[1],
            message="`torch._six` is gone",
            fixed="from math import inf\nimport torch\ntotal = torch.tensor(inf)\n",
        ),
        Invalid("from torch._six import string_classes, inf\n", lines=[1]),  # taming-transformers: not fixed
        Invalid("import torch._six as six\nx = six.string_classes\n", lines=[1]),
        Invalid("import torch\nif isinstance(v, torch._six.string_classes):\n    pass\n", lines=[2]),
        Invalid(
            "import torch as T\nfrom torch.nn import functional as F\nw, v = T.symeig(cov, eigenvectors=True)\n",
            lines=[3],
            message="raises RuntimeError when called",
        ),
        Invalid("from torch import solve, rfft\nx, lu = solve(b, A)\n", lines=[1, 2]),
        Invalid("from torch.utils.data.dataloader import numpy_type_map, default_collate\n", lines=[1]),
        Invalid("import torch\nspec = torch.rfft(x, 2, onesided=False)\n", lines=[2], message="AttributeError"),
        Invalid(  # hifi-gan's mel_spectrogram
            "import torch as T\nspec = T.stft(y, 1024, hop_length=256, window=w, center=False)\n",
            lines=[2],
            message="raises RuntimeError for a real signal",
            unsafe=True,
            fixed="import torch as T\nspec = T.view_as_real(T.stft(y, 1024, hop_length=256, window=w, center=False, return_complex=True))\n",
        ),
        Invalid("from torch import stft\nspec = stft(y, 1024)\n", lines=[2]),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._imported_gone: set[str] = set()  # what reported imports bind: `six`, `torch._six`, `inf`

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = patterns.dotted(alias.name)
            gone = _gone_module(module)
            if gone is not None:
                self._report_import(alias, gone)
                self._imported_gone.add(_local_name(alias))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = patterns.dotted(node.module)
        gone = _gone_module(module)
        names = node.names if not isinstance(node.names, cst.ImportStar) else ()
        if gone is not None:
            moved = gone == "torch._six" and names and all(patterns.dotted(a.name) in _MATH_NAMES for a in names)
            edit = Edit(node.module, cst.Name("math"), FixSafety.SAFE, "import from math") if moved else None
            self._report_import(node.module, gone, edit)
            self._imported_gone.update(_local_name(alias) for alias in names)
            return
        for alias in names:
            qualified = f"{module}.{patterns.dotted(alias.name)}"
            if qualified in _GONE_NAMES:
                self._report_import(alias.name, qualified)
                self._imported_gone.add(_local_name(alias))

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        written = patterns.dotted(node)
        if not written or any(written == bound or written.startswith(bound + ".") for bound in self._imported_gone):
            return  # the import is the finding
        if qualified_name in _RAISING:
            parent = self.ctx.parent
            if isinstance(parent, cst.Call) and parent.func is node:
                self.report(node, name=qualified_name, effect=_RAISES, instead=_RAISING[qualified_name])
            return
        gone = _gone_module(qualified_name) or (qualified_name if qualified_name in _GONE_NAMES else None)
        if gone is not None and isinstance(node, cst.Attribute):
            self.report(node, name=gone, effect=_READ, instead=_replacement(gone))

    def visit_Call(self, node: cst.Call) -> None:
        """`torch.stft(x, n_fft)` without `return_complex=`: torch 2 raises for a real signal."""
        if "torch.stft" not in self.ctx.qualified_names(node.func) or patterns.keyword(node, "return_complex"):
            return
        if any(arg.star for arg in node.args):
            return  # `**kwargs` may give it
        edit = None
        if isinstance(node.func, cst.Attribute):  # `torch.stft`, `T.stft`: the module's name is at hand
            complex_call = calls.with_keyword(node, "return_complex", cst.Name("True"))
            wrapped = cst.Call(cst.Attribute(node.func.value, cst.Name("view_as_real")), [cst.Arg(complex_call)])
            edit = Edit(node, wrapped, FixSafety.UNSAFE, "return_complex=True, as a real view")
        self.report(
            node, edit=edit, name="torch.stft(...) without return_complex=", effect=_STFT, instead=_STFT_INSTEAD
        )

    def _report_import(self, node: cst.CSTNode, gone: str, edit: Edit | None = None) -> None:
        self.report(node, edit=edit, name=gone, effect=_IMPORTED, instead=_replacement(gone))


_MATH_NAMES = frozenset({"inf", "nan"})  # torch._six's, the same floats as math's
_IMPORTED = "importing it raises, so the program stops at start-up"
_READ = "reading it raises AttributeError"
_RAISES = "it raises RuntimeError when called"
_STFT = "it raises RuntimeError for a real signal (torch 1.x returned the real view)"
_STFT_INSTEAD = (
    "torch.view_as_real(torch.stft(..., return_complex=True)), the same real view, or work with the complex result"
)


def _gone_module(module: str) -> str | None:
    """The removed module `module` is, or is inside."""
    return next((gone for gone in _GONE_MODULES if module == gone or module.startswith(gone + ".")), None)


def _replacement(gone: str) -> str:
    return _GONE_MODULES.get(gone) or _GONE_NAMES[gone]


def _local_name(alias: cst.ImportAlias) -> str:
    return patterns.dotted(alias.asname.name if alias.asname is not None else alias.name)
