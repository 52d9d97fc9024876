from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rule import Invalid, Valid


class CudaMemoryApi(CudaApiRule):
    """## What it does
    Reports the CUDA caching-allocator API: `torch.cuda.empty_cache()`, `memory_allocated()`,
    `max_memory_allocated()`, `memory_reserved()`, `memory_stats()`, `reset_peak_memory_stats()`,
    `mem_get_info()`, `set_per_process_memory_fraction()` and the rest of `torch.cuda.memory`.

    ## Why is this bad?
    Without CUDA some raise (`reset_peak_memory_stats`, `mem_get_info`), others return 0 or an
    empty dict, so memory logs and OOM guards are silently wrong. `empty_cache()` does nothing:
    where a program frees cached memory between phases (an offload, a second model), the
    device's own caching allocator keeps it.

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
    number or frees nothing (`empty_cache()`; info on tpu, xla and cpu, which have no cache
    to free by hand). TorchTPU has no public memory API: keep such calls for
    logging only. MPS has `torch.mps.current_allocated_memory()`. The `torch.accelerator`
    versions (torch 2.9) raise on a host without an accelerator.

    ## Fix safety
    Each call has its `torch.accelerator` equivalent (torch 2.9; `mem_get_info` needs 2.13),
    written with the file's own `torch` binding and not offered for an older `torch-version`:
    - safe: `empty_cache()`, `reset_peak_memory_stats()` (and its legacy aliases),
      `reset_accumulated_memory_stats()` and `mem_get_info()`. On TPU, which has no public cache
      control, a bare `empty_cache()` is removed instead.
    - unsafe: the statistics (`memory_allocated()`, `max_memory_allocated()`,
      `memory_reserved()`, `max_memory_reserved()`, `memory_stats()`): the CUDA calls return 0
      off CUDA, while the replacements raise on a backend that registers no memory allocator.
    Where there is never an accelerator (`--device cpu`) a bare call is removed and a statistic
    becomes what it returned there (`0`, `{}`): safe, nothing changes. Where there may be none
    (`--device auto`) a bare call is guarded with `if torch.accelerator.is_available():` and a
    statistic becomes `(torch.accelerator.X() if torch.accelerator.is_available() else 0)`.
    A device argument carries over only as an index. Not fixed: `memory_summary()`,
    `memory_snapshot()`, the per-process memory fraction and the other allocator internals,
    which have no portable equivalent (on cpu a bare `set_per_process_memory_fraction()` or
    `ipc_collect()` is removed).
    """

    code = "PC204"
    name = "cuda-memory-api"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\nused = torch.accelerator.memory_allocated()\n"),
        Valid("def log(torch):\n    return torch.cuda.memory_allocated()\n"),
        Valid("import psutil\nused = psutil.virtual_memory().used\n"),
    ]
    INVALID = [
        Invalid("import torch\ntorch.cuda.empty_cache()\n", lines=[2], fixed="import torch\n"),
        Invalid(  # torchtune's memory profiling: CUDA's allocator history, raises elsewhere
            "import torch\ntorch.cuda.memory._record_memory_history()\n"
            "torch.cuda.memory._dump_snapshot('memory.pickle')\n",
            lines=[2, 3],
            message="raises AttributeError",
        ),
        Invalid(
            "import torch\ntorch.cuda.empty_cache()\n",
            lines=[2],
            device="xpu",
            fixed="import torch\ntorch.accelerator.empty_cache()\n",
        ),
        Invalid(
            "import torch\nfor batch in data:\n    torch.cuda.empty_cache()\n",
            lines=[3],
            device="auto",
            fixed="import torch\nfor batch in data:\n    if torch.accelerator.is_available():\n"
            "        torch.accelerator.empty_cache()\n",
        ),
        Invalid(
            "import torch as T\npeak = T.cuda.max_memory_allocated() / 2**30\n",
            lines=[2],
            unsafe=True,
            fixed="import torch as T\npeak = T.accelerator.max_memory_allocated() / 2**30\n",
        ),
        Invalid(
            "import torch as T\npeak = T.cuda.max_memory_allocated() / 2**30\n",
            lines=[2],
            device="cpu",
            fixed="import torch as T\npeak = 0 / 2**30\n",
        ),
        Invalid(
            "import torch as T\npeak = T.cuda.max_memory_allocated() / 2**30\n",
            lines=[2],
            device="auto",
            unsafe=True,
            fixed="import torch as T\n"
            "peak = (T.accelerator.max_memory_allocated() if T.accelerator.is_available() else 0) / 2**30\n",
        ),
        Invalid(
            "import torch\nused = torch.cuda.memory_allocated(device=rank)\n",
            lines=[2],
            device="mps",
            unsafe=True,
            fixed="import torch\nused = torch.accelerator.memory_allocated(rank)\n",
        ),
        Invalid(
            "from torch import cuda\nfree, total = cuda.mem_get_info()\n",
            lines=[2],
            device="xpu",
            fixed="from torch import cuda\nimport torch\nfree, total = torch.accelerator.get_memory_info()\n",
        ),
        Invalid(
            "from torch.cuda import reset_peak_memory_stats as reset\nreset()\n",
            lines=[2],
            device="cpu",
            fixed="from torch.cuda import reset_peak_memory_stats as reset\n",
        ),
        Invalid(
            "from torch.cuda import reset_peak_memory_stats as reset\nreset()\n",
            lines=[2],
            device="neuron",
            fixed="from torch.cuda import reset_peak_memory_stats as reset\nimport torch\n"
            "torch.accelerator.reset_peak_memory_stats()\n",
        ),
        Invalid(
            "import torch.cuda.memory\nstats = torch.cuda.memory.memory_stats()\n",
            lines=[2],
            device="cpu",
            fixed="import torch.cuda.memory\nstats = {}\n",
        ),
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    print(torch.cuda.memory_reserved())\n",
            lines=[3],
            device="auto",
            unsafe=True,
            fixed="import torch\nif torch.cuda.is_available():\n    print(torch.accelerator.memory_reserved())\n",
        ),
        Invalid(
            "import torch\ntorch.cuda.set_per_process_memory_fraction(0.5)\n",
            lines=[2],
            message="set_per_process",
            device="cpu",
            fixed="import torch\n",
        ),
        # Not fixed: statistics without --unsafe-fixes, mem_get_info where the oldest torch the
        # target supports lacks it, or where it is a value that may have no accelerator; no
        # portable equivalent; too old a torch.
        Invalid("import torch as T\npeak = T.cuda.max_memory_allocated() / 2**30\n", lines=[2]),
        Invalid("from torch import cuda\nfree, total = cuda.mem_get_info()\n", lines=[2]),
        Invalid("from torch import cuda\nfree, total = cuda.mem_get_info()\n", lines=[2], device="auto"),
        Invalid(
            "import torch\ntorch.cuda.set_per_process_memory_fraction(0.5)\n", lines=[2], message="set_per_process"
        ),
        Invalid(
            "import torch\nused = torch.cuda.memory_allocated(device)\n",
            lines=[2],
            unsafe=True,
            fixed="import torch\nused = torch.accelerator.memory_allocated(device)\n",
        ),
        Invalid("import torch\ntorch.cuda.empty_cache()\n", lines=[2], device="xpu", options={"torch-version": "2.8"}),
    ]
