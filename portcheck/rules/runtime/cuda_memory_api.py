from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaMemoryApi(CudaApiRule):
    """## What it does
    Reports the CUDA caching-allocator API: `torch.cuda.empty_cache()`, `memory_allocated()`,
    `max_memory_allocated()`, `memory_reserved()`, `memory_stats()`, `reset_peak_memory_stats()`,
    `mem_get_info()`, `set_per_process_memory_fraction()` and the rest of `torch.cuda.memory`.

    ## Why is this bad?
    Without CUDA some raise (`reset_peak_memory_stats`, `mem_get_info`), others return 0 or an
    empty dict, so memory logs and OOM guards are silently wrong. `empty_cache()` does nothing.

    ## Example
    ```python
    peak = torch.cuda.max_memory_allocated() / 2**30
    torch.cuda.empty_cache()
    ```

    ## Use instead
    ```python
    peak = torch.accelerator.max_memory_allocated() / 2**30
    torch.accelerator.empty_cache()
    ```

    ## Targets
    Severity depends on the call: an error where it raises, a warning where it returns a wrong
    number, info for `empty_cache()`. TorchTPU has no public memory API: keep such calls for
    logging only. MPS has `torch.mps.current_allocated_memory()`. The `torch.accelerator`
    versions (torch 2.9) raise on a host without an accelerator.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC204"
    name = "cuda-memory-api"

    VALID = [
        Valid("import torch\nused = torch.accelerator.memory_allocated()\n"),
        Valid("def log(torch):\n    return torch.cuda.memory_allocated()\n"),
        Valid("import psutil\nused = psutil.virtual_memory().used\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.cuda.empty_cache()\n", lines=[2]),
        Invalid("import torch as T\npeak = T.cuda.max_memory_allocated() / 2**30\n", lines=[2]),
        Invalid("from torch import cuda\nfree, total = cuda.mem_get_info()\n", lines=[2]),
        Invalid("from torch.cuda import reset_peak_memory_stats as reset\nreset()\n", lines=[2]),
        Invalid("import torch.cuda.memory\nstats = torch.cuda.memory.memory_stats()\n", lines=[2]),
        Invalid(
            "import torch\ntorch.cuda.set_per_process_memory_fraction(0.5)\n", lines=[2], message="set_per_process"
        ),
    ]
