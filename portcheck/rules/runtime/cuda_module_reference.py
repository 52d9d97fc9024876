from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid, per_target

_CUDA_LOOKUPS = frozenset({"torch.get_device_module"})
_IMPORTERS = frozenset({"importlib.import_module", "builtins.__import__", "__import__"})


class CudaModuleReference(Rule):
    """## What it does
    Reports `torch.cuda` used as a module value: passed around or stored
    (`backend = torch.cuda`), fetched by name (`getattr(torch, "cuda")`,
    `torch.get_device_module("cuda")`, `importlib.import_module("torch.cuda")`).

    ## Why is this bad?
    Whatever is later called on that object is a CUDA runtime call that no rule can see by
    name, and it raises or does nothing without CUDA. `torch.get_device_module` is the right
    tool, but not with `"cuda"` hard-coded.

    ## Example
    ```python
    device_module = getattr(torch, "cuda")
    device_module.synchronize()
    ```

    ## Use instead
    ```python
    torch.accelerator.synchronize()
    ```
    or, where a device-specific module is really needed,
    `torch.get_device_module(device)` with the device chosen once. The device modules are not
    uniform (`torch.mps` has no `set_device`; TorchTPU raises on `torch.tpu.synchronize()` from
    user code), so prefer `torch.accelerator`.

    ## Targets
    An error on every target but ROCm.

    ## Fix safety
    No automatic fix: the module's calls happen elsewhere, under other names, and the
    device-specific module of the target is no substitute (TorchTPU raises on `torch.tpu.*`
    device calls from user code, `torch.mps` lacks most of them), so each call needs its own
    `torch.accelerator` equivalent, chosen by a person.
    """

    code = "PC212"
    name = "cuda-module-reference"
    message = "{what} hands out the CUDA runtime module"
    hint = "call torch.accelerator.* directly, or torch.get_device_module(device) with the device chosen once"
    severity = per_target(ERROR, rocm=OFF)
    triggers = (b"cuda",)
    watched_names = ("torch.cuda",)

    VALID = [
        Valid("import torch\nmod = torch.get_device_module(device)\n"),
        Valid("import torch\ntorch.cuda.synchronize()\n", options={"select": ["PC212"]}),
        Valid("def f(torch):\n    return torch.cuda\n"),
        Valid('import torch\nname = getattr(torch, "__version__")\n'),
        Valid("cuda = object()\nholder = cuda\n"),
        # a probe hands out nothing (bark: `hasattr(torch.cuda, "amp")`)
        Valid('import torch\nif hasattr(torch.cuda, "amp") and hasattr(torch.cuda.amp, "autocast"):\n    pass\n'),
    ]
    INVALID = [
        Invalid("import torch\nbackend = torch.cuda\n", lines=[2]),
        Invalid('import torch as T\nmod = getattr(T, "cuda")\n', lines=[2]),
        Invalid("from torch import cuda\nmodules = {'gpu': cuda}\n", lines=[2]),
        Invalid(
            'from torch.cuda import synchronize as sync\nimport torch\nm = torch.get_device_module("cuda")\n', lines=[3]
        ),
        Invalid('import torch.cuda\nimport importlib\nm = importlib.import_module("torch.cuda")\n', lines=[3]),
    ]

    def visit_watched_name(self, node: cst.Name | cst.Attribute, qualified_name: str) -> None:
        if qualified_name == "torch.cuda" and not self._probed(node):
            self.report(node, what="`torch.cuda` used as a value")

    def _probed(self, node: cst.CSTNode) -> bool:
        """`hasattr(torch.cuda, "amp")`: a question about the module, which keeps nothing of it."""
        ancestors = self.ctx.ancestors
        if len(ancestors) < 2 or not isinstance(ancestors[-1], cst.Arg) or ancestors[-1].value is not node:
            return False
        call = ancestors[-2]
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "hasattr"

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        first = patterns.positional(node, 0)
        second = patterns.positional(node, 1)
        if isinstance(node.func, cst.Name) and node.func.value == "getattr" and not names and first and second:
            if "torch" in self.ctx.qualified_names(first.value) and patterns.string_value(second.value) == "cuda":
                self.report(node, what='`getattr(torch, "cuda")`')
        elif names & _CUDA_LOOKUPS and first and patterns.string_value(first.value) == "cuda":
            self.report(node, what='`torch.get_device_module("cuda")`')
        elif names & _IMPORTERS and first and patterns.string_value(first.value) == "torch.cuda":
            self.report(node, what='`import_module("torch.cuda")`')
