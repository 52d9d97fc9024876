from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rule import Invalid, Valid


class CudaApiOther(CudaApiRule):
    """## What it does
    Reports any other use of `torch.cuda.*` that no more specific rule covers: custom
    allocators and memory pools, `jiterator`, `tunable`, `comm`, `torch.cuda.OutOfMemoryError`,
    and names added to `torch.cuda` after this rule set was written.

    ## Why is this bad?
    `torch.cuda` is the CUDA runtime API: off CUDA most of it raises, and what does not raise
    does nothing useful. A few names have device-generic spellings
    (`torch.cuda.OutOfMemoryError` is `torch.OutOfMemoryError`).

    ## Example
    ```python
    try:
        out = model(batch)
    except torch.cuda.OutOfMemoryError:
        shrink_batch()
    ```

    ## Use instead
    ```python
    try:
        out = model(batch)
    except torch.OutOfMemoryError:
        shrink_batch()
    ```

    ## Targets
    An error on every target but ROCm unless the table of CUDA APIs says otherwise
    (`OutOfMemoryError` still works everywhere: info).

    ## Fix safety
    Safe: `torch.cuda.OutOfMemoryError` becomes `torch.OutOfMemoryError` (torch 2.5; not
    offered for an older `torch-version`), the very class it aliases, written with the file's
    own `torch` binding. Nothing else here has a portable equivalent: report only.
    """

    code = "PC214"
    name = "cuda-api-other"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\ntry:\n    pass\nexcept torch.OutOfMemoryError:\n    pass\n"),
        Valid("def f(torch):\n    return torch.cuda.jiterator\n"),
        Valid("import torch\ntorch.cuda.synchronize()\n", options={"select": ["PC214"]}),
    ]
    INVALID = [
        Invalid(
            "import torch\ntry:\n    pass\nexcept torch.cuda.OutOfMemoryError:\n    pass\n",
            lines=[4],
            fixed="import torch\ntry:\n    pass\nexcept torch.OutOfMemoryError:\n    pass\n",
        ),
        Invalid(
            "from torch.cuda import OutOfMemoryError as OOM\ntry:\n    pass\nexcept (OOM, ValueError):\n    pass\n",
            lines=[4],
            device="cpu",
            fixed="from torch.cuda import OutOfMemoryError as OOM\nimport torch\n"
            "try:\n    pass\nexcept (torch.OutOfMemoryError, ValueError):\n    pass\n",
        ),
        Invalid(
            "import torch as T\ndef run(step):\n    try:\n        step()\n    except T.cuda.OutOfMemoryError as error:\n"
            "        raise RuntimeError('out of memory') from error\n",
            lines=[5],
            device="auto",
            fixed="import torch as T\ndef run(step):\n    try:\n        step()\n    except T.OutOfMemoryError as error:\n"
            "        raise RuntimeError('out of memory') from error\n",
        ),
        # Not fixed: too old a torch, no portable equivalent.
        Invalid(
            "import torch\ntry:\n    pass\nexcept torch.cuda.OutOfMemoryError:\n    pass\n",
            lines=[4],
            options={"torch-version": "2.4"},
        ),
        Invalid("import torch as T\nfn = T.cuda.jiterator._create_jit_fn(code)\n", lines=[2]),
        Invalid("from torch import cuda\npool = cuda.MemPool()\n", lines=[2]),
        Invalid("from torch.cuda import comm as cuda_comm\nouts = cuda_comm.broadcast(x, [0, 1])\n", lines=[2]),
        Invalid("import torch.cuda\ntorch.cuda.tunable.enable(True)\n", lines=[2]),
    ]
