from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.rule import ERROR, OFF, WARNING, Invalid, Rule, Valid


class DeviceTableWithoutTarget(Rule):
    """## What it does
    Reports a lookup, by a device type that is not written out, in a table keyed by device
    types that has no entry for the target's: open_clip's and timm's `dist_backends = {"cuda":
    "nccl", "hpu": "hccl", "npu": "hccl", "xpu": "ccl"}` then `dist_backends.get(device_type,
    "gloo")`, a `{"cuda": torch.cuda, "mps": torch.mps}[device.type]` of device modules. The
    table is a dict literal with two or more keys, all device types, looked up in place or
    through the name it is bound to, by `table[key]` or `table.get(key, ...)`.

    ## Why is this bad?
    The code reads as device-agnostic, but it knows only the devices its author listed. On the
    target the lookup raises `KeyError`, or `.get` silently hands back its fallback: open_clip
    then starts its process group with `gloo` on a TPU host, whose collectives do not run on
    the chip's tensors.

    ## Example
    ```python
    dist_backends = {"cuda": "nccl", "hpu": "hccl", "xpu": "ccl"}
    dist_backend = dist_backends.get(device_type, "gloo")
    ```

    ## Use instead
    An entry for the target (its backend, module or setting), or a lookup that asks torch:
    ```python
    dist_backends = {"cuda": "nccl", "hpu": "hccl", "xpu": "ccl", "tpu": "tpu"}
    ```

    ## Targets
    An error where `table[key]` lacks the target's device type (it raises), a warning where
    `.get` does (it falls back); off on the CPU, where a table's fallback is the CPU's own by
    design, and wherever the table has the target's entry.

    ## Fix safety
    No automatic fix: what the target's entry should hold depends on the table.
    """

    code = "PC114"
    name = "device-table-without-target"
    message = (
        "`{lookup}` looks the device type up in a table of {keys} with no {missing} entry: on {targets} it {outcome}"
    )
    hint = "add the target's entry to the table ({missing}), or pick the value another way"
    severity = {name: OFF if t.device_type == "cpu" else ERROR for name, t in target_data.all_targets().items()}
    triggers = (b"cuda",)

    VALID = [
        Valid(  # every target's device type listed, a key written out, keys that are not devices
            "import torch\nbackends = {'cuda': 'nccl', 'cpu': 'gloo', 'tpu': 'tpu', 'neuron': 'neuron', 'xla': 'xla',\n"
            "            'mps': 'gloo', 'xpu': 'ccl', 'npu': 'hccl', 'hpu': 'hccl'}\n"
            "backend = backends.get(device.type, 'gloo')\nnccl = {'cuda': 'nccl', 'cpu': 'gloo'}['cuda']\n"
            "modes = {'train': 1, 'cuda': 2}\nmode = modes[name]\n"
        ),
        Valid("import torch\nstream = {'cuda': torch.cuda}.get(kind)\n"),  # one key: a test, not a table
        Valid(  # a parameter named like the module, looked up by a key written out
            "def runtime_of(cuda, mps):\n    return {'cuda': cuda, 'mps': mps}['cuda']\n"
        ),
    ]
    INVALID = [
        Invalid(  # open_clip's and timm's process group setup
            "import torch\ndef init(device_type):\n    dist_backends = {\n        'cuda': 'nccl',\n"
            "        'hpu': 'hccl',\n        'xpu': 'ccl',\n    }\n"
            "    dist_backend = dist_backends.get(device_type, 'gloo')\n"
            "    torch.distributed.init_process_group(backend=dist_backend)\n",
            lines=[8],
            message="with no \"tpu\" entry: on tpu it falls back to 'gloo'",
            options={"targets": ["tpu"]},
        ),
        Invalid(  # device modules, however imported: a subscript raises, `.get` gives None
            "import torch as T\nimport torch.xpu\nfrom torch import mps\nfrom torch.cuda import Stream as CudaStream\n"
            "STREAMS = {'cuda': CudaStream, 'xpu': torch.xpu.Stream}\ndef sync(device):\n"
            "    {'cuda': T.cuda, 'mps': mps, 'xpu': torch.xpu}[device.type].synchronize()\n"
            "    return STREAMS.get(device.type)\n",
            lines=[7, 8],
            options={"targets": ["tpu"]},
        ),
    ]

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
            self._check(node, node.value, node.slice[0].slice.value, None)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value != "get":
            return
        given = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        if len(given) in (1, 2) and len(given) == len(node.args):
            self._check(node, func.value, given[0], given[1] if len(given) == 2 else cst.Name("None"))

    def _check(
        self,
        lookup: cst.BaseExpression,
        table: cst.BaseExpression,
        key: cst.BaseExpression,
        fallback: cst.BaseExpression | None,
    ) -> None:
        """`fallback`: what `.get` gives where the key is missing; None for a subscript, which raises."""
        if patterns.string_value(key) is not None:
            return  # a key written out: the device is named, and its string is another rule's
        if type(table) is cst.Name:
            table = self.ctx.assigned_value(table) or table
        keys = _device_keys(table)
        if keys is None:
            return
        missing = {t: target_data.get(t).device_type not in keys for t in target_data.TARGET_ORDER}
        severity: dict[str, Severity] = {
            t: OFF if not missing[t] or self.severity[t] is OFF else ERROR if fallback is None else WARNING
            for t in target_data.TARGET_ORDER
        }
        affected = [t for t in self.ctx.targets if severity[t] is not OFF]
        if not affected:
            return
        code = cst.Module([]).code_for_node
        self.report(
            lookup,
            severity=severity,
            lookup=code(lookup),
            keys=", ".join(f'"{key}"' for key in keys),
            missing=" / ".join(dict.fromkeys(f'"{target_data.get(t).device_type}"' for t in affected)),
            targets="/".join(affected),
            outcome="raises KeyError" if fallback is None else f"falls back to {code(fallback)}",
        )


def _device_keys(table: cst.BaseExpression) -> tuple[str, ...] | None:
    """The keys of a dict literal keyed only by device types, two or more; None for anything else."""
    if type(table) is not cst.Dict:
        return None
    keys = []
    for element in table.elements:
        key = patterns.string_value(element.key) if type(element) is cst.DictElement else None
        if key not in patterns.DEVICE_TYPE_NAMES:
            return None
        keys.append(key)
    return tuple(keys) if len(keys) >= 2 else None
