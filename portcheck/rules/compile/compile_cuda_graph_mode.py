from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety, Severity
from portcheck.rewrites import edits
from portcheck.rewrites.calls import without_arguments
from portcheck.rewrites.edits import Edit
from portcheck.rule import OFF, WARNING, FileContext, Invalid, Rule, Valid

COMPILE = frozenset({"torch.compile"})
_PARTIAL = frozenset({"functools.partial"})
_CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
_COMPILE_METHODS = frozenset({"compile", "compile_repeated_blocks"})
_DEFAULT_MODE = "default"  # what torch.compile runs without mode=


def compiles(call: cst.Call, ctx: FileContext) -> bool:
    """`torch.compile(...)`, `functools.partial(torch.compile, ...)`, `module.compile(...)` or
    diffusers' `module.compile_repeated_blocks(...)`: both methods hand their arguments to
    torch.compile."""
    names = ctx.qualified_names(call.func)
    if names & COMPILE:
        return True
    if names & _PARTIAL:
        first = patterns.positional(call, 0)
        return first is not None and bool(ctx.qualified_names(first.value) & COMPILE)
    return patterns.method_name(call) in _COMPILE_METHODS and not patterns.resolves_outside_torch_classes(names)


def string_literals(expression: cst.BaseExpression, ctx: FileContext) -> list[tuple[cst.CSTNode, str]]:
    """The string literals an argument can evaluate to, directly or through a name bound once
    (`MODE = "max-autotune"`), including both branches of `a if c else b`."""
    if isinstance(expression, cst.Name):
        expression = ctx.assigned_value(expression) or expression
    found = []
    for node in patterns.value_literals(expression, lambda n: patterns.string_value(n) is not None):
        value = patterns.string_value(node)
        if value is not None:
            found.append((node, value))
    return found


def _mode_severity(mode: str) -> dict[str, Severity]:
    """A warning where the target data does not list the mode among its compile modes."""
    return {name: OFF if mode in t.compile_modes else WARNING for name, t in target_data.all_targets().items()}


class CompileCudaGraphMode(Rule):
    """## What it does
    Reports `torch.compile(..., mode="reduce-overhead")` and `mode="max-autotune"` (also as a
    decorator, through `functools.partial`, `nn.Module.compile`, diffusers'
    `compile_repeated_blocks`, or a name bound once to the mode string).

    ## Why is this bad?
    Both modes exist to capture CUDA graphs (max-autotune also autotunes Triton kernels).
    TorchNeuron ignores every mode but the default with a warning, TorchTPU tests only
    "default", and XLA, Gaudi, MPS and Ascend have no CUDA graphs for the mode to use: the
    setting does nothing useful there and hides which runs really used it.

    ## Example
    ```python
    model = torch.compile(model, mode="reduce-overhead")
    ```

    ## Use instead
    ```python
    model = torch.compile(model)
    ```
    and, where CUDA runs still want the mode, choose it from the device type.

    ## Targets
    A warning wherever the target data's `compile-modes` does not list the mode: every target
    for "reduce-overhead" except ROCm and XPU; "max-autotune" is also fine on the CPU.

    ## Fix safety
    Safe: where the target data's `compile-modes` lacks the mode, `mode=` goes (the default
    mode), or, where the mode string reaches the call through a name or a conditional, that
    string becomes `"default"`. The mode only changes how compiled code is scheduled (CUDA
    graphs, autotuning), not what it computes: where it is reported the target has no CUDA
    graphs (TorchNeuron falls back to the default mode with a warning; on the CPU
    reduce-overhead runs the default code). With `--device auto` a CUDA host then runs
    without CUDA graphs: slower launches, the same results, and no outputs overwritten by the
    next replay.
    """

    code = "PC801"
    name = "compile-cuda-graph-mode"
    message = '`mode="{mode}"` is a CUDA-graph mode of torch.compile, not supported on {targets}'
    hint = 'drop mode= (the default mode) on {targets}; keep "{mode}" only behind a check for CUDA'
    severity = {
        name: max(_mode_severity(mode)[name] for mode in _CUDA_GRAPH_MODES) for name in target_data.TARGET_ORDER
    }
    fix_safety = FixSafety.SAFE
    triggers = (b"reduce-overhead", b"max-autotune")

    VALID = [
        Valid('import torch\nmodel = torch.compile(model, mode="default")\n'),
        Valid("import torch as T\nstep = T.compile(step, mode=None, fullgraph=True)\n"),
        Valid('def compile(model, mode):\n    return model\n\nmodel = compile(model, mode="reduce-overhead")\n'),
        Valid('def build(torch, compile):\n    return compile(net, mode="max-autotune")\n'),
        Valid('import re\npattern = re.compile("max-autotune")\n'),
        Valid(
            'import torch\nmodel = torch.compile(model, mode="reduce-overhead")\n', options={"targets": ["rocm", "xpu"]}
        ),
        Valid('import torch\nmodel = torch.compile(model, mode="max-autotune")\n', options={"targets": ["cpu"]}),
    ]
    INVALID = [
        Invalid(
            'import torch\nmodel = torch.compile(model, mode="reduce-overhead")\n',
            lines=[2],
            message="reduce-overhead",
            fixed="import torch\nmodel = torch.compile(model)\n",
        ),
        Invalid(
            'import torch\nmodel = torch.compile(model, mode="reduce-overhead")\n',
            lines=[2],
            device="auto",
            fixed="import torch\nmodel = torch.compile(model)\n",
        ),
        Invalid(
            'import torch as T\nmodel = T.compile(model, fullgraph=True, mode="max-autotune")\n',
            lines=[2],
            device="neuron",
            fixed="import torch as T\nmodel = T.compile(model, fullgraph=True)\n",
        ),
        Invalid(
            'import torch as T\nmodel = T.compile(model, mode="max-autotune", fullgraph=True)\n',
            lines=[2],
            device="xla",
            fixed="import torch as T\nmodel = T.compile(model, fullgraph=True)\n",
        ),
        Invalid(  # max-autotune is a CPU mode too, and auto is judged on the CPU: kept
            'import torch as T\nmodel = T.compile(model, mode="max-autotune", fullgraph=True)\n',
            lines=[2],
            device="auto",
        ),
        Invalid(
            'from torch import compile\n@compile(mode="reduce-overhead")\ndef step(x):\n    return x\n',
            lines=[2],
            device="cpu",
            fixed="from torch import compile\n@compile()\ndef step(x):\n    return x\n",
        ),
        Invalid(
            "from torch.cuda import is_available as has_cuda\nimport torch.nn\n"
            'MODE = "max-autotune" if has_cuda() else "default"\nnet = torch.nn.Linear(2, 2)\nnet.compile(mode=MODE)\n',
            lines=[3],
            fixed="from torch.cuda import is_available as has_cuda\nimport torch.nn\n"
            'MODE = "default" if has_cuda() else "default"\nnet = torch.nn.Linear(2, 2)\nnet.compile(mode=MODE)\n',
        ),
        Invalid(
            'import functools\nimport torch\ncompile_fn = functools.partial(torch.compile, mode="reduce-overhead")\n',
            lines=[3],
            device="hpu",
            fixed="import functools\nimport torch\ncompile_fn = functools.partial(torch.compile)\n",
        ),
        Invalid(
            'import torch\nmodel = torch.compile(model, mode="reduce-overhead")\n',
            options={"targets": ["cpu"]},
            device="cpu",
            fixed="import torch\nmodel = torch.compile(model)\n",
        ),
        Invalid(
            'pipe.transformer.compile_repeated_blocks(mode="max-autotune", fullgraph=True)\n',
            lines=[1],
            device="mps",
            fixed="pipe.transformer.compile_repeated_blocks(fullgraph=True)\n",
        ),
        Invalid(
            "import torch\n\nmodel = torch.compile(\n    model,\n    mode='reduce-overhead',\n)\n",
            lines=[5],
            device="npu",
            fixed="import torch\n\nmodel = torch.compile(\n    model,\n)\n",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        mode = patterns.keyword(node, "mode")
        if mode is None or not compiles(node, self.ctx):
            return
        for literal, value in string_literals(mode.value, self.ctx):
            if value in _CUDA_GRAPH_MODES and id(literal) not in self._reported:
                self._reported.add(id(literal))
                severity = _mode_severity(value)
                where = "/".join(t for t in self.ctx.targets if severity[t] > OFF) or "the selected targets"
                edit = self._edit(node, mode, literal, value)
                self.report(literal, severity=severity, mode=value, targets=where, edit=edit)

    def _edit(self, call: cst.Call, mode: cst.Arg, literal: cst.CSTNode, value: str) -> Edit | None:
        """The default mode where the target lacks this one: no mode= at all when the literal
        is the argument itself, else the literal spelled "default"."""
        target = self.ctx.fix_target
        if target.keeps_cuda_api or value in target.compile_modes or _DEFAULT_MODE not in target.compile_modes:
            return None
        if mode.value is literal:
            return Edit(call, without_arguments(call, [mode]), FixSafety.SAFE, f'mode="{value}" dropped')
        replacement = edits.string_like(literal, _DEFAULT_MODE)
        return Edit(literal, replacement, FixSafety.SAFE, f'mode "{value}" -> "{_DEFAULT_MODE}"')
