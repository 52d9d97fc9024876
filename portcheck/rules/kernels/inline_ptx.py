from __future__ import annotations

import re

import libcst as cst

from portcheck import ctext, filekinds, patterns
from portcheck.rule import ERROR, Invalid, Rule, Valid, per_target

_ASM = re.compile(r"\basm\s*(?:volatile\s*|__volatile__\s*)?\(")
_TRITON_ASM = frozenset({"triton.language.inline_asm_elementwise"})


class InlinePtx(Rule):
    """## What it does
    Reports inline PTX: `asm volatile(...)` / `asm(...)` in CUDA and C++ sources (and in CUDA
    source strings compiled from Python), and Triton's `tl.inline_asm_elementwise`.

    ## Why is this bad?
    PTX is NVIDIA's virtual instruction set. It does not survive hipify (AMD), and it has no
    meaning on TPU, Trainium, Apple, Intel or Gaudi hardware: the surrounding kernel must be
    rewritten without it, even where the rest of the kernel ports mechanically.

    ## Example
    ```cuda
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src));
    ```

    ## Use instead
    The portable intrinsic or library call (`__shfl_sync` has HIP and SYCL counterparts), or
    plain code the compiler schedules; in Triton, a `tl.*` operation instead of
    `inline_asm_elementwise`.

    ## Targets
    An error on every target, ROCm included.

    ## Fix safety
    No automatic fix.
    """

    code = "PC608"
    name = "inline-ptx"
    message = "inline PTX ({what}) is NVIDIA assembly"
    hint = "replace it with a portable intrinsic or plain code before porting the kernel"
    severity = per_target(ERROR)
    file_kinds = (filekinds.PYTHON, filekinds.CUDA, filekinds.CPP)
    triggers = (b"asm",)

    VALID = [
        Valid("import torch\nprint('asm')\n"),
        Valid('// asm volatile("nop;") commented out\nint f() { return 0; }\n', path="k.cpp"),
        Valid("def f(torch):\n    return torch.cuda\nplasma = 1\n"),
        Valid(
            "from torch.cuda import synchronize as s\nimport torch.cuda\nimport torch as T\nfrom torch import cuda\n"
        ),
    ]
    INVALID = [
        Invalid(
            '__device__ unsigned lane() {\n  unsigned id;\n  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));\n  return id;\n}\n',
            lines=[3],
            path="k.cu",
        ),
        Invalid('inline void fence() { asm("membar.gl;"); }\n', lines=[1], path="sync.h"),
        Invalid(
            "import triton.language as tl\ny = tl.inline_asm_elementwise('cvt.rn.f16.f32 $0, $1;', '=r,r', [x], dtype=tl.float16, is_pure=True, pack=1)\n",
            lines=[2],
        ),
        Invalid(
            'from torch.utils.cpp_extension import load_inline\nSRC = """\n__global__ void k() { asm volatile("nop;"); }\n"""\n',
            lines=[2],
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.qualified_names(node.func) & _TRITON_ASM:
            self.report(node, what="tl.inline_asm_elementwise")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = patterns.string_value(node)
        if value is not None and "__global__" in value and _ASM.search(value):
            self.report(node, what="asm in CUDA source compiled from Python")

    def check_text(self, text: str) -> None:
        code = ctext.without_comments(text)
        where = ctext.Lines(text)
        for match in _ASM.finditer(code):
            line, column = where.at(match.start())
            self.report_span((line, column, line, column + len(match.group(0))), what="asm")
