from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import edits, placement
from portcheck.rewrites.edits import Edit, Spelling
from portcheck.rule import ERROR, INFO, OFF, FileContext, Invalid, Rule, Valid, per_target

SETTERS = frozenset({"torch.set_default_tensor_type"})
# The CUDA types set_default_tensor_type accepts (floating ones only), with their dtypes.
_DTYPES = {
    "torch.cuda.FloatTensor": "float32",
    "torch.cuda.DoubleTensor": "float64",
    "torch.cuda.HalfTensor": "float16",
    "torch.cuda.BFloat16Tensor": "bfloat16",
}
# Chosen only under a CUDA check: the CPU target runs the program's other path, as it should.
_GUARDED_SEVERITY = per_target(ERROR, rocm=OFF, cpu=INFO)
_DEPTH = 3  # names followed to their values (`DEFAULT = HT`, `HT` imported)
_RAISES = "without CUDA it raises TypeError: type {type} not available"
_STAYS = "it is chosen only under a CUDA check, so off CUDA the model and every new tensor stay on the CPU"


class CudaDefaultTensorType(Rule):
    """## What it does
    Reports `torch.set_default_tensor_type(...)` given a CUDA type: `torch.cuda.FloatTensor`,
    `torch.cuda.HalfTensor` (also `DoubleTensor`, `BFloat16Tensor`), written as the type, as
    its string (`"torch.cuda.FloatTensor"`), through a name bound to either, or as one branch
    of a conditional.

    ## Why is this bad?
    A CUDA default tensor type puts every tensor the program creates afterwards (parameters,
    buffers, `torch.zeros(...)`, even `torch.Tensor(3)`) on CUDA, in that type's dtype. Without
    CUDA the call raises `TypeError: type torch.cuda.FloatTensor not available`. Where the
    program picks it only under a CUDA check (`if torch.cuda.is_available():`), nothing fails:
    off CUDA the check is False, and the model silently trains on the CPU next to an idle
    accelerator. The function has been deprecated since torch 2.1.

    ## Example
    ```python
    torch.set_default_tensor_type(torch.cuda.FloatTensor)
    ```

    ## Use instead
    ```python
    torch.set_default_device(device)
    torch.set_default_dtype(torch.float32)
    ```

    ## Targets
    An error on every target but ROCm, where HIP answers to the CUDA types. Chosen only under
    a CUDA check, it is info on cpu, where the program's other path is the right one.

    ## Fix safety
    For `--device cpu` the call becomes `torch.set_default_dtype(torch.float32)` (the dtype
    the type names; the default device is the CPU already): safe. For an accelerator (and
    `auto`) it becomes `torch.set_default_device("tpu")` and `torch.set_default_dtype(...)`,
    which is unsafe: the default device reaches factory functions and modules, but not the
    legacy constructors (`torch.Tensor(3)`, `torch.FloatTensor(...)`) that a CUDA default
    type also put on the GPU; such tensors now start on the CPU. Only a call that is a
    statement of its own with one CUDA type is fixed; a conditional choice is left to a
    person, as its check is rewritten with the rest of the program's device logic.
    """

    code = "PC216"
    name = "cuda-default-tensor-type"
    message = "`set_default_tensor_type({type})` makes new tensors {dtype} on CUDA: {effect}"
    hint = "use torch.set_default_device(device) and torch.set_default_dtype(torch.{dtype})"
    severity = per_target(ERROR, rocm=OFF)
    fix_safety = FixSafety.SAFE
    triggers = (b"set_default_tensor_type",)

    VALID = [
        Valid("import torch\ntorch.set_default_tensor_type(torch.DoubleTensor)\n"),
        Valid('import torch as T\nT.set_default_tensor_type("torch.FloatTensor")\n'),
        Valid("def setup(torch):\n    torch.set_default_tensor_type(torch.cuda.FloatTensor)\n"),
        Valid("import torch\ntorch.set_default_tensor_type(torch.cuda.HalfTensor)\n", options={"targets": ["rocm"]}),
    ]
    INVALID = [
        Invalid(
            "import torch\n\n# every tensor on the GPU\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)\nmodel = Net()\n",
            lines=[4],
            message="raises TypeError: type torch.cuda.FloatTensor not available",
            unsafe=True,
            fixed="import torch\n\n# every tensor on the GPU\n"
            'torch.set_default_device("tpu")\ntorch.set_default_dtype(torch.float32)\nmodel = Net()\n',
        ),
        # without --unsafe-fixes, only the CPU's fix (the dtype alone) is applied
        Invalid("import torch\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)\n", lines=[2]),
        Invalid(
            'import torch as T\nT.set_default_tensor_type("torch.cuda.HalfTensor")  # fp16 everywhere\n',
            lines=[2],
            device="cpu",
            message="float16 on CUDA",
            fixed="import torch as T\nT.set_default_dtype(T.float16)  # fp16 everywhere\n",
        ),
        Invalid(
            "from torch import cuda, set_default_tensor_type\n\nset_default_tensor_type(cuda.FloatTensor)\n",
            lines=[3],
            device="auto",
            unsafe=True,
            fixed="from torch import cuda, set_default_tensor_type\nimport torch\n\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n\n'
            "torch.set_default_device(DEVICE)\ntorch.set_default_dtype(torch.float32)\n",
        ),
        Invalid(
            "from torch.cuda import HalfTensor as HT\nimport torch\nDEFAULT = HT\ntorch.set_default_tensor_type(DEFAULT)\n",
            lines=[4],
            message="torch.cuda.HalfTensor",
        ),
        # under a CUDA check the program silently stays on the CPU
        Invalid(
            "import torch.cuda\nif torch.cuda.is_available():\n    torch.set_default_tensor_type('torch.cuda.FloatTensor')\n",
            lines=[3],
            message="stay on the CPU",
        ),
        Invalid(
            "import torch\nif args.device == 'cuda':\n    torch.set_default_tensor_type('torch.cuda.FloatTensor')\n",
            lines=[3],
            options={"targets": ["cpu"]},
            message="chosen only under a CUDA check",
        ),
        Invalid(
            "import torch\ntorch.set_default_tensor_type(\n"
            "    torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\n)\n",
            lines=[2],
            message="stay on the CPU",
        ),
        Invalid(
            "import torch\ntorch.set_default_tensor_type('torch.cuda.FloatTensor' if args.cuda else 'torch.FloatTensor')\n",
            lines=[2],
            message="raises TypeError",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & SETTERS:
            return
        arg = patterns.argument(node, 0, "t")
        if arg is None or arg.star:
            return
        chosen = self._cuda_types(arg.value)
        if not chosen:
            return
        cuda_type = chosen[0][1]
        guarded = all(under_check for under_check, _, _ in chosen) or self._protected(node)
        effect = _STAYS if guarded else _RAISES.format(type=cuda_type)
        dtype = _DTYPES[cuda_type]
        edit = self._edit(node, dtype) if len(chosen) == 1 and chosen[0][2] is arg.value else None
        severity = _GUARDED_SEVERITY if guarded else self.severity
        self.report(node, edit=edit, severity=severity, type=cuda_type, dtype=dtype, effect=effect)

    def _cuda_types(self, value: cst.BaseExpression, depth: int = 0) -> list[tuple[bool, str, cst.CSTNode]]:
        """The CUDA types the argument may evaluate to: (whether a CUDA check chose it, its
        name, the expression naming it), through conditionals and names bound once."""
        found: list[tuple[bool, str, cst.CSTNode]] = []
        if isinstance(value, cst.IfExp) and self.ctx.flow is not None:
            holds = self.ctx.flow.cuda_check(value.test)
            for branch, chosen_by_check in ((value.body, holds is True), (value.orelse, holds is False)):
                found += [(chosen_by_check, name, node) for _, name, node in self._cuda_types(branch, depth)]
            return found
        for node in patterns.value_literals(value, lambda n: self._type_name(n) is not None):
            found.append((False, self._type_name(node) or "", node))
        if not found and isinstance(value, cst.Name) and depth < _DEPTH:
            bound = self.ctx.assigned_value(value)
            if bound is not None:
                return [(guarded, name, value) for guarded, name, _ in self._cuda_types(bound, depth + 1)]
        return found

    def _type_name(self, node: cst.CSTNode) -> str | None:
        text = patterns.string_value(node)
        names = {text} if text is not None else self.ctx.qualified_names(node)
        return next((name for name in sorted(names) if name in _DTYPES), None)

    def _protected(self, node: cst.Call) -> bool:
        flow = self.ctx.flow
        return flow is not None and bool(flow.placement(self.ctx.chain(node), node).protected_by)

    def _edit(self, node: cst.Call, dtype: str) -> Edit | None:
        """The statement becomes the target's default device (none on the CPU) and dtype."""
        line = _own_statement(self.ctx.ancestors, node)
        torch = edits.torch_name(self.ctx)
        if line is None or torch is None:
            return None
        target = self.ctx.fix_target
        code = cst.Module([]).code_for_node
        statements = [f"{code(torch.node)}.set_default_dtype({code(torch.node)}.{dtype})"]
        imports, prelude, safety = torch.imports, (), FixSafety.SAFE
        if target.accelerator_api or not target.runs_without_accelerator:
            device = edits.target_device_type(self.ctx)
            if device is None:
                return None
            device = placement.device_object(self.ctx, Spelling(device.node, device.imports, device.prelude))
            statements.insert(0, f"{code(torch.node)}.set_default_device({code(device.node)})")
            imports = (*imports, *(i for i in device.imports if i not in imports))
            prelude, safety = device.prelude, FixSafety.UNSAFE
        lines = [cst.parse_statement(text) for text in statements]
        lines[0] = lines[0].with_changes(leading_lines=line.leading_lines)
        lines[-1] = lines[-1].with_changes(trailing_whitespace=line.trailing_whitespace)
        title = "set_default_tensor_type(CUDA type) -> " + " + ".join(s.split("(", 1)[0] for s in statements)
        return Edit(line, cst.FlattenSentinel(lines), safety, title, imports, prelude)


def _own_statement(ancestors: Sequence[cst.CSTNode], call: cst.Call) -> cst.SimpleStatementLine | None:
    """The line the call is the whole of (`torch.set_default_tensor_type(...)` on its own)."""
    if len(ancestors) < 2:
        return None
    expression, line = ancestors[-1], ancestors[-2]
    if isinstance(expression, cst.Expr) and expression.value is call and isinstance(line, cst.SimpleStatementLine):
        return line if len(line.body) == 1 else None
    return None


def sets_default_type(ctx: FileContext) -> bool:
    """Whether the node being visited is (part of) the argument of `set_default_tensor_type`:
    this rule owns the CUDA types there (cuda-legacy-tensor-type reports the others)."""
    for node in reversed(ctx.ancestors):
        if isinstance(node, cst.Call):
            return bool(ctx.qualified_names(node.func) & SETTERS)
        if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False
