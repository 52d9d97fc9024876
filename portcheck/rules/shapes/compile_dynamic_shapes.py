from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, OFF, WARNING, Invalid, Rule, Severity, Valid
from portcheck.rules.shapes import advice, resolved_call

_COMPILE = frozenset({"torch.compile", "torch._dynamo.optimize"})


class _Effect(NamedTuple):
    severity: Severity
    what: str


# What each `compile-dynamic` value of the target data means (targets.md §0 item 8, §1.1-1.3).
_EFFECTS = {
    "raises": _Effect(ERROR, "raises NotImplementedError in the {backend} backend"),
    "rejected": _Effect(ERROR, "is rejected by the {backend} backend"),
    "experimental": _Effect(WARNING, "is experimental with {backend}, which compiles static shapes"),
}


def _effect(target: str) -> _Effect | None:
    facts = target_data.get(target)
    effect = _EFFECTS.get(facts.compile_dynamic)
    return effect._replace(what=effect.what.format(backend=facts.compile_backend)) if effect else None


def _severity() -> dict[str, Severity]:
    return {name: effect.severity if (effect := _effect(name)) else OFF for name in target_data.TARGET_ORDER}


class CompileDynamicShapes(Rule):
    """## What it does
    Reports `torch.compile(..., dynamic=True)` (and `torch._dynamo.optimize(..., dynamic=True)`),
    as a call or a decorator.

    ## Why is this bad?
    TorchTPU's `torch.compile` raises `NotImplementedError` for `dynamic=True` (it injects
    `dynamic=False` by default), TorchNeuron rejects it because its compiler needs every shape
    ahead of time (NCC_EMOD025), and XLA compiles static shapes, so symbolic ones are
    experimental there.

    ## Example
    ```python
    model = torch.compile(model, dynamic=True)
    ```

    ## Use instead
    ```python
    model = torch.compile(model)
    # pad or bucket inputs; on TorchTPU bound the dims that vary:
    torch._dynamo.mark_dynamic(tokens, 1, min=128, max=1024)
    ```

    ## Targets
    An error on tpu and neuron, whose compile backends raise or reject it; a warning on xla;
    off elsewhere, where dynamic shapes compile.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC508"
    name = "compile-dynamic-shapes"
    message = "`dynamic=True` {effect}"
    hint = "drop dynamic=True and pad or bucket inputs to a few fixed shapes{advice}"
    severity = _severity()
    triggers = (b"dynamic",)

    VALID = [
        Valid("import torch\nmodel = torch.compile(model)\nstep = torch.compile(step, dynamic=False)\n"),
        Valid("def f(torch, m):\n    return torch.compile(m, dynamic=True)\n"),
        Valid("import torch\nm = torch.compile(model, dynamic=True)\n", options={"targets": ["cpu", "mps", "hpu"]}),
        Valid("import jax\nf = jax.jit(f, dynamic=True)\n"),
    ]
    INVALID = [
        Invalid("import torch\nmodel = torch.compile(model, dynamic=True)\n", lines=[2], message="NotImplementedError"),
        Invalid("import torch as T\n@T.compile(dynamic=True, fullgraph=True)\ndef step(x):\n    return x\n", lines=[2]),
        Invalid(
            "from torch import compile\nm = compile(m, dynamic=True)\n", lines=[2], options={"targets": ["neuron"]}
        ),
        Invalid("from torch._dynamo import optimize as opt\nf = opt('inductor', dynamic=True)(f)\n", lines=[2]),
        Invalid(
            "import torch._dynamo\nf = torch._dynamo.optimize(dynamic=True)(f)\n",
            lines=[2],
            options={"targets": ["xla"]},
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not resolved_call(self.ctx, node, _COMPILE):
            return
        dynamic = patterns.keyword(node, "dynamic")
        if dynamic is None or not (isinstance(dynamic.value, cst.Name) and dynamic.value.value == "True"):
            return
        effects = [(target, effect) for target in self.ctx.targets if (effect := _effect(target))]
        effect = "; ".join(f"{e.what} ({target})" for target, e in effects)
        self.report(dynamic, effect=effect, advice=advice(self.ctx.targets))
