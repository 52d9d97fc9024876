from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid
from portcheck.targets.library_devices import DeviceList, table


def _severities(api: DeviceList) -> dict[str, Severity]:
    return {name: OFF if t.device_type in api.accepts else ERROR for name, t in target_data.all_targets().items()}


class LibraryDeviceList(Rule):
    """## What it does
    Reports calls of other packages' functions whose device parameter takes only the device
    types they list, given a device that may be the target's: safetensors' `load_file(path,
    device=device)` and `safe_open(path, "pt", device=device)` take cpu, cuda, mps, npu, xpu,
    xla, mlu and hpu (flux loads every checkpoint with `load_sft(path, device=str(device))`).
    A CPU or an integer device, or another listed type written out (`device="mps"`), is left
    alone. The table is portcheck/targets/library_devices.toml.

    ## Why is this bad?
    Once the program's device is `tpu` or `neuron`, the call raises
    (`SafetensorError: device tpu is invalid`) before loading anything. Rewriting a `"cuda"`
    written there to the target's device type does the same, so portcheck's device-string fix
    leaves these calls alone.

    ## Example
    ```python
    state = load_file(path, device=str(device))
    ```

    ## Use instead
    ```python
    state = load_file(path, device="cpu")
    model.load_state_dict(state)  # copies into the parameters, on the target
    ```

    ## Targets
    An error on the targets whose device type the function does not list (tpu and neuron for
    safetensors); off on the others.

    ## Fix safety
    No automatic fix: loading on the CPU leaves the tensors there, which is the same only where
    they are copied into a model on the device afterwards (`load_state_dict` without
    `assign=True`).
    """

    code = "PC110"
    name = "library-device-list"
    message = "`{called}` takes only {accepted} as `{parameter}`: given the target's device it raises {raises}"
    hint = 'load on the CPU (`{parameter}="cpu"`) and move the tensors to the device after'
    severity = {t: max(_severities(api)[t] for api in table().values()) for t in target_data.TARGET_ORDER}
    triggers = tuple(sorted({name.rsplit(".", 1)[-1].encode() for name in table()}))

    VALID = [
        Valid("import torch\nfrom safetensors.torch import load_file\nstate = load_file(path)\n"),
        Valid("import torch\nfrom safetensors.torch import load_file\nstate = load_file(path, device='cpu')\n"),
        Valid("import torch\nfrom safetensors import safe_open\nf = safe_open(path, 'pt', device=0)\n"),
        Valid(
            "import torch\nfrom safetensors.torch import load_file\nstate = load_file(path, device=str(device))\n",
            options={"targets": ["xpu", "mps"]},
        ),
        Valid("def load(torch, load_file, path, device):\n    return load_file(path, device=device)\n"),
    ]
    INVALID = [
        Invalid(  # flux's util.py
            "import torch\nfrom safetensors.torch import load_file as load_sft\n"
            "def load_flow(path, device='cuda'):\n    return load_sft(path, device=str(device))\n",
            lines=[4],
            message="takes only cpu, cuda, hpu, mlu, mps, npu, xla or xpu as `device`",
        ),
        Invalid(
            "import torch as T\nimport safetensors\nfrom torch import nn\nfrom torch.nn import Linear as L\n"
            "import torch.nn\nwith safetensors.safe_open(path, 'pt', 'cuda:0') as f:\n    pass\n",
            lines=[6],
            options={"targets": ["neuron"]},
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        apis = sorted(name for name in self.ctx.qualified_names(node.func) if name in table())
        if not apis:
            return
        api = table()[apis[0]]
        given = patterns.argument(node, api.position, api.parameter)
        if given is None or given.star or self._elsewhere(given.value, api):
            return
        self.report(
            node,
            severity=_severities(api),
            called=patterns.dotted(node.func) or api.qualified,
            accepted=_listed(api.accepts),
            parameter=api.parameter,
            raises=api.raises,
        )

    def _elsewhere(self, device: cst.BaseExpression, api: DeviceList) -> bool:
        """A device the call takes on every target: the CPU, an index, another listed type
        written out (`"mps"`); not `"cuda"`, which the port makes the target's."""
        if isinstance(device, cst.Integer):
            return True
        flow = self.ctx.flow
        if flow is not None and flow.is_cpu(device):
            return True
        written = patterns.string_value(device)
        kind = written.split(":", 1)[0] if written else None
        return kind is not None and kind != "cuda" and kind in api.accepts


def _listed(kinds: frozenset[str]) -> str:
    ordered = sorted(kinds)
    return ", ".join(ordered[:-1]) + f" or {ordered[-1]}"
