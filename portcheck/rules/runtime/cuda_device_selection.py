from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rule import Invalid, Valid


class CudaDeviceSelection(CudaApiRule):
    """## What it does
    Reports `torch.cuda.current_device()`, `torch.cuda.set_device(i)`,
    `with torch.cuda.device(i):` and `torch.cuda.device_of(t)`.

    ## Why is this bad?
    Without CUDA they raise (`Torch not compiled with CUDA enabled`). Distributed scripts call
    `torch.cuda.set_device(local_rank)` first thing, so the whole job dies at start-up.

    ## Example
    ```python
    torch.cuda.set_device(local_rank)
    index = torch.cuda.current_device()
    ```

    ## Use instead
    ```python
    torch.accelerator.set_device_index(local_rank)
    index = torch.accelerator.current_device_index()
    ```

    ## Targets
    An error on every target but ROCm. On TPU a process owns one device: only its own index is
    accepted, and switching devices with a context is impossible. Never call `torch.tpu.*`
    instead: TorchTPU raises on those from user code. The replacements raise on a host without
    an accelerator, so CPU-only code must guard them.

    ## Fix safety
    Safe: `current_device()` becomes `torch.accelerator.current_device_index()`,
    `set_device(i)` `torch.accelerator.set_device_index(i)` (torch 2.7) and
    `with torch.cuda.device(i):` `with torch.accelerator.device_index(i):` (torch 2.8), with the
    file's own `torch` binding; not offered for an older `torch-version`. The index carries
    over unless it is a CUDA string (which names the wrong device type there): an index (`0`,
    `local_rank`, `int(os.environ["LOCAL_RANK"])`) or a device variable, whose value the same
    fix rewrites where it is set; `device=` keywords become positional (the replacements take
    them so). Where a process owns one device (tpu, xla, mps) a bare `set_device(i)` is
    removed: there is nothing to select, and TorchTPU raises for any index but its own. These
    raise on a host with no accelerator: for `--device cpu` a bare `set_device(i)` is removed
    too, for `--device auto` it is guarded with `if torch.accelerator.is_available():`; a
    value (`i = torch.cuda.current_device()`) or a `with` there is left to a person. XLA has
    no `torch.accelerator` backend: report only, but for the removed `set_device`.
    """

    code = "PC202"
    name = "cuda-device-selection"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\ntorch.accelerator.set_device_index(0)\n"),
        Valid("def setup(torch, rank):\n    torch.cuda.set_device(rank)\n"),
        Valid("import torch\nwith torch.device('cpu'):\n    pass\n"),
    ]
    INVALID = [
        # A TPU process is bound to its one device: there is nothing to select.
        Invalid("import torch\ntorch.cuda.set_device(local_rank)\n", lines=[2], fixed="import torch\n"),
        Invalid(
            "import torch\ntorch.cuda.set_device(local_rank)\n",
            lines=[2],
            device="neuron",
            fixed="import torch\ntorch.accelerator.set_device_index(local_rank)\n",
        ),
        Invalid(
            "import torch\ntorch.cuda.set_device(device=args.local_rank)\n",
            lines=[2],
            device="xpu",
            fixed="import torch\ntorch.accelerator.set_device_index(args.local_rank)\n",
        ),
        Invalid(
            "import torch\ntorch.cuda.set_device(local_rank)\n",
            lines=[2],
            device="cpu",
            fixed="import torch\n",
        ),
        Invalid(
            "import torch\ndef setup(local_rank):\n    torch.cuda.set_device(local_rank)\n    return local_rank\n",
            lines=[3],
            device="auto",
            fixed="import torch\ndef setup(local_rank):\n    if torch.accelerator.is_available():\n"
            "        torch.accelerator.set_device_index(local_rank)\n    return local_rank\n",
        ),
        Invalid(
            "import torch as T\ni = T.cuda.current_device()\n",
            lines=[2],
            fixed="import torch as T\ni = T.accelerator.current_device_index()\n",
        ),
        Invalid(
            "from torch import cuda\nwith cuda.device(1):\n    pass\n",
            lines=[2],
            fixed="from torch import cuda\nimport torch\nwith torch.accelerator.device_index(1):\n    pass\n",
        ),
        Invalid(
            "from torch.cuda import set_device as use\nuse(3)\n",
            lines=[2],
            device="auto",
            fixed="from torch.cuda import set_device as use\nimport torch\n"
            "if torch.accelerator.is_available():\n    torch.accelerator.set_device_index(3)\n",
        ),
        # Not fixed: a value or a context where there may be no accelerator, a CUDA device
        # string, too old a torch, no equivalent (device_of), no torch.accelerator (xla).
        Invalid("import torch as T\ni = T.cuda.current_device()\n", lines=[2], device="auto"),
        Invalid("import torch\nwith torch.cuda.device(1):\n    pass\n", lines=[2], device="cpu"),
        Invalid(
            "import os\nimport torch\ntorch.cuda.set_device(int(os.environ['LOCAL_RANK']))\ntorch.cuda.set_device(device)\n",
            lines=[3, 4],
            device="cpu",
            fixed="import os\nimport torch\n",
        ),
        Invalid("import torch\ntorch.cuda.set_device('cuda:1')\n", lines=[2], device="xpu"),
        Invalid("import torch\nwith torch.cuda.device(1):\n    pass\n", lines=[2], options={"torch-version": "2.7"}),
        Invalid("import torch.cuda\nwith torch.cuda.device_of(x):\n    pass\n", lines=[2]),
        Invalid("import torch\nwith torch.cuda.device(local_rank):\n    pass\n", lines=[2], device="xla"),
    ]
