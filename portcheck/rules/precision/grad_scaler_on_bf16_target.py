from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import libcst as cst

from portcheck import flow, patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety
from portcheck.rewrites import amp, calls, edits
from portcheck.rule import OFF, WARNING, FileContext, Invalid, Rule, Valid, at_most_info
from portcheck.rules.precision import FLOAT16, chooses_float16, under_test

# What a training step asks of its scaler: each becomes the plain step without one.
_SCALER_METHODS = frozenset({"scale", "unscale_", "step", "update"})
# Where `enabled` comes by position: after `device` in torch.amp's scaler, first-but-one in the old ones.
_ENABLED_POSITION = {
    "torch.GradScaler": 5,
    "torch.amp.GradScaler": 5,
    "torch.amp.grad_scaler.GradScaler": 5,
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": 5,
}
_ENABLED_POSITION_OLD = 4


@dataclass(frozen=True)
class _Use:
    """A call of a scaler's step method, with the chain to it, its receiver, the values `=`
    binds to the receiver where it is a name (asked in its scope), and, for a parameter, its
    function."""

    call: cst.Call
    chain: tuple[cst.CSTNode, ...]
    receiver: cst.BaseExpression
    bound: list[cst.BaseExpression]
    function: cst.FunctionDef | None


class GradScalerOnBf16Target(Rule):
    """## What it does
    Reports creating a `GradScaler` (`torch.amp.GradScaler`, `torch.cuda.amp.GradScaler`, FSDP's
    `ShardedGradScaler`) when
    a selected target trains natively in bfloat16, and, as info, each step it takes (`scale`,
    `unscale_`, `step`, `update` called on a name or `self` attribute the module binds to it):
    lines to tidy with it, once the scaler is off or gone. A scaler made or enabled only for
    float16 (`enabled=(dtype == "float16")`, under `if need_scaler:` where `need_scaler =
    dtype is torch.float16`, `GradScaler() if dtype == torch.float16 else None`) is left
    alone: where the dtype is chosen is the finding (PC206, PC308). A flag
    (`enabled=args.fp16`) is not such a choice: it asks for mixed precision, which the port
    keeps, in bfloat16, with the flag still on.

    ## Why is this bad?
    Loss scaling exists because float16 gradients underflow. bfloat16 has float32's exponent
    range, so on TPU, Trainium, XLA and Gaudi a scaler only adds work (an inf/NaN check and a
    host sync every step), and GradScaler support on PrivateUse1 backends is not guaranteed.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("tpu")
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    ```

    ## Use instead
    ```python
    loss.backward()
    optimizer.step()
    ```
    or keep the code path and construct the scaler with `enabled=False`.

    ## Targets
    A warning on the bfloat16-native targets (tpu, neuron, xla, hpu, cpu), info for each step
    the scaler takes; off on targets that train in float16 and need it.

    ## Fix safety
    Unsafe (needs `--unsafe-fixes`), and only on targets that train natively in bfloat16 (not
    for `--device auto`, which may run on a float16 device that needs the scaler): the scaler
    is kept but constructed with `enabled=False` (replacing an `enabled=` the code gives), so
    `scale`, `step` and `update` become plain pass-throughs. That is only right when every
    autocast region it guards runs in bfloat16: one that still runs in float16 (an explicit
    `dtype=torch.float16`, or an autocast PC303 has not fixed) then lets small gradients
    underflow to zero. A disabled scaler also no longer skips the optimizer steps whose
    gradients hold inf or NaN, `get_scale()` returns 1.0, and its `state_dict()` is empty.
    Not fixed: a call given `*args` or `**kwargs` (`enabled` may be among them).
    """

    code = "PC304"
    name = "grad-scaler-on-bf16-target"
    message = "{subject} is not needed with bfloat16, which the target uses natively"
    hint = "drop the scaler (scale/step/update become backward/step), or construct it with enabled=False"
    severity = {name: OFF if t.needs_grad_scaler else WARNING for name, t in target_data.all_targets().items()}
    fix_safety = FixSafety.UNSAFE
    triggers = (b"GradScaler",)

    VALID = [
        Valid("import torch\nscaler = torch.amp.GradScaler('cuda')\n", options={"targets": ["mps", "xpu", "rocm"]}),
        Valid(
            "import torch\nscaler = torch.amp.GradScaler('tpu', enabled=False)\nscaler.scale(loss).backward()\n"
            "def step(scaler, opt):\n    scaler.step(opt)\n    scaler.update()\n"
        ),
        Valid("def f(torch):\n    return torch.amp.GradScaler()\n"),
        Valid(  # nanochat: a scaler only where the user chose float16
            "import torch\nscaler = torch.amp.GradScaler() if COMPUTE_DTYPE == torch.float16 else None\n"
        ),
        # made, or enabled, only for float16: the dtype choice is the finding (PC206, PC308)
        Valid("import torch\nscaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))\n"),
        Valid(
            "import torch\nneed_scaler = cfg.autocast and autocast_dtype is torch.float16\nif need_scaler:\n"
            "    scaler = torch.cuda.amp.GradScaler()\n"
        ),
        Valid("class GradScaler:\n    pass\nscaler = GradScaler()\n"),
    ]
    INVALID = [
        Invalid("import torch\nscaler = torch.GradScaler()\n", lines=[2]),  # efficientvit's DC-AE trainer
        Invalid(  # dinov2: FSDP's sharded scaler, on CUDA by default
            "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\nclass SSLMetaArch:\n"
            "    def __init__(self, cfg):\n"
            "        self.fp16_scaler = ShardedGradScaler() if cfg.compute_precision.grad_scaler else None\n",
            lines=[4],
            unsafe=True,
            fixed="from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\nclass SSLMetaArch:\n"
            "    def __init__(self, cfg):\n"
            "        self.fp16_scaler = ShardedGradScaler(enabled=False) if cfg.compute_precision.grad_scaler else None\n",
        ),
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler('tpu')\n",
            lines=[2],
            unsafe=True,
            fixed="import torch\nscaler = torch.amp.GradScaler('tpu', enabled=False)\n",
        ),
        # changes numerics: nothing without --unsafe-fixes
        Invalid("import torch\nscaler = torch.amp.GradScaler('tpu')\n", lines=[2]),
        Invalid(
            "import torch as T\nscaler = T.cuda.amp.GradScaler()\n",
            lines=[2],
            device="cpu",
            unsafe=True,
            fixed="import torch as T\nscaler = T.cuda.amp.GradScaler(enabled=False)\n",
        ),
        Invalid(
            "from torch import amp\nscaler = amp.GradScaler(enabled=use_amp)\n",
            lines=[2],
            device="neuron",
            unsafe=True,
            fixed="from torch import amp\nscaler = amp.GradScaler(enabled=False)\n",
        ),
        Invalid(
            "from torch.cuda.amp import GradScaler as Scaler\ns = Scaler(\n    init_scale=1024,\n    growth_interval=100,\n)\n",
            lines=[2],
            device="xla",
            unsafe=True,
            fixed="from torch.cuda.amp import GradScaler as Scaler\ns = Scaler(\n    init_scale=1024,\n"
            "    growth_interval=100,\n    enabled=False,\n)\n",
        ),
        Invalid(
            "import torch.amp\ns = torch.amp.grad_scaler.GradScaler('neuron', 1024.0, 2.0, 0.5, 100, True)\n",
            lines=[2],
            device="neuron",
            unsafe=True,
            fixed="import torch.amp\ns = torch.amp.grad_scaler.GradScaler('neuron', 1024.0, 2.0, 0.5, 100, False)\n",
        ),
        Invalid(  # each step the scaler takes is a line to tidy with it, info (yolov9, moco-v3, SimCSE)
            "import torch\nclass Trainer:\n    def __init__(self):\n        self.scaler = torch.cuda.amp.GradScaler()\n"
            "    def step(self, loss, opt):\n        self.scaler.scale(loss).backward()\n"
            "        self.scaler.unscale_(opt)\n        self.scaler.step(opt)\n        self.scaler.update()\n"
            "def train(loss, opt, other):\n    scaler = torch.amp.GradScaler('tpu')\n    scaler.step(opt)\n"
            "    other.step(opt)\n    epoch(opt, scaler)\ndef epoch(opt, scaler):\n    scaler.update()\n",
            lines=[4, 6, 7, 8, 9, 11, 12, 16],
        ),
        Invalid(  # CoOp: made one way of a choice, in a method other than __init__
            "from torch.cuda.amp import GradScaler\nclass Trainer:\n    def build(self, prec):\n"
            "        self.scaler = GradScaler() if prec == 'amp' else None\n"
            "    def step(self, loss):\n        self.scaler.scale(loss).backward()\n",
            lines=[4, 6],
        ),
        Invalid(  # torch-ngp: a flag asks for mixed precision, bfloat16 on the target, and the scaler stays on
            "import torch\nclass Trainer:\n    def __init__(self, fp16):\n"
            "        self.scaler = torch.cuda.amp.GradScaler(enabled=fp16)\n"
            "    def step(self, loss):\n        self.scaler.scale(loss).backward()\n",
            lines=[4, 6],
        ),
        # auto may run on a float16 device that needs the scaler; **kwargs may hold `enabled`
        Invalid("import torch\nscaler = torch.amp.GradScaler(DEVICE.type)\n", lines=[2], device="auto", unsafe=True),
        Invalid("import torch\nscaler = torch.amp.GradScaler('tpu', **opts)\n", lines=[2], unsafe=True),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._scalers: set[int] = set()  # the reported constructor calls
        self._uses: list[_Use] = []

    def visit_Call(self, node: cst.Call) -> None:
        if patterns.method_name(node) in _SCALER_METHODS:
            assert isinstance(node.func, cst.Attribute)
            receiver, resolver = node.func.value, self.ctx.resolver
            bound: list[cst.BaseExpression] = []
            function = None
            if isinstance(receiver, cst.Name) and resolver is not None:
                bound = resolver.explicit_values(receiver)
                function = None if bound else resolver.parameter_of(receiver)
            self._uses.append(_Use(node, self.ctx.chain(node), receiver, bound, function))
        names = self.ctx.qualified_names(node.func) & patterns.GRAD_SCALERS
        if not names:
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "enabled" and isinstance(arg.value, cst.Name):
                if arg.value.value == "False":
                    return
            if arg.keyword is not None and arg.keyword.value == "enabled" and self._about_float16(arg.value):
                return  # `enabled=(dtype == "float16")`: off wherever the target's bfloat16 is used
        if under_test([*self.ctx.ancestors, node], self._about_float16):
            return  # `if need_scaler:` with `need_scaler = amp_dtype is torch.float16`
        self._scalers.add(id(node))
        self.report(node, edit=self._edit(node, names), subject="a GradScaler")

    def leave_Module(self, node: cst.Module) -> None:
        """Each step the reported scalers take (`scaler.scale(loss).backward()`, `scaler.step(opt)`,
        `scaler.update()`), where the receiver is a name or `self` attribute bound to one: info,
        a line to tidy once the scaler goes (the decision is where it is made; the fix's
        `enabled=False` leaves these as pass-throughs)."""
        for use in self._uses:
            if any(id(choice) in self._scalers for value in self._held(use) for choice in _choices(value)):
                shown = f"`{cst.Module([]).code_for_node(use.receiver)}.{patterns.method_name(use.call)}()`"
                report = self.report_here(
                    use.call, chain=use.chain, severity=self._step_severity, subject=f"{shown} of a GradScaler"
                )
                self.reports.append(report)

    @property
    def _step_severity(self) -> dict:
        assert isinstance(self.severity, dict)
        return at_most_info(self.severity)

    def _held(self, use: _Use) -> list[cst.BaseExpression]:
        """What a step's receiver may hold: what `=` binds to the name, what the module assigns
        to the `self` attribute, or what the module's calls pass for the parameter (moco-v3's
        `train(..., scaler, ...)`)."""
        module_flow, resolver = self.ctx.flow, self.ctx.resolver
        if module_flow is None or resolver is None:
            return use.bound
        if flow.is_self_attribute(use.receiver):
            assert isinstance(use.receiver, cst.Attribute)
            return [value for value, _ in module_flow.self_attribute_values(use.receiver.attr.value)]
        if use.function is None or not isinstance(use.receiver, cst.Name):
            return use.bound
        name = use.receiver.value
        passed = module_flow.passed_arguments(use.function, name) or []
        return [
            value
            for arg, scope in passed
            for value in (
                module_flow.in_scope(scope, partial(resolver.explicit_values, arg))
                if isinstance(arg, cst.Name)
                else [arg]
            )
        ]

    def _about_float16(self, test: cst.BaseExpression, depth: int = 0) -> bool:
        """A test that asks for float16 (`dtype == "float16"`, `amp_dtype is torch.float16`,
        `args.fp16`), directly, in `and`/`or`/`not`, or through a name bound to one."""
        if chooses_float16(test, flags=False):
            return True
        if isinstance(test, cst.Name) and depth < 2:
            bound = self.ctx.assigned_value(test)
            return bound is not None and self._about_float16(bound, depth + 1)
        return any(
            self.ctx.qualified_names(node) & FLOAT16 or patterns.string_value(node) in ("float16", "fp16")
            for node in _parts(test)
        )

    def _edit(self, call: cst.Call, names: frozenset[str]) -> edits.Edit | None:
        if not self.ctx.fix_target.bf16_native or amp.has_star(call):
            return None
        title = "GradScaler(..., enabled=False)"
        false = cst.Name("False")
        position = min(_ENABLED_POSITION.get(name, _ENABLED_POSITION_OLD) for name in names)
        args = list(call.args)
        for index, arg in enumerate(args):
            by_keyword = arg.keyword is not None and arg.keyword.value == "enabled"
            if by_keyword or (arg.keyword is None and index == position):
                args[index] = arg.with_changes(value=false)
                return edits.Edit(call, call.with_changes(args=args), FixSafety.UNSAFE, title)
        fixed = amp.insert_args(call, len(args), [calls.keyword_arg("enabled", false)])
        return edits.Edit(call, fixed, FixSafety.UNSAFE, title)


def _choices(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """Either value of an `if` expression (`GradScaler() if prec == "amp" else None`), each."""
    if isinstance(value, cst.IfExp):
        return [*_choices(value.body), *_choices(value.orelse)]
    return [value]


def _parts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of a test's comparisons and boolean operations."""
    if isinstance(test, cst.BooleanOperation):
        return [*_parts(test.left), *_parts(test.right)]
    if isinstance(test, cst.UnaryOperation):
        return _parts(test.expression)
    if isinstance(test, cst.Comparison):
        return [test.left, *(link.comparator for link in test.comparisons)]
    return [test]
