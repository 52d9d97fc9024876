import libcst as cst

from portcheck.api_rule import CudaApiRule
from portcheck.findings import FixSafety
from portcheck.rewrites.edits import Edit
from portcheck.rule import Invalid, Valid
from portcheck.targets import api


class CudaStreamEvent(CudaApiRule):
    """## What it does
    Reports CUDA streams and events: `torch.cuda.Stream`, `torch.cuda.Event`,
    `with torch.cuda.stream(s):`, `torch.cuda.current_stream()`, `default_stream()`,
    `set_stream()`, `ExternalStream`. A type annotation (`s: torch.cuda.Stream`) only names
    the type and is not reported.

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
    Safe: `current_stream()` becomes `torch.accelerator.current_stream()` and `set_stream(s)`
    `torch.accelerator.set_stream(s)` (torch 2.6), with the file's own `torch` binding; a
    device argument carries over only as an index. They raise on a host with no accelerator:
    for `--device cpu` a bare call is removed, for `--device auto` it is guarded with
    `if torch.accelerator.is_available():`; a stream used as a value there is left to a person.
    Not fixed: creating streams and events (`torch.Stream(device=...)` and
    `torch.Event(device=...)` need the device the code runs on), `with torch.cuda.stream(s):`
    (removing the context would serialise overlap code, a decision for a person), and
    `default_stream()`.
    """

    code = "PC207"
    name = "cuda-stream-event"
    fix_safety = FixSafety.SAFE
    table_fixes = True

    VALID = [
        Valid("import torch\ns = torch.Stream(device='cpu')\n"),
        Valid("def make(torch):\n    return torch.cuda.Stream()\n"),
        Valid("import threading\nevent = threading.Event()\n"),
        # Annotations only name the types (string ones, and all under PEP 563, are never evaluated).
        Valid("import torch\ndef f(s: torch.cuda.Stream) -> None:\n    pass\n"),
        Valid("from torch import cuda\nx: cuda.Event\ndef g() -> Optional[cuda.Stream]:\n    pass\n"),
        Valid("import torch\ndef f(s: 'torch.cuda.Stream') -> 'torch.cuda.Event':\n    pass\n"),
        Valid(
            "from __future__ import annotations\nimport torch.cuda\n"
            "def f(s: torch.cuda.Stream | None = None) -> list[torch.cuda.Event]:\n    pass\n"
        ),
    ]
    INVALID = [
        Invalid("import torch\nstart = torch.cuda.Event(enable_timing=True)\n", lines=[2]),
        # the annotation names the type; the value creates an event
        Invalid("import torch\nstart: torch.cuda.Event = torch.cuda.Event()\n", lines=[2]),
        Invalid("import torch as T\nwith T.cuda.stream(side):\n    pass\n", lines=[2]),
        Invalid(
            "import torch as T\n\ndef step(x, side):\n    # overlap the copy\n    with T.cuda.stream(side):\n"
            "        y = x.to('cpu')  # async\n        z = y + 1\n    return z\n",
            lines=[5],
            unsafe=True,
            fixed="import torch as T\n\ndef step(x, side):\n    # overlap the copy\n"
            "    y = x.to('cpu')  # async\n    z = y + 1\n    return z\n",
        ),
        Invalid("import torch\nwith torch.cuda.stream(side) as s:\n    f(s)\n", lines=[2], unsafe=True),
        Invalid("from torch import cuda\ns = cuda.Stream()\n", lines=[2]),
        Invalid(
            "from torch.cuda import current_stream as cur\ncur().wait_stream(s)\n",
            lines=[2],
            fixed="from torch.cuda import current_stream as cur\nimport torch\ntorch.accelerator.current_stream().wait_stream(s)\n",
        ),
        Invalid(
            "import torch as T\nT.cuda.set_stream(side)\n",
            lines=[2],
            device="auto",
            fixed="import torch as T\nif T.accelerator.is_available():\n    T.accelerator.set_stream(side)\n",
        ),
        Invalid("import torch as T\nT.cuda.set_stream(side)\n", lines=[2], device="cpu", fixed="import torch as T\n"),
        Invalid("import torch.cuda\nx = torch.cuda.default_stream()\n", lines=[2]),
        # Not fixed: a stream as a value where there may be no accelerator, too old a torch.
        Invalid("import torch\ns = torch.cuda.current_stream()\n", lines=[2], device="auto"),
        Invalid("import torch\ns = torch.cuda.current_stream()\n", lines=[2], options={"torch-version": "2.5"}),
    ]

    def fix(self, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> Edit | None:
        statement = self._stream_context(node)
        if statement is None:
            return super().fix(node, entry)
        body = list(statement.body.body) if isinstance(statement.body, cst.IndentedBlock) else []
        if not body:
            return None
        first = body[0]
        if isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            body[0] = first.with_changes(leading_lines=[*statement.leading_lines, *first.leading_lines])
        return Edit(statement, cst.FlattenSentinel(body), FixSafety.UNSAFE, "removed the CUDA stream context")

    def _stream_context(self, node: cst.Name | cst.Attribute) -> cst.With | None:
        """The `with torch.cuda.stream(s):` statement `node` opens, when it is that alone (one
        item, no `as` target, not async)."""
        ancestors = self.ctx.ancestors
        if len(ancestors) < 3 or "torch.cuda.stream" not in self.ctx.qualified_names(node):
            return None
        call, item, statement = ancestors[-1], ancestors[-2], ancestors[-3]
        if not (isinstance(call, cst.Call) and call.func is node and isinstance(item, cst.WithItem)):
            return None
        if not isinstance(statement, cst.With) or len(statement.items) != 1 or item.asname or statement.asynchronous:
            return None
        return statement
