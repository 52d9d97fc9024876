from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.rule import ERROR, OFF, Invalid, Rule, Valid

_SDPA_KERNEL = frozenset({"torch.nn.attention.sdpa_kernel"})
_BACKEND = "torch.nn.attention.SDPBackend."


class SdpaBackendUnavailable(Rule):
    """## What it does
    Reports `torch.nn.attention.sdpa_kernel(...)` that allows only backends the target's
    `scaled_dot_product_attention` cannot run: `sdpa_kernel(SDPBackend.FLASH_ATTENTION)`
    (fish-speech's decoder), `sdpa_kernel([SDPBackend.CUDNN_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION])`, also through a name bound to the list.

    ## Why is this bad?
    The context restricts attention to the listed kernels. FlashAttention, memory-efficient
    attention and cuDNN attention are CUDA (and ROCm) kernels; where none of the listed ones
    exists, every attention call in the block raises `RuntimeError: No viable backend for
    scaled_dot_product_attention was found` (torch 2.13 on the CPU, for all but flash and math).

    ## Example
    ```python
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```

    ## Use instead
    Let the target pick (drop the context there), or allow the math backend too:
    ```python
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```

    ## Targets
    An error where the target data lists the backends SDPA runs (`sdpa-backends`): tpu and
    neuron (math only: targets.md §2, the sdp_kernel row) and cpu (flash and math, checked on
    torch 2.13.0); off where that is not known.

    ## Fix safety
    No automatic fix: allowing the math backend changes which kernel CUDA runs too, and
    dropping the context is a choice per target.
    """

    code = "PC221"
    name = "sdpa-backend-unavailable"
    message = "`sdpa_kernel(...)` allows only {allowed}, which {target} cannot run: attention in it finds no backend"
    hint = "drop sdpa_kernel on this target, or allow SDPBackend.MATH too"
    severity = {name: ERROR if t.sdpa_backends else OFF for name, t in target_data.all_targets().items()}
    triggers = (b"sdpa_kernel",)

    VALID = [
        Valid(  # the math backend runs everywhere
            "import torch\nfrom torch.nn.attention import SDPBackend, sdpa_kernel\n"
            "with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):\n    pass\n"
        ),
        Valid("from torch import nn\nwith nn.attention.sdpa_kernel([nn.attention.SDPBackend.MATH]):\n    pass\n"),
        Valid(  # a computed list is not read
            "import torch\nfrom torch.nn.attention import sdpa_kernel\nwith sdpa_kernel(chosen):\n    pass\n"
        ),
        Valid(  # not known there
            "import torch\nfrom torch.nn.attention import SDPBackend, sdpa_kernel\n"
            "with sdpa_kernel(SDPBackend.FLASH_ATTENTION):\n    pass\n",
            options={"targets": ["mps", "xpu"]},
        ),
        Valid(
            "def attend(torch, q):\n    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):\n        pass\n"
        ),
    ]
    INVALID = [
        Invalid(  # fish-speech's decoder
            "import torch\nfrom torch.nn.attention import SDPBackend, sdpa_kernel\n"
            "with sdpa_kernel(SDPBackend.FLASH_ATTENTION):\n    pass\n",
            lines=[3],
            options={"targets": ["tpu", "neuron"]},
            message="allows only SDPBackend.FLASH_ATTENTION, which tpu/neuron cannot run",
        ),
        Invalid(  # torchtitan's attention: the list bound first
            "import torch as T\nbackends = [T.nn.attention.SDPBackend.CUDNN_ATTENTION, T.nn.attention.SDPBackend.EFFICIENT_ATTENTION]\n"
            "with T.nn.attention.sdpa_kernel(backends):\n    pass\n",
            lines=[3],
            message="which ",
        ),
        Invalid(
            "from torch.nn.attention import sdpa_kernel as kernel, SDPBackend as B\n"
            "with kernel((B.EFFICIENT_ATTENTION,), set_priority=True):\n    pass\n",
            lines=[2],
            options={"targets": ["cpu"]},
        ),
        Invalid(
            "import torch.nn.attention\nimport torch\nctx = torch.nn.attention.sdpa_kernel(backends=[torch.nn.attention.SDPBackend.CUDNN_ATTENTION])\n",
            lines=[3],
        ),
        Invalid(
            "from torch.nn import attention\nimport torch\nwith attention.sdpa_kernel(attention.SDPBackend.FLASH_ATTENTION):\n    pass\n",
            lines=[3],
            options={"targets": ["tpu"]},
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & _SDPA_KERNEL:
            return
        given = patterns.argument(node, 0, "backends")
        allowed = self._backends(given.value) if given is not None else None
        if not allowed:
            return
        runs = {name: set(target_data.get(name).sdpa_backends) for name in self.ctx.targets}
        lacking = [name for name, backends in runs.items() if backends and not backends & set(allowed)]
        if not lacking:
            return
        severity: dict[str, Severity] = {name: ERROR if name in lacking else OFF for name in self.ctx.targets}
        shown = ", ".join(f"SDPBackend.{each}" for each in allowed)
        self.report(node, severity=severity, allowed=shown, target="/".join(lacking))

    def _backends(self, value: cst.BaseExpression, depth: int = 0) -> list[str] | None:
        """The SDPBackend members a value lists: one, a list or tuple of them, or a name bound
        once to one of those; None where any is not known."""
        if type(value) is cst.Name and depth == 0:
            bound = self.ctx.assigned_value(value)
            return self._backends(bound, depth + 1) if bound is not None else None
        items = [element.value for element in value.elements] if type(value) in (cst.List, cst.Tuple) else [value]  # type: ignore[attr-defined]
        found = []
        for item in items:
            names = [name for name in self.ctx.qualified_names(item) if name.startswith(_BACKEND)]
            if not names:
                return None
            found.append(names[0].removeprefix(_BACKEND))
        return found or None
