from __future__ import annotations

from functools import partial

import libcst as cst

from portcheck import patterns, project
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.flow import is_self_attribute
from portcheck.project import Project
from portcheck.rule import ERROR, OFF, UNPLACED, FileContext, Invalid, Rule, Valid
from portcheck.targets.api import lookup

# What hands out the runtime module of a device chosen at run time.
_LOOKUPS = frozenset({"torch.get_device_module", "torch._utils._get_device_module"})
_DEPTH = 3  # names, attributes and returns looked through


# Per target, the functions its device module refuses or lacks; and all of them, to skip other calls at once.
_GAPS = {
    name: frozenset(t.device_module_raises + t.device_module_missing) for name, t in target_data.all_targets().items()
}
_ANY_GAP = frozenset().union(*_GAPS.values())


class DeviceModuleGap(Rule):
    """## What it does
    Reports calls of the current device's runtime module, as `torch.get_device_module(device)`
    (or `getattr(torch, device_type)`) hands it out, of a function that module refuses or lacks
    on the target: `device_module.synchronize()`, `.memory_stats()`, `.set_device(...)`... Also
    through a name bound to it, `self.` attributes, what one of the module's functions returns
    (torchtitan's `device_type, device_module = get_device_info()`), and the names other
    modules of the repository import (`from torchtitan.tools.utils import device_module`).

    ## Why is this bad?
    `torch.get_device_module` reads like device-agnostic code, but the device modules are not
    one API. TorchTPU keeps `torch.tpu.synchronize`, `current_device`, `set_device`,
    `device_count` and a few more internal: called from user code they raise RuntimeError
    ("… is internal to TorchTPU …"), and `torch.tpu` has no allocator API at all (no
    `memory_stats`, `empty_cache`, `reset_peak_memory_stats`). `torch.mps` and `torch.cpu` lack
    many of `torch.cuda`'s functions (AttributeError). The program that ran on CUDA stops at
    the first such call.

    ## Example
    ```python
    device_module = torch.get_device_module(device_type)
    device_module.reset_peak_memory_stats()
    stats = device_module.memory_stats(device)
    ```

    ## Use instead
    `torch.accelerator`, which every backend implements or answers for:
    ```python
    torch.accelerator.reset_peak_memory_stats()
    stats = torch.accelerator.memory_stats(device)
    ```
    Where the target has no equivalent (TorchTPU's memory statistics), guard the call by device
    type or drop it.

    ## Targets
    An error where the target data lists the function (`device-module-raises`,
    `device-module-missing`): tpu from TorchTPU's sources (targets.md §0, §3), mps, cpu and xpu
    from torch 2.13 itself; off where nothing is known to differ from `torch.cuda` (neuron's
    `torch.neuron` is documented, not listed).

    ## Fix safety
    No automatic fix: `torch.accelerator` has no equivalent for some of these calls, and the
    others read what the call's result is used for.
    """

    code = "PC220"
    name = "device-module-gap"
    message = "`{call}` calls the device's runtime module, which {effect}"
    hint = "{instead}"
    severity = {name: ERROR if _GAPS[name] else OFF for name in target_data.all_targets()}
    triggers = (b"get_device_module", b"getattr")

    VALID = [
        Valid("import torch\ntorch.accelerator.synchronize()\nstats = torch.accelerator.memory_stats()\n"),
        Valid(  # the module's functions every target has
            "import torch\nmod = torch.get_device_module(device)\nmod.manual_seed(0)\nname = mod.get_device_name()\n",
            options={"targets": ["tpu", "xpu"]},
        ),
        Valid(  # nothing known to differ there
            "import torch\ntorch.get_device_module(device).synchronize()\n", options={"targets": ["neuron"]}
        ),
        Valid(  # getattr of a name written out: another of torch's names (the "cuda" one is PC212's)
            "import torch\nhalf = getattr(torch, 'float16')\nhalf.synchronize()\n"
        ),
        Valid("def sync(torch, device):\n    torch.get_device_module(device).synchronize()\n"),
    ]
    INVALID = [
        Invalid(  # torchtitan's metrics
            "import torch\ndevice_module = torch.get_device_module(device_type)\n"
            "device_module.reset_peak_memory_stats()\ninfo = device_module.memory_stats(device)\n",
            lines=[3, 4],
            message="calls the device's runtime module, which has no",
        ),
        Invalid(  # torchtitan's tools/utils: the module handed out by a function of the module
            "import torch\nfrom torch._utils import _get_device_module\n\ndef get_device_info():\n"
            "    device_type = 'cuda'\n    return device_type, _get_device_module(device_type)\n\n"
            "device_type, device_module = get_device_info()\n\ndef barrier():\n    device_module.synchronize()\n",
            lines=[11],
            message="raises RuntimeError from user code on tpu",
        ),
        Invalid(
            "import torch as T\nclass Meter:\n    def __init__(self, device):\n"
            "        self.backend = getattr(T, device.type)\n    def reset(self):\n        self.backend.empty_cache()\n",
            lines=[6],
            message="has no `empty_cache` on tpu",
        ),
        Invalid(
            "from torch import get_device_module\nget_device_module(dev).set_device(rank)\n",
            lines=[2],
            options={"targets": ["tpu", "mps"]},
            message="raises RuntimeError from user code on tpu, has no `set_device` on mps",
        ),
        Invalid(
            "import torch.distributed\nimport torch\nm = torch.get_device_module()\ntorch.distributed.barrier()\n"
            "m.synchronize()\n",
            lines=[5],
        ),
        Invalid(
            "from torch.cuda import amp as cuda_amp\nimport torch\nmem = torch.get_device_module(d).memory_allocated()\n",
            lines=[3],
            options={"targets": ["cpu"]},
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._imported = frozenset()  # in the second pass: the repository's names that hold one
        if ctx.project.complete:
            self._imported = frozenset(ctx.project.device_modules)

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """The names other modules import a device module under."""
        return tuple(sorted({name.rpartition(".")[2].encode() for name in known.device_modules}))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute:
            return
        receiver = func.value
        if type(receiver) is cst.Attribute and receiver.attr.value == "memory":  # `device_module.memory._snapshot()`
            receiver, called = receiver.value, "memory"
        else:
            called = func.attr.value
        if called not in _ANY_GAP:
            return
        gapped = [name for name in self.ctx.targets if called in _GAPS[name]]
        if not gapped:
            return
        here = self._holds_module(receiver, frozenset())
        if here if not self.ctx.project.complete else (not here and self._holds_module(receiver, self._imported)):
            self._report(node, called, gapped)

    def leave_Module(self, node: cst.Module) -> None:
        """In the first pass, note the module-level names bound to a device module: other
        modules may import them (torchtitan's `from torchtitan.tools.utils import device_module`)."""
        if self.ctx.project.complete or not self.ctx.module.name:
            return
        for statement in node.body:
            for small in statement.body if type(statement) is cst.SimpleStatementLine else ():
                targets = [t.target for t in small.targets] if type(small) is cst.Assign else []
                for name in (each for target in targets for each in _names_in(target)):
                    if self._holds_module(name, frozenset()):
                        self.record(project.DEVICE_MODULE, f"{self.ctx.module.name}.{name.value}", UNPLACED)

    def _report(self, call: cst.Call, called: str, gapped: list[str]) -> None:
        raising = [name for name in gapped if called in target_data.get(name).device_module_raises]
        lacking = [name for name in gapped if name not in raising]
        effects = [f"raises RuntimeError from user code on {'/'.join(raising)}"] if raising else []
        effects += [f"has no `{called}` on {'/'.join(lacking)} (AttributeError)"] if lacking else []
        severity: dict[str, Severity] = {name: ERROR if name in gapped else OFF for name in self.ctx.targets}
        found = lookup(f"torch.cuda.{called}")
        replacement = found[1].replacement_on(gapped[0]) if found else ""
        instead = (
            f"instead: {replacement}; or guard the call by device type"
            if replacement.startswith("torch.accelerator")
            else "guard the call by device type, or drop it where the target has no equivalent"
        )
        shown = cst.Module([]).code_for_node(call.func)
        self.report(call, severity=severity, call=f"{shown}()", effect=", ".join(effects), instead=instead)

    def _holds_module(self, node: cst.BaseExpression, imported: frozenset[str], depth: int = 0) -> bool:
        """Whether an expression is a device's runtime module: what a lookup returns, a name or
        `self.` attribute bound to one, an item of what the module's function returns, or (in
        the second pass, `imported`) another module's name that holds one."""
        if depth > _DEPTH:
            return False
        if type(node) is cst.Call:
            return self._looks_up(node)
        if imported and {self.ctx.module.absolute(name) for name in self.ctx.qualified_names(node)} & imported:
            return True
        module_flow = self.ctx.flow
        if type(node) is cst.Name and module_flow is not None:
            values = self.ctx.assigned_values(node)
            if values:
                return all(self._holds_module(value, imported, depth + 1) for value in values)
            unpacked = module_flow.resolver.values_and_unpacking(node)
            return (
                unpacked is not None
                and not unpacked[0]
                and all(self._returned_item(call, index, imported, depth + 1) for call, index in unpacked[1])
            )
        if is_self_attribute(node) and module_flow is not None:
            assert type(node) is cst.Attribute
            bound = module_flow.self_attribute_values(node.attr.value)
            return bool(bound) and all(
                module_flow.in_scope(scope, partial(self._holds_module, value, imported, depth + 1))
                for value, scope in bound
            )
        return False

    def _returned_item(self, source: cst.BaseExpression, index: int, imported: frozenset[str], depth: int) -> bool:
        """`device_type, device_module = get_device_info()`: every return of the module's
        function is a tuple whose item at `index` holds one."""
        if type(source) is not cst.Call or self.ctx.flow is None:
            return False
        module_flow = self.ctx.flow
        returned = module_flow.returned_values(source)
        return bool(returned) and all(
            type(value) is cst.Tuple
            and index < len(value.elements)
            and module_flow.in_scope(scope, partial(self._holds_module, value.elements[index].value, imported, depth))
            for value, scope in returned
        )

    def _looks_up(self, call: cst.Call) -> bool:
        """`torch.get_device_module(device)` (not of "cuda": PC212's), or `getattr(torch,
        device_type)` with the name not written out."""
        first = patterns.positional(call, 0)
        if self.ctx.qualified_names(call.func) & _LOOKUPS:
            return first is None or patterns.string_value(first.value) != "cuda"
        second = patterns.positional(call, 1)
        return (
            type(call.func) is cst.Name
            and call.func.value == "getattr"
            and not self.ctx.qualified_names(call.func)
            and first is not None
            and second is not None
            and "torch" in self.ctx.qualified_names(first.value)
            and patterns.string_value(second.value) is None
        )


def _names_in(target: cst.BaseExpression) -> list[cst.Name]:
    if type(target) is cst.Name:
        return [target]
    if type(target) in (cst.Tuple, cst.List):
        return [name for element in target.elements for name in _names_in(element.value)]  # type: ignore[attr-defined]
    return []
