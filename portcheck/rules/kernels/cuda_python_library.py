from __future__ import annotations

import libcst as cst

from portcheck import kernels, patterns
from portcheck.rule import ERROR, WARNING, Invalid, Rule, Valid, per_target

# module -> (what it is, what to use instead)
_LIBRARIES = {
    "cupy": ("CuPy, NumPy on CUDA", "torch tensor ops on the target device (or NumPy on the CPU)"),
    "cupyx": ("CuPy extensions", "torch tensor ops on the target device"),
    "pycuda": ("PyCUDA, CUDA driver and kernels from Python", "torch tensor ops, or a kernel in the target's language"),
    "numba.cuda": ("Numba CUDA kernels", "a kernel in the target's language, or torch ops"),
    "cuda": ("cuda-python, the CUDA driver and runtime bindings", "torch.accelerator and torch ops"),
}
_ROCM = {"cupy": WARNING, "cupyx": WARNING}  # CuPy has ROCm builds; the others are CUDA only


def _library(module: str) -> str | None:
    for name in _LIBRARIES:
        if module == name or module.startswith(name + "."):
            return name
    return None


class CudaPythonLibrary(Rule):
    """## What it does
    Reports imports of Python libraries that program NVIDIA GPUs directly: CuPy (`cupy`,
    `cupyx`), PyCUDA, Numba's CUDA target (`numba.cuda`) and cuda-python (`cuda`,
    `cuda.bindings`).

    ## Why is this bad?
    They talk to the CUDA driver themselves, outside PyTorch's device abstraction: on a TPU,
    Trainium, Apple, Intel or Gaudi host they fail to import or find no device, and the kernels
    written with them must be rewritten.

    ## Example
    ```python
    import cupy as cp
    from numba import cuda

    @cuda.jit
    def scale(x, s):
        ...
    ```

    ## Use instead
    torch tensor operations on the target device (`torch.from_dlpack` interoperates with
    NumPy-like libraries), and, for hot loops, a kernel in the target's language: Pallas on TPU,
    NKI on Trainium, SYCL on Intel GPUs, Metal on Apple GPUs.

    ## Targets
    An error on every target; on ROCm a warning for CuPy, which has ROCm builds, and an error
    for the CUDA-only others.

    ## Fix safety
    No automatic fix.
    """

    code = "PC606"
    name = "cuda-python-library"
    message = "imports {what}, which programs NVIDIA GPUs directly"
    hint = "use {instead}; kernels: {port}"
    severity = per_target(ERROR)
    triggers = (b"cupy", b"pycuda", b"numba", b"cuda")

    VALID = [
        Valid("import numpy as np\nimport numba\n@numba.njit\ndef f(x):\n    return x\n"),
        Valid("from torch import cuda\nimport torch.cuda\nimport torch as T\nimport torch\n"),
        Valid("def f(cuda):\n    return cuda.jit\n"),
        Valid("from mypkg import cuda_utils\nfrom .cuda import helpers\n"),
        Valid("from torch.cuda import synchronize as sync\n"),
    ]
    INVALID = [
        Invalid("import cupy as cp\nx = cp.zeros(3)\n", lines=[1], message="CuPy"),
        Invalid("from numba import cuda\n@cuda.jit\ndef k(x):\n    pass\n", lines=[1], message="Numba"),
        Invalid("import pycuda.autoinit\nimport pycuda.driver as drv\n", lines=[1, 2]),
        Invalid("from cuda import cuda, cudart\n", lines=[1], message="cuda-python"),
        Invalid("import numba.cuda\nimport cupyx.scipy.ndimage\n", lines=[1, 2]),
        Invalid("import cupy\n", lines=[1], options={"targets": ["rocm"]}),
    ]

    def visit_Import(self, node: cst.Import) -> None:
        self._check_all(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._check_all(node)

    def _check_all(self, node: cst.Import | cst.ImportFrom) -> None:
        for module in patterns.imported_modules(node, lambda m: _library(m) is not None):
            self._check(node, module)

    def _check(self, node: cst.CSTNode, module: str) -> None:
        library = _library(module)
        if library is None:
            return
        what, instead = _LIBRARIES[library]
        severity = {**self.severity, "rocm": _ROCM.get(library, ERROR)}
        self.report(
            node,
            severity=severity,
            what=what,
            instead=instead,
            port=kernels.port_hint(kernels.CUDA_CPP, self.ctx.targets),
        )
