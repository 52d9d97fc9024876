from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rule import Invalid, Valid


class CudaNvtx(CudaApiRule):
    """## What it does
    Reports NVTX profiling annotations: `torch.cuda.nvtx.range_push/range_pop`,
    `torch.cuda.nvtx.range(...)` and `torch.cuda.nvtx.mark(...)`, and autograd's NVTX
    profiler, `torch.autograd.profiler.emit_nvtx()` (fairseq's `--profile`).

    ## Why is this bad?
    Without CUDA every NVTX call raises `RuntimeError: NVTX functions not installed`, and
    `emit_nvtx()` raises `AssertionError: Torch not compiled with CUDA enabled`, so
    profiling annotations left in training code crash it.

    ## Example
    ```python
    torch.cuda.nvtx.range_push("forward")
    out = model(x)
    torch.cuda.nvtx.range_pop()
    ```

    ## Use instead
    ```python
    with torch.profiler.record_function("forward"):
        out = model(x)
    ```

    ## Targets
    An error on every target but ROCm. `record_function` ranges appear in every PyTorch
    profiler trace (TorchTPU registers its own profiler backend); they stop appearing in
    Nsight, which is expected.

    ## Fix safety
    Safe: `torch.cuda.nvtx.range(msg)` (a context manager or decorator) becomes
    `torch.profiler.record_function(msg)` on every target, written with the file's own
    `torch` binding; with format arguments (`range(msg, *args)`) it is left alone, since
    `record_function` reads a second argument differently. Where there is never an accelerator
    (`--device cpu`) a bare `range_push()`, `range_pop()` or `mark()` is removed: it raised
    there. Elsewhere push/pop pairs need restructuring into a `with` block: left to a person.
    """

    code = "PC209"
    name = "cuda-nvtx"
    triggers = (b"cuda", b"nvtx")  # `emit_nvtx` says no "cuda"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\nwith torch.profiler.record_function('fwd'):\n    pass\n"),
        Valid("def push(torch):\n    torch.cuda.nvtx.range_push('x')\n"),
        Valid("import nvtx_shim\nnvtx_shim.range_push('x')\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.cuda.nvtx.range_push('fwd')\ntorch.cuda.nvtx.range_pop()\n", lines=[2, 3]),
        Invalid(
            "import torch\ntorch.cuda.nvtx.range_push('fwd')\nout = model(x)\ntorch.cuda.nvtx.range_pop()\n",
            lines=[2, 4],
            device="cpu",
            fixed="import torch\nout = model(x)\n",
        ),
        Invalid(
            "import torch as T\nwith T.cuda.nvtx.range('step'):\n    pass\n",
            lines=[2],
            fixed="import torch as T\nwith T.profiler.record_function('step'):\n    pass\n",
        ),
        Invalid(
            "import torch as T\nwith T.cuda.nvtx.range('step'):\n    pass\n",
            lines=[2],
            device="auto",
            fixed="import torch as T\nwith T.profiler.record_function('step'):\n    pass\n",
        ),
        Invalid(
            "from torch.cuda.nvtx import range as nvtx_range\n@nvtx_range(msg='forward')\ndef forward(x):\n    return x\n",
            lines=[2],
            device="cpu",
            fixed="from torch.cuda.nvtx import range as nvtx_range\nimport torch\n"
            "@torch.profiler.record_function('forward')\ndef forward(x):\n    return x\n",
        ),
        Invalid("from torch import cuda\ncuda.nvtx.mark('epoch')\n", lines=[2]),
        Invalid("from torch.cuda.nvtx import range_push as push\npush('x')\n", lines=[2]),
        Invalid("import torch.cuda.nvtx as nvtx\nnvtx.range_pop()\n", lines=[2]),
        Invalid(  # fairseq's --profile
            "import torch\ndef run(main):\n    with torch.autograd.profiler.emit_nvtx():\n        main()\n", lines=[3]
        ),
        # Not fixed: format arguments.
        Invalid("import torch\nwith torch.cuda.nvtx.range('step {}', i):\n    pass\n", lines=[2]),
    ]
