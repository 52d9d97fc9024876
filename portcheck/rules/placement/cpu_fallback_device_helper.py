from __future__ import annotations

from functools import partial

import libcst as cst

from portcheck import patterns, project
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.project import Project
from portcheck.rule import OFF, UNPLACED, WARNING, FileContext, Invalid, Rule, Valid

_DEVICE = frozenset({"torch.device"})
_DEPTH = 3  # names and calls looked through for what a return holds


class CpuFallbackDeviceHelper(Rule):
    """## What it does
    Reports where a name or attribute is bound to what a module-level function of the
    repository returns, when that is CUDA's device where there is one, some other named devices
    perhaps (`"mps"`, `"xpu"`), and otherwise the CPU, and the target is none of them: where a
    program picks its device. CodeFormer's `device = get_device()` (from
    `basicsr/utils/misc.py`, which returns `torch.device("cuda" if torch.cuda.is_available()
    else "cpu")` or MPS's), sd-scripts' `DEVICE = get_preferred_device()`. What the function
    returns is read through its `return` values, the names they are bound to, `torch.device(...)`
    and `a if c else b`; one that may return anything else (a device it is given) is left
    alone, and so is each use of such a function's answer in place (`x.to(dist_util.dev())`),
    which follows the function's own CUDA check.

    ## Why is this bad?
    On a TPU or Trainium host the function's checks all fail and it returns the CPU: the model
    and data the caller places on that device silently run on the CPU, slowly, and nothing
    says why. The function's own CUDA check is reported where it is written (PC201); each place
    that binds its answer is where a program loses the accelerator, which a port must check.

    ## Example
    ```python
    from basicsr.utils.misc import get_device
    device = get_device()
    net = CodeFormer().to(device)
    ```

    ## Use instead
    Make the helper return the accelerator present:
    ```python
    def get_device():
        return torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    ```

    ## Targets
    A warning where the function has no branch for the target's device; off on the CPU, on
    ROCm (which answers to CUDA's checks) and on a target the function names (`"mps"`).

    ## Fix safety
    No automatic fix: the function is the place to change, once, for all its callers.
    """

    code = "PC113"
    name = "cpu-fallback-device-helper"
    message = "`{call}` returns {choices} and otherwise the CPU: here everything it places silently runs on the CPU"
    hint = "make `{function}` return the accelerator present: torch.accelerator.current_accelerator() or the CPU"
    severity = {
        name: OFF if t.keeps_cuda_api or t.device_type == "cpu" else WARNING
        for name, t in target_data.all_targets().items()
    }
    triggers = (b"cuda",)
    cuda_only = True

    VALID = [
        # the function is handed the device: it may return any
        Valid(
            "import torch\ndef pick(device=None):\n    if device is not None:\n        return device\n"
            "    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')\ndevice = pick()\n"
        ),
        # it returns the accelerator present
        Valid(
            "import torch\ndef get_device():\n    return torch.accelerator.current_accelerator() or torch.device('cpu')\n"
            "device = get_device()\n"
        ),
        # a target the function names
        Valid(
            "import torch\ndef get_device():\n    if torch.backends.mps.is_available():\n        return torch.device('mps')\n"
            "    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')\ndevice = get_device()\n",
            options={"targets": ["mps"]},
        ),
        Valid("def get_device(torch):\n    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"),
        Valid(  # guided-diffusion's dist_util.dev(): used in place, where its check decides
            "import torch as th\ndef dev():\n    if th.cuda.is_available():\n        return th.device('cuda')\n"
            "    return th.device('cpu')\nmodel.to(dev())\nx = th.zeros(3, device=dev())\n"
        ),
        Valid(  # defined, never called
            "import torch\ndef get_device():\n    return 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        ),
    ]
    INVALID = [
        Invalid(  # CodeFormer's basicsr.utils.misc.get_device, called where it is defined
            "import torch\ndef get_device(gpu_id=None):\n    gpu_str = '' if gpu_id is None else f':{gpu_id}'\n"
            "    if torch.backends.mps.is_available():\n        return torch.device('mps' + gpu_str)\n"
            "    return torch.device('cuda' + gpu_str if torch.cuda.is_available() else 'cpu')\n"
            "device = get_device()\n",
            lines=[7],
            message="`get_device()` returns CUDA's or MPS's device and otherwise the CPU",
        ),
        Invalid(  # sd-scripts' get_preferred_device: the device bound in each branch, then returned
            "import functools\nimport torch as T\nfrom torch import cuda\nHAS_CUDA = cuda.is_available()\n"
            "@functools.lru_cache(maxsize=None)\ndef get_preferred_device():\n    if HAS_CUDA:\n"
            "        device = T.device('cuda')\n    else:\n        device = T.device('cpu')\n    return device\n"
            "DEVICE = get_preferred_device()\n",
            lines=[12],
        ),
        Invalid(
            "from torch.cuda import is_available as cuda_ok\nimport torch.cuda\ndef dev():\n"
            "    return 'cuda:0' if cuda_ok() else 'cpu'\nself_device = dev() if args.device is None else args.device\n",
            lines=[5],
            options={"targets": ["neuron"]},
        ),
        Invalid(
            "import torch\nfrom torch.backends import mps\ndef best():\n    if torch.cuda.is_available():\n"
            "        return 'cuda'\n    return 'mps' if mps.is_available() else 'cpu'\nd = best()\n",
            lines=[7],
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._helpers: dict[str, frozenset[str]] = {}  # in the second pass: each helper, with what it picks
        if ctx.project.complete:
            self._helpers = {name: frozenset(picks.split(",")) for name, picks in ctx.project.cpu_fallbacks}

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """The helpers' calls, by name: `dev(`, not every file that says `device`."""
        return tuple(sorted({name.rpartition(".")[2].encode() + b"(" for name, _ in known.cpu_fallbacks}))

    @classmethod
    def in_second_pass(cls, known: Project, path: str, module: str) -> bool:
        return bool(known.cpu_fallbacks)

    def visit_Call(self, node: cst.Call) -> None:
        if not self._helpers or not self._binds_device(node):
            return
        called = self._called(node)
        choices = self._helpers.get(called)
        if choices is None:
            return
        severity: dict[str, Severity] = {
            name: OFF if target_data.get(name).device_type in choices else self.severity[name]
            for name in self.ctx.targets
        }
        others = sorted(choices - {"cuda", "cpu"})
        shown = " or ".join(["CUDA's", *(f"{other.upper()}'s" for other in others)])
        function = called.rpartition(".")[2]
        self.report(node, severity=severity, call=f"{function}()", choices=f"{shown} device", function=f"{called}()")

    def _binds_device(self, node: cst.Call) -> bool:
        """Whether the call is what a name or attribute is bound to (`device = get_device()`, also
        as one side of `a if c else b`): where a program picks its device. Each use of the helper
        (`x.to(dist_util.dev())` all over guided-diffusion) follows that choice, and its CUDA
        check is reported where it is written."""
        ancestors = self.ctx.ancestors
        parent = ancestors[-1] if ancestors else None
        if type(parent) is cst.IfExp and node is not parent.test:
            parent = ancestors[-2] if len(ancestors) > 1 else None
        return type(parent) in (cst.Assign, cst.AnnAssign)

    def _called(self, node: cst.Call) -> str:
        """The repository function a call runs, by its qualified name ('' for others)."""
        if type(node.func) is cst.Name and self.ctx.flow is not None:
            defined = self.ctx.flow.module_functions().get(node.func.value)
            if (
                defined is not None
                and self.ctx.flow.resolver.scope_of(node.func.value) is self.ctx.flow.resolver.module
            ):
                return f"{self.ctx.module.name}.{node.func.value}"
        names = {self.ctx.module.absolute(name) for name in self.ctx.qualified_names(node.func)}
        return next((name for name in sorted(names) if name in self._helpers), "")

    def leave_Module(self, node: cst.Module) -> None:
        """In the first pass, note the module-level functions that return CUDA's device or the CPU's."""
        module_flow = self.ctx.flow
        if self.ctx.project.complete or module_flow is None or not self.ctx.module.name:
            return
        for statement in node.body:
            if type(statement) is not cst.FunctionDef:
                continue
            returned = module_flow.returns_of(statement)
            kinds: set[str] = set()
            for value, scope in returned:
                found = module_flow.in_scope(scope, partial(self._device_types, value, 0))
                if found is None:
                    break
                kinds |= found
            else:
                if {"cuda", "cpu"} <= kinds:
                    choices = ",".join(sorted(kinds - {"cpu"}))
                    for module in self.ctx.module.import_names:
                        self.record(project.CPU_FALLBACK, f"{module}.{statement.name.value}", UNPLACED, picks=choices)

    def _device_types(self, node: cst.BaseExpression, depth: int) -> frozenset[str] | None:
        """The device types an expression may be (`"cuda:0"`, `torch.device("cpu")`, `"cuda" if
        ok else "cpu"`, a name bound to those); None where it may be anything else."""
        if depth > _DEPTH:
            return None
        if type(node) is cst.IfExp:
            sides = [self._device_types(node.body, depth), self._device_types(node.orelse, depth)]
            return None if None in sides else frozenset().union(*sides)  # type: ignore[arg-type]
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Add:
            return self._device_types(node.left, depth)  # `"cuda" + gpu_str`
        if type(node) is cst.Call and self.ctx.qualified_names(node.func) & _DEVICE:
            given = patterns.positional(node, 0) or patterns.keyword(node, "type")
            if given is None:
                return None
            if any(name.startswith("torch.cuda.") for name in self.ctx.qualified_names(given.value)):
                return frozenset({"cuda"})  # `torch.device(torch.cuda.current_device())`
            return self._device_types(given.value, depth + 1)
        if type(node) is cst.Name:
            values = self.ctx.assigned_values(node)
            found = [self._device_types(value, depth + 1) for value in values]
            return None if not found or None in found else frozenset().union(*found)  # type: ignore[arg-type]
        text = patterns.string_value(node) if type(node) is not cst.FormattedString else _leading_text(node)
        kind = (text or "").partition(":")[0]
        return frozenset({kind}) if kind in patterns.DEVICE_TYPE_NAMES else None


def _leading_text(node: cst.FormattedString) -> str:
    """`cuda:` of `f"cuda:{rank}"`."""
    first = node.parts[0] if node.parts else None
    return first.value if type(first) is cst.FormattedStringText else ""
