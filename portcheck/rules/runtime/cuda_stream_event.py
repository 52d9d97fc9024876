from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaStreamEvent(CudaApiRule):
    """## What it does
    Reports CUDA streams and events: `torch.cuda.Stream`, `torch.cuda.Event`,
    `with torch.cuda.stream(s):`, `torch.cuda.current_stream()`, `default_stream()`,
    `set_stream()`, `ExternalStream`.

    ## Why is this bad?
    Without CUDA, creating a `torch.cuda.Stream` or `Event` raises. Code that overlaps copies
    with compute through side streams, or times kernels with CUDA events, stops working.

    ## Example
    ```python
    start = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(side):
        y = f(x)
    ```

    ## Use instead
    ```python
    start = torch.Event(device=device, enable_timing=True)
    with side:  # a torch.Stream(device=device)
        y = f(x)
    ```

    ## Targets
    An error on every target but ROCm. On TPU, streams are placeholders (XLA schedules by data
    dependencies), `Event.wait` raises NotImplementedError and the stream context does nothing,
    so overlap code becomes serial.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC207"
    name = "cuda-stream-event"

    VALID = [
        Valid("import torch\ns = torch.Stream(device='cpu')\n"),
        Valid("def make(torch):\n    return torch.cuda.Stream()\n"),
        Valid("import threading\nevent = threading.Event()\n"),
    ]
    INVALID = [
        Invalid("import torch\nstart = torch.cuda.Event(enable_timing=True)\n", lines=[2]),
        Invalid("import torch as T\nwith T.cuda.stream(side):\n    pass\n", lines=[2]),
        Invalid("from torch import cuda\ns = cuda.Stream()\n", lines=[2]),
        Invalid("from torch.cuda import current_stream as cur\ncur().wait_stream(s)\n", lines=[2]),
        Invalid("import torch.cuda\nx = torch.cuda.default_stream()\n", lines=[2]),
    ]
