from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.flow import Home
from portcheck.rule import ERROR, OFF, WARNING, Invalid, Rule, Valid

# What makes a sparse tensor, and the sparse ops, by qualified name.
_SPARSE_MAKERS = frozenset(
    {
        *(f"torch.sparse_{layout}_tensor" for layout in ("coo", "csr", "csc", "bsr", "bsc", "compressed")),
        "torch.sparse.FloatTensor",
        "torch.sparse.LongTensor",
    }
)
_SPARSE_OPS = frozenset(
    {
        *(f"torch.sparse.{op}" for op in ("mm", "addmm", "sum", "softmax", "log_softmax")),
        "torch.spmm",
        "torch.smm",
        "torch.hspmm",
    }
)
# Tensor methods that convert to a sparse layout.
_TO_SPARSE = frozenset(
    {"to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc"}
)
_SEVERITY_BY_SUPPORT = {"runs": OFF, "unverified": WARNING, "raises": ERROR}
_EFFECTS = {
    "raises": "{where} has no sparse kernels, so the first op on it raises",
    "unverified": "no source says {where} has sparse kernels (XLA, which TorchTPU and Neuron compile through, has none)",
}


def _support(target: str) -> str:
    return target_data.get(target).sparse_tensors


class SparseTensorOnTarget(Rule):
    """## What it does
    Reports the sparse ops (`torch.sparse.mm`, `torch.spmm`, `torch.sparse.softmax`...), under
    any import alias, and what makes a sparse tensor (`x.to_sparse()`, `.to_sparse_csr()`,
    `torch.sparse_coo_tensor(...)`, the legacy `torch.sparse.FloatTensor(...)`) where it
    reaches the device: sent there at once (`.to_sparse().to(device)`, `device=`), kept as a
    module's buffer, or made in step code from a tensor not in host memory. One made in host
    memory to prepare data costs nothing until it moves, where it is reported.

    ## Why is this bad?
    A sparse layout needs sparse kernels on the device. PyTorch/XLA has no sparse backend
    ("PyTorch/XLA does not support sparse tensors": pytorch/xla#1369, #6853, #7584), so the
    first op raises there; TorchTPU, which replaces it, and TorchNeuron both compile through
    XLA/StableHLO and document no sparse layout. A graph network's sparse adjacency
    (`torch.spmm(adj, x)`) or a model buffer stored sparse (whisper's `alignment_heads`) then
    stops the port, or runs on the host.

    ## Example
    ```python
    adj = adj.to_sparse().to(device)
    h = torch.spmm(adj, x @ self.weight)
    ```

    ## Use instead
    ```python
    adj = adj.to(device)  # dense: a matmul every accelerator compiles
    h = adj @ (x @ self.weight)
    ```
    or, for a sparse set of indices, keep them as an index tensor and gather
    (`x[idx]`, `torch.index_select`, `scatter_add`).

    ## Targets
    From the target data's `sparse-tensors` fact: an error where the backend raises (xla), a
    warning where no source says it has sparse kernels (tpu, neuron, mps, xpu, npu, hpu), off
    where it runs (rocm, cpu).

    ## Fix safety
    No automatic fix: a dense layout costs memory the sparse one saved.
    """

    code = "PC612"
    name = "sparse-tensor-on-target"
    message = "{what} makes or computes on a sparse tensor: {effect}"
    hint = "keep the tensor dense (a matmul the target compiles), or keep indices and gather with them"
    severity = {name: _SEVERITY_BY_SUPPORT[_support(name)] for name in target_data.TARGET_ORDER}
    triggers = (b"sparse", b"spmm", b"smm")

    VALID = [
        Valid("import torch\nh = adj @ (x @ w)\ny = torch.mm(a, b)\n"),
        Valid(  # NumPy's and SciPy's sparse matrices, a parameter named torch, a local method
            "import scipy.sparse as sp\nimport torch as T\nfrom torch import nn\nfrom torch.nn import functional as F\n"
            "import torch.nn\nm = sp.coo_matrix(a).tocsr()\ndef f(torch, x):\n    return torch.spmm(x, x)\n"
        ),
        Valid("import torch\nadj = adj.to_sparse()\nh = torch.spmm(adj, x)\n", options={"targets": ["cpu", "rocm"]}),
        Valid(  # made in host memory to prepare data, then densified: nothing sparse reaches the device
            "import torch\ndef load(v, edges):\n    adj = torch.sparse_coo_tensor(edges.T, torch.ones(len(edges)), (v, v))\n"
            "    deg = torch.diag(adj.sum(1).to_dense()).to_sparse()\n    return (deg @ adj).to_dense().to('cuda')\n"
        ),
    ]
    INVALID = [
        Invalid(  # pytorch/examples' gcn
            "import torch\ndef forward(self, x, adj):\n    return torch.spmm(adj, x @ self.weight)\n"
            "adj = adj.to_sparse().to(device)\n",
            lines=[3, 4],
            message="makes or computes on a sparse tensor",
        ),
        Invalid(  # whisper: a model buffer stored sparse, moved with the model
            "import torch\nclass Whisper(torch.nn.Module):\n    def __init__(self, n):\n"
            "        heads = torch.zeros(n, n, dtype=torch.bool)\n"
            "        self.register_buffer('alignment_heads', heads.to_sparse(), persistent=False)\n",
            lines=[5],
            message="`.to_sparse()`",
        ),
        Invalid(
            "from torch import sparse_coo_tensor as coo\nimport torch.sparse\nm = coo(i, v, (3, 3), device=dev)\n"
            "y = torch.sparse.mm(m, x)\n",
            lines=[3, 4],
            options={"targets": ["xla"]},
            message="xla has no sparse kernels",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if names & _SPARSE_OPS:
            what = f"`{min(names & _SPARSE_OPS)}(...)`"
        elif names & _SPARSE_MAKERS and self._on_device(node):
            what = f"`{min(names & _SPARSE_MAKERS)}(...)`"
        elif not names and isinstance(node.func, cst.Attribute) and node.func.attr.value in _TO_SPARSE:
            if not self._on_device(node):
                return
            what = f"`.{node.func.attr.value}()`"
        else:
            return
        affected = [t for t in self.ctx.targets if _support(t) != "runs"]
        worst = "raises" if any(_support(t) == "raises" for t in affected) else "unverified"
        where = "/".join(t for t in affected if _support(t) == worst) or "the target"
        self.report(node, what=what, effect=_EFFECTS[worst].format(where=where))

    def _on_device(self, made: cst.Call) -> bool:
        """Whether a sparse tensor made here reaches the device: sent there at once
        (`.to_sparse().to(device)`, `device=`), kept as a module's buffer (it moves with the
        model), or made in step code from a tensor not in host memory. One made in host memory
        to prepare data (gcn's normalised adjacency) costs nothing until it moves."""
        parent, ancestors = self.ctx.parent, self.ctx.ancestors
        if isinstance(parent, cst.Attribute) and parent.attr.value in ("to", "cuda"):
            return True
        device = patterns.keyword(made, "device")
        module_flow = self.ctx.flow
        if device is not None and module_flow is not None and not module_flow.is_cpu(device.value):
            return True
        if (
            len(ancestors) > 1
            and isinstance(ancestors[-2], cst.Call)
            and patterns.method_name(ancestors[-2]) == "register_buffer"
        ):
            return True
        if module_flow is None or module_flow.step_context(ancestors) is None:
            return False
        source = made.func.value if isinstance(made.func, cst.Attribute) else None
        return source is None or module_flow.home(source) is not Home.HOST
