from __future__ import annotations

import re

from portcheck import ctext, filekinds, kernels, project
from portcheck.rule import Invalid, Rule, Valid
from portcheck.wording import counted

_GLOBAL = re.compile(r"\b__global__\b")
_CUDA_CODE = re.compile(r"__global__|__device__|__shared__|<<<|\bcuda[A-Z]\w*\(|#include\s*[<\"]cuda")
_IDENTIFIER_BEFORE_PAREN = re.compile(r"(\w+)\s*\(")
_LAUNCH = re.compile(r"(\w+)\s*(?:<[^<>;]*>)?\s*<<<")


class CudaSourceFile(Rule):
    """## What it does
    Reports each CUDA source file (`.cu`, `.cuh`) with the number of `__global__` kernels it
    defines and its lines of code, and records every kernel for `portcheck kernels`.

    ## Why is this bad?
    CUDA C++ compiles only with nvcc for NVIDIA GPUs (or through hipify for AMD). Each kernel
    is a rewrite on TPU (Pallas), Trainium (NKI), Intel GPUs (SYCL) and Apple GPUs (Metal), and
    the size of that work is what decides how long a port takes.

    ## Example
    ```cuda
    __global__ void add_kernel(const float* x, const float* y, float* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = x[i] + y[i];
    }
    ```

    ## Use instead
    A pure-PyTorch version (often fast enough under `torch.compile`), then a kernel in the
    target's language where profiling says so: Pallas via `torch.tpu.pallas.jax_op` or Tokamax
    on TPU, NKI on Trainium, SYCL via `SyclExtension` on Intel GPUs, `torch.mps.compile_shader`
    on Apple GPUs.

    ## Targets
    An error on every target but ROCm, where hipify translates CUDA sources at build time (a
    warning: review warp-size and intrinsic assumptions).

    ## Fix safety
    No automatic fix: kernels are rewritten by a person.
    """

    code = "PC603"
    name = "cuda-source-file"
    message = "CUDA C++ source of {size} of code with {kernels}"
    hint = "port: {port}"
    severity = kernels.severity(kernels.CUDA_CPP)
    file_kinds = (filekinds.CUDA,)
    triggers = (b"__global__", b"__device__", b"cuda", b"<<<")

    VALID = [
        Valid("import torch\nx = torch.ones(1)\n"),
        Valid("// just a header of constants\n#define BLOCK 256\n", path="consts.cuh"),
        Valid("def f(torch):\n    return torch.cuda\n"),
    ]
    INVALID = [
        Invalid(
            "#include <cuda_runtime.h>\n\n__global__ void add_kernel(const float* x, float* y, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] += x[i];\n}\n",
            lines=[3],
            path="csrc/add.cu",
        ),
        Invalid(
            "template <typename T>\n__global__ void __launch_bounds__(256) scale(T* x, T s) { x[threadIdx.x] *= s; }\n"
            "// __global__ void old_kernel() {}\n__device__ float twice(float v) { return 2 * v; }\n",
            lines=[2],
            message="with 1 __global__ kernel",
            path="csrc/scale.cuh",
        ),
        Invalid("__device__ inline float sq(float v) { return v * v; }\n", lines=[1], path="csrc/math.cuh"),
    ]

    def check_text(self, text: str) -> None:
        code = ctext.without_comments(text)
        if not _CUDA_CODE.search(code):
            return  # a header of constants or plain C++ that happens to be named .cuh
        where = ctext.Lines(text)
        found = []
        for match in _GLOBAL.finditer(code):
            name, body_start = _kernel_name(code, match.end())
            if not name:
                continue
            start, _ = where.at(match.start())
            end, _ = where.at(ctext.matching_brace(code, body_start) - 1) if body_start >= 0 else (start, 0)
            found.append((name, start, end))
            loc = ctext.code_lines("\n".join(text.splitlines()[start - 1 : end]))
            self.record(project.KERNEL, f"{self.ctx.path}::{name}", (start, end), kind=kernels.CUDA_CPP, loc=str(loc))
        for launch in _LAUNCH.finditer(code):
            line, _ = where.at(launch.start())
            self.record(project.CALL, "cuda::" + launch.group(1), (line, line))
        total = ctext.code_lines(text)
        self.record(project.SOURCE, self.ctx.path, (1, max(1, text.count("\n"))), loc=str(total))
        line = found[0][1] if found else 1
        first_line = text.splitlines()[line - 1] if text.strip() else ""
        self.report_span(
            (line, 1, line, len(first_line) + 1),
            kernels=counted(len(found), "__global__ kernel"),
            size=counted(total, "line"),
            port=kernels.port_hint(kernels.CUDA_CPP, self.ctx.targets),
        )


def _kernel_name(code: str, start: int) -> tuple[str, int]:
    """The kernel's name after `__global__` (skipping `__launch_bounds__(...)`), and the offset
    of its body's opening brace (-1 for a declaration)."""
    position = start
    while True:
        match = _IDENTIFIER_BEFORE_PAREN.search(code, position)
        if match is None:
            return "", -1
        closing = _matching_paren(code, match.end() - 1)
        if match.group(1) != "__launch_bounds__":
            break
        position = closing
    brace, semicolon = code.find("{", closing), code.find(";", closing)
    if brace < 0 or (0 <= semicolon < brace):
        return match.group(1), -1
    return match.group(1), brace


def _matching_paren(code: str, opening: int) -> int:
    depth = 0
    for index in range(opening, len(code)):
        if code[index] == "(":
            depth += 1
        elif code[index] == ")":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(code)
