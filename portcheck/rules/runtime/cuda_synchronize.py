from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rule import Invalid, Valid


class CudaSynchronize(CudaApiRule):
    """## What it does
    Reports `torch.cuda.synchronize()`.

    ## Why is this bad?
    Without CUDA it raises `AssertionError: Torch not compiled with CUDA enabled`. It is most
    often used to time steps, so benchmarking code breaks first.

    ## Example
    ```python
    start = time.perf_counter()
    step()
    torch.cuda.synchronize()
    ```

    ## Use instead
    ```python
    step()
    torch.accelerator.synchronize()
    ```

    ## Targets
    An error on every target but ROCm. `torch.accelerator.synchronize()` raises on a host with
    no accelerator: guard it there. On XLA use `torch_xla.sync()`. On TPU it is not a step
    boundary: TorchTPU materialises results on `.cpu()` and `.item()`.

    ## Fix safety
    Safe: `torch.accelerator.synchronize()` (torch 2.6; not offered for an older
    `torch-version`), written with the file's own `torch` binding. Where the fixed code must
    also run without an accelerator, a bare call is guarded (`--device auto`:
    `if torch.accelerator.is_available():`) or removed (`--device cpu`, where there is nothing
    to wait for); inside an `if torch.cuda.is_available():` branch it is only renamed. On XLA
    the fix is `torch_xla.sync()` and unsafe: it also cuts the lazy graph there, which changes
    what is compiled. A device argument carries over unless it is a CUDA string (`"cuda:0"`
    would name the wrong device type there; a `device` variable is rewritten where it is set,
    so its value is the port's device); other arguments, references
    (`wait = torch.cuda.synchronize`) and, under auto, a call sharing its line with another
    statement are left to a person.
    """

    code = "PC203"
    name = "cuda-synchronize"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\ntorch.accelerator.synchronize()\n"),
        Valid("def wait(torch):\n    torch.cuda.synchronize()\n"),
        Valid(
            "import torch\nstream = torch.cuda.current_stream\nstream().synchronize()\n", options={"select": ["PC203"]}
        ),
        Valid("import torch\ntorch.cuda.synchronize()\n", options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid(
            "import torch\ntorch.cuda.synchronize()\n",
            lines=[2],
            fixed="import torch\ntorch.accelerator.synchronize()\n",
        ),
        Invalid(
            "import torch\ntorch.cuda.synchronize()\n",
            lines=[2],
            device="cpu",
            fixed="import torch\n",
        ),
        Invalid(
            "import torch\nstep()\ntorch.cuda.synchronize()  # wait for the step\nlog()\n",
            lines=[3],
            device="auto",
            fixed="import torch\nstep()\nif torch.accelerator.is_available():\n"
            "    torch.accelerator.synchronize()  # wait for the step\nlog()\n",
        ),
        Invalid(
            "import torch as T\nT.cuda.synchronize()\n",
            lines=[2],
            device="auto",
            fixed="import torch as T\nif T.accelerator.is_available():\n    T.accelerator.synchronize()\n",
        ),
        Invalid(
            "import torch as T\nT.cuda.synchronize(0)\n",
            lines=[2],
            device="neuron",
            fixed="import torch as T\nT.accelerator.synchronize(0)\n",
        ),
        Invalid(
            "from torch import cuda\ncuda.synchronize()\n",
            lines=[2],
            fixed="from torch import cuda\nimport torch\ntorch.accelerator.synchronize()\n",
        ),
        Invalid(
            "from torch.cuda import synchronize as sync\nsync()\n",
            lines=[2],
            fixed="from torch.cuda import synchronize as sync\nimport torch\ntorch.accelerator.synchronize()\n",
        ),
        Invalid(
            "import torch.cuda\ndef timed(f):\n    f()\n    torch.cuda.synchronize()\n",
            lines=[4],
            device="cpu",
            fixed="import torch.cuda\ndef timed(f):\n    f()\n",
        ),
        Invalid(
            "import torch\ndef timed(f):\n    torch.cuda.synchronize()\n",
            lines=[3],
            device="cpu",
            fixed="import torch\ndef timed(f):\n    pass\n",
        ),
        Invalid(
            "import torch\nfor step in steps:\n    if step.timed: torch.cuda.synchronize()\n",
            lines=[3],
            device="cpu",
            fixed="import torch\nfor step in steps:\n    if step.timed: pass\n",
        ),
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
            lines=[3],
            device="auto",
            fixed="import torch\nif torch.cuda.is_available():\n    torch.accelerator.synchronize()\n",
        ),
        Invalid(
            "try:\n    import torch\nexcept ImportError:\n    torch = None\nif torch:\n    torch.cuda.synchronize()\n",
            lines=[6],
            fixed="try:\n    import torch\nexcept ImportError:\n    torch = None\nif torch:\n    torch.accelerator.synchronize()\n",
        ),
        Invalid(
            "import torch\ntorch.cuda.synchronize()\n",
            lines=[2],
            device="xla",
            unsafe=True,
            fixed="import torch\nimport torch_xla\ntorch_xla.sync()\n",
        ),
        # Not fixed: unsafe without --unsafe-fixes, too old a torch, a device that is not an
        # index, a reference, a line of several statements that cannot take an `if`, a patch.
        Invalid("import torch\ntorch.cuda.synchronize()\n", lines=[2], device="xla"),
        Invalid("import torch\ntorch.cuda.synchronize()\n", lines=[2], options={"torch-version": "2.4"}),
        Invalid(
            "import torch\ntorch.cuda.synchronize(device)\n",
            lines=[2],
            fixed="import torch\ntorch.accelerator.synchronize(device)\n",
        ),
        Invalid("import torch\ntorch.cuda.synchronize('cuda:1')\n", lines=[2]),
        Invalid("import torch\ntorch.cuda.synchronize(**options)\n", lines=[2], device="cpu"),
        Invalid("import torch\nwait = torch.cuda.synchronize\n", lines=[2], device="auto"),
        Invalid("import torch\nstep(); torch.cuda.synchronize()\n", lines=[2], device="auto"),
        Invalid("import torch\ntorch.cuda.synchronize = lambda: None\n", lines=[2]),
        Invalid("def wait(torch):\n    import torch.cuda as tc\n    tc.synchronize()\n", lines=[3]),
    ]
