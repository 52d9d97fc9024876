from __future__ import annotations

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety, Severity
from portcheck.rewrites import edits
from portcheck.rewrites.calls import with_keyword, without_arguments
from portcheck.rewrites.edits import Edit
from portcheck.rule import ERROR, INFO, OFF, WARNING, FileContext, Invalid, Rule, Valid
from portcheck.rules.compile.compile_cuda_graph_mode import COMPILE, compiles, string_literals
from portcheck.setting_rule import option_destination
from portcheck.wording import verb


def _explicit_severity(backend: str) -> dict[str, Severity]:
    """inductor: wrong where the target has its own backend; cudagraphs: wrong without CUDA."""
    result = {}
    for name, target in target_data.all_targets().items():
        if backend == "cudagraphs":
            result[name] = OFF if target.keeps_cuda_api else WARNING
        elif target.compile_backend:
            result[name] = ERROR if target.compile_rejects_inductor else WARNING
        else:
            result[name] = OFF
    return result


_SEVERITY = {backend: _explicit_severity(backend) for backend in ("inductor", "cudagraphs")}
_DEFAULT_SEVERITY = {
    name: INFO if t.compile_backend and not t.compile_picks_backend else OFF
    for name, t in target_data.all_targets().items()
}


class CompileBackendForTarget(Rule):
    """## What it does
    Reports `torch.compile(..., backend="inductor")` and `backend="cudagraphs"` where the
    target compiles with another backend, and, as information, `torch.compile(m)` without a
    backend on targets whose backend is never picked by default (xla, hpu). A backend given as
    a command-line option (`backend=args.torchcompile`) is reported where the option's
    `default=` or `const=` names it (timm's `add_argument('--torchcompile', nargs='?',
    const='inductor')`).

    ## Why is this bad?
    Inductor generates Triton or C++ code for GPUs and CPUs. TorchTPU raises a RuntimeError
    for an explicit inductor backend with TPU inputs, Gaudi does not support inductor,
    TorchNeuron compiles with its "neuron" backend and PyTorch/XLA with "openxla". The
    "cudagraphs" backend captures CUDA graphs, which only CUDA and ROCm have. Without a
    backend, TorchTPU and TorchNeuron select theirs; XLA and Gaudi get inductor.

    ## Example
    ```python
    model = torch.compile(model, backend="inductor")
    ```

    ## Use instead
    The target's backend, from portcheck's target data:
    ```python
    model = torch.compile(model, backend="openxla")  # xla; "neuron", "hpu_backend", "tpu"
    ```

    ## Targets
    An explicit inductor backend is an error on tpu and hpu and a warning on neuron and xla;
    "cudagraphs" is a warning everywhere but ROCm; no backend is info on xla and hpu. Off on
    mps, xpu, npu, cpu and rocm, where inductor is the backend.

    ## Fix safety
    `backend="inductor"` where the target has its own backend: `backend=` goes where
    `torch.compile` picks the target's backend by itself (tpu, neuron), else the string
    becomes the target's backend (`"openxla"`, `"hpu_backend"`; inside a name or a conditional
    it is always replaced). A missing backend on xla and hpu gets `backend="<target's>"`.
    Safe where the target data says inductor is rejected there (tpu, hpu): the original fails,
    so nothing that worked changes. Unsafe elsewhere (neuron, xla): inductor may still compile
    what runs on the CPU there, and another compiler can change speed and results within
    floating-point tolerance.

    An option's `default=` or `const=` inductor becomes the target's backend string, with the
    same safety.

    `backend="cudagraphs"` is not fixed: it records CUDA graphs without compiling, and no
    other backend does just that.
    """

    code = "PC802"
    name = "compile-backend-for-target"
    message = "torch.compile {what}"
    hint = "{advice}"
    severity = {
        name: max(_DEFAULT_SEVERITY[name], *(table[name] for table in _SEVERITY.values()))
        for name in target_data.TARGET_ORDER
    }
    fix_safety = FixSafety.SAFE
    triggers = (b"compile",)

    VALID = [
        Valid('import torch\nmodel = torch.compile(model, backend="openxla")\n', options={"targets": ["xla"]}),
        Valid('import torch as T\nstep = T.compile(step, backend="neuron")\n', options={"targets": ["neuron"]}),
        Valid('import torch\nmodel = torch.compile(model, backend="inductor")\n', options={"targets": ["mps", "cpu"]}),
        Valid("import torch\nmodel = torch.compile(model)\n", options={"targets": ["tpu", "neuron", "cpu"]}),
        Valid("import torch\nmodel = torch.compile(model, backend=args.backend)\n"),
        Valid("import torch\nmodel = torch.compile(model, **compile_kwargs)\n"),
        Valid('def compile(model, backend):\n    return model\n\nmodel = compile(model, backend="inductor")\n'),
        Valid("def build(torch):\n    return torch.compile(net)\n"),
        Valid('import torch\nstep = torch.compile(step, backend="eager")\n'),
    ]
    INVALID = [
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="inductor")\n',
            lines=[2],
            message='backend="inductor"',
            fixed="import torch\nmodel = torch.compile(model)\n",
        ),
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="inductor")\n',
            lines=[2],
            device="hpu",
            fixed='import torch\nmodel = torch.compile(model, backend="hpu_backend")\n',
        ),
        Invalid(
            'import torch\nmodel = torch.compile(model, backend="inductor")\n',
            lines=[2],
            device="xla",
            unsafe=True,
            fixed='import torch\nmodel = torch.compile(model, backend="openxla")\n',
        ),
        Invalid(  # neuron may still run inductor for CPU code: only with --unsafe-fixes
            'import torch\nmodel = torch.compile(model, backend="inductor")\n', lines=[2], device="neuron"
        ),
        Invalid(  # inductor is the CPU's (and so auto's) compiler: nothing to fix
            'import torch\nmodel = torch.compile(model, backend="inductor")\n', lines=[2], device="auto"
        ),
        Invalid('import torch as T\nmodel = T.compile(model, backend="cudagraphs")\n', lines=[2]),
        Invalid('import torch as T\nmodel = T.compile(model, backend="cudagraphs")\n', lines=[2], device="cpu"),
        Invalid(
            "from torch import compile\n@compile\ndef step(x):\n    return x\n",
            lines=[2],
            device="hpu",
            fixed='from torch import compile\n@compile(backend="hpu_backend")\ndef step(x):\n    return x\n',
        ),
        Invalid(
            "import torch\nmodel = torch.compile(model)\n",
            lines=[2],
            message="without backend=",
            device="xla",
            unsafe=True,
            fixed='import torch\nmodel = torch.compile(model, backend="openxla")\n',
        ),
        Invalid(
            "import torch\n\nmodel = torch.compile(\n    model,\n    fullgraph=True,\n)\n",
            lines=[3],
            device="hpu",
            fixed="import torch\n\nmodel = torch.compile(\n    model,\n    fullgraph=True,\n"
            '    backend="hpu_backend",\n)\n',
        ),
        Invalid(
            "from torch.cuda import is_available as has_cuda\nimport torch.nn\n"
            'BACKEND = "inductor" if has_cuda() else "openxla"\n'
            "net = torch.nn.Linear(2, 2)\nnet.compile(backend=BACKEND)\n",
            lines=[3],
            options={"targets": ["tpu"]},
            fixed="from torch.cuda import is_available as has_cuda\nimport torch.nn\n"
            'BACKEND = "tpu" if has_cuda() else "openxla"\n'
            "net = torch.nn.Linear(2, 2)\nnet.compile(backend=BACKEND)\n",
        ),
        Invalid(
            'import torch\n@torch.compile(backend="inductor", fullgraph=True)\ndef f(x):\n    return x\n',
            lines=[2],
            fixed="import torch\n@torch.compile(fullgraph=True)\ndef f(x):\n    return x\n",
        ),
        Invalid(  # timm: `--torchcompile` alone asks for inductor; any other option is not the backend's
            "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
            "parser.add_argument('--torchcompile', nargs='?', type=str, default=None, const='inductor')\n"
            "parser.add_argument('--mode', default='inductor')\nargs = parser.parse_args()\n"
            "model = torch.compile(model, backend=args.torchcompile, mode=args.mode)\n",
            lines=[4],
            options={"targets": ["tpu"]},
            fixed="import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
            "parser.add_argument('--torchcompile', nargs='?', type=str, default=None, const='tpu')\n"
            "parser.add_argument('--mode', default='inductor')\nargs = parser.parse_args()\n"
            "model = torch.compile(model, backend=args.torchcompile, mode=args.mode)\n",
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._reported: set[int] = set()
        self._options: dict[str, list[cst.CSTNode]] = {}  # an option's destination: its backend literals
        self._optioned: set[str] = set()  # the destinations a compile call takes its backend from

    def visit_Call(self, node: cst.Call) -> None:
        backend = patterns.keyword(node, "backend")
        if backend is not None:
            if compiles(node, self.ctx):
                self._check_backend(node, backend)
                if type(backend.value) is cst.Attribute:  # `backend=args.torchcompile`
                    self._optioned.add(backend.value.attr.value)
        elif self.ctx.qualified_names(node.func) & COMPILE and not any(arg.star == "**" for arg in node.args):
            self._report_default(node)
        if type(node.func) is cst.Attribute and node.func.attr.value == "add_argument":
            destination = option_destination(node)
            given = [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value in _GIVEN]
            if destination is not None:
                literals = [literal for value in given for literal in patterns.value_literals(value, _named_backend)]
                self._options.setdefault(destination, []).extend(literals)

    def leave_Module(self, node: cst.Module) -> None:
        """The backends the command line's options give the compile calls that read them."""
        for destination in sorted(self._optioned & self._options.keys()):
            for literal in self._options[destination]:
                if id(literal) not in self._reported:
                    self._reported.add(id(literal))
                    value = patterns.string_value(literal)
                    assert value is not None
                    self._report_backend(
                        literal, value, self._to_target_backend(literal) if value == "inductor" else None
                    )

    def visit_Decorator(self, node: cst.Decorator) -> None:
        if not isinstance(node.decorator, cst.Call) and self.ctx.qualified_names(node.decorator) & COMPILE:
            self._report_default(node.decorator)

    def _check_backend(self, call: cst.Call, backend: cst.Arg) -> None:
        for literal, value in string_literals(backend.value, self.ctx):
            if value in _SEVERITY and id(literal) not in self._reported:
                self._reported.add(id(literal))
                edit = self._inductor_edit(call, backend, literal) if value == "inductor" else None
                self._report_backend(literal, value, edit)

    def _report_backend(self, literal: cst.CSTNode, value: str, edit: Edit | None) -> None:
        severity = _SEVERITY[value]
        affected = self._affected(severity)
        if value == "cudagraphs":
            effect = f"captures CUDA graphs, which {'/'.join(affected)} {verb(affected, 'does', 'do')} not have"
        else:
            failing = [t for t in affected if severity[t] >= ERROR]
            bypassed = [t for t in affected if severity[t] < ERROR]
            parts = [f"fails on {'/'.join(failing)}"] if failing else []
            parts += [f"bypasses the {'/'.join(bypassed)} backend"] if bypassed else []
            effect = " and ".join(parts)
        what = f'with backend="{value}" {effect}'
        self.report(literal, severity=severity, what=what, advice=_advice(affected), edit=edit)

    def _to_target_backend(self, literal: cst.CSTNode) -> Edit | None:
        """The inductor string becomes the target's backend: in an option's default, in a name or
        a conditional (whatever passes it on to the call)."""
        target = self.ctx.fix_target
        if not target.compile_backend or target.keeps_cuda_api:
            return None
        safety = FixSafety.SAFE if target.compile_rejects_inductor else FixSafety.UNSAFE
        replacement = edits.string_like(literal, target.compile_backend)
        return Edit(literal, replacement, safety, f'backend "inductor" -> "{target.compile_backend}"')

    def _report_default(self, node: cst.CSTNode) -> None:
        affected = self._affected(_DEFAULT_SEVERITY)
        what = f"without backend= compiles with inductor, not the {'/'.join(affected)} backend"
        self.report(
            node, severity=_DEFAULT_SEVERITY, what=what, advice=_advice(affected), edit=self._default_edit(node)
        )

    def _inductor_edit(self, call: cst.Call, backend: cst.Arg, literal: cst.CSTNode) -> Edit | None:
        """No backend= where the target picks its own, else the target's backend."""
        target = self.ctx.fix_target
        if not target.compile_backend or target.keeps_cuda_api:
            return None
        safety = FixSafety.SAFE if target.compile_rejects_inductor else FixSafety.UNSAFE
        if target.compile_picks_backend and backend.value is literal:
            return Edit(call, without_arguments(call, [backend]), safety, 'backend="inductor" dropped')
        return self._to_target_backend(literal)

    def _default_edit(self, node: cst.CSTNode) -> Edit | None:
        """`backend="<target's>"` where torch.compile would not pick it by itself."""
        target = self.ctx.fix_target
        if not target.compile_backend or target.compile_picks_backend or target.keeps_cuda_api:
            return None
        value = cst.SimpleString(f'"{target.compile_backend}"')
        if isinstance(node, cst.Call):
            replacement: cst.Call = with_keyword(node, "backend", value)
        elif isinstance(node, (cst.Name, cst.Attribute)):  # a bare decorator
            replacement = with_keyword(cst.Call(func=node), "backend", value)
        else:
            return None
        safety = FixSafety.SAFE if target.compile_rejects_inductor else FixSafety.UNSAFE
        return Edit(node, replacement, safety, f'backend="{target.compile_backend}" added')

    def _affected(self, severity: dict[str, Severity]) -> list[str]:
        return [t for t in self.ctx.targets if severity[t] > OFF] or list(self.ctx.targets)


# The options of `add_argument` whose value an option holds: its default, and what a flag given
# without a value stores (`nargs='?'`).
_GIVEN = frozenset({"default", "const"})


def _named_backend(node: cst.CSTNode) -> bool:
    return patterns.string_value(node) in _SEVERITY


def _advice(affected: list[str]) -> str:
    """The backend each affected target compiles with, from the target data."""
    parts = []
    for name in affected:
        backend = target_data.get(name).compile_backend
        if backend and target_data.get(name).compile_picks_backend:
            parts.append(f'backend="{backend}" (or none) on {name}')
        elif backend:
            parts.append(f'backend="{backend}" on {name}')
    inductor = [name for name in affected if not target_data.get(name).compile_backend]
    if inductor:
        parts.append(
            f"no backend= on {'/'.join(inductor)} (inductor, the default, compiles for {verb(inductor, 'it', 'them')})"
        )
    return "use " + "; ".join(parts)
