from portcheck.api_rule import CudaApiRule
from portcheck.rule import Invalid, Valid


class CudaGraphCapture(CudaApiRule):
    """## What it does
    Reports CUDA graph capture: `torch.cuda.CUDAGraph`, `with torch.cuda.graph(g):`,
    `torch.cuda.make_graphed_callables`, `graph_pool_handle()` and
    `is_current_stream_capturing()`.

    ## Why is this bad?
    Without CUDA these raise. CUDA graphs cut kernel-launch overhead on NVIDIA GPUs; TPU,
    Trainium and XLA compile whole graphs anyway, and MPS has no capture at all.

    ## Example
    ```python
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = model(static_input)
    ```

    ## Use instead
    On tpu, neuron and xla remove the capture and compile the step:
    ```python
    step = torch.compile(model)
    out = step(static_input)
    ```
    Where a backend implements graphs (CUDA, XPU), `torch.accelerator.Graph` (torch 2.13)
    is the device-generic class.

    ## Targets
    An error on every target but ROCm (hipGraph backs `torch.cuda.graph`).

    ## Fix safety
    No automatic fix: whether to remove a capture (tpu, neuron, xla, cpu) or move it to
    `torch.accelerator.Graph` (torch 2.13, where the backend implements graphs) changes how the
    step runs, and the static inputs and replay calls around it need rewriting too.
    """

    code = "PC208"
    name = "cuda-graph-capture"

    VALID = [
        Valid("import torch\nstep = torch.compile(model)\n"),
        Valid("def capture(torch):\n    return torch.cuda.CUDAGraph()\n"),
        Valid("import networkx\ng = networkx.Graph()\n"),
    ]
    INVALID = [
        Invalid("import torch\ng = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    pass\n", lines=[2, 3]),
        Invalid("import torch as T\nfn = T.cuda.make_graphed_callables(fn, (x,))\n", lines=[2]),
        Invalid("from torch import cuda\npool = cuda.graph_pool_handle()\n", lines=[2]),
        Invalid("from torch.cuda import graph as cuda_graph\nwith cuda_graph(g):\n    pass\n", lines=[2]),
        Invalid("import torch.cuda\nif torch.cuda.is_current_stream_capturing():\n    pass\n", lines=[2]),
    ]
