"""Fix builders the device-placement rules share (tensor-cuda-call, is-cuda-attribute,
cuda-map-location, cuda-device-comparison, hf-cuda-device-map).

They build on `portcheck.edits`: what a `.cuda(...)` call moves to, the target's spelling of a
CUDA device where an index could come out as `"cpu:N"`, and the device-type check that stands
for "on the accelerator".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import edits
from portcheck.rewrites.edits import Spelling

if TYPE_CHECKING:
    from portcheck.rule import FileContext

LOADERS = frozenset({"torch.load", "torch.serialization.load", "torch.jit.load"})


def cuda_literal(index: int | None = None) -> cst.SimpleString:
    """A fresh `"cuda"` / `"cuda:N"` literal, one that is no part of the tree being fixed."""
    return cst.SimpleString('"cuda"' if index is None else f'"cuda:{index}"')


def indexed_cuda_literal(index: cst.BaseExpression) -> cst.BaseExpression | None:
    """The CUDA device an integer stands for, as a fresh literal: `"cuda:0"` for `0`,
    `f"cuda:{rank}"` for `rank`; None where the expression cannot go inside an f-string."""
    if isinstance(index, cst.Integer):
        return cuda_literal(int(index.evaluated_value))
    expression = _code(index)
    quote = next((q for q in ('"', "'") if q not in expression), None)
    if quote is None or any(character in expression for character in "\\{}\n"):
        return None
    return cst.parse_expression(f"f{quote}cuda:{{{expression}}}{quote}")


def device_spelling(
    ctx: FileContext, literal: cst.BaseExpression, *, index_on_cpu: bool = True
) -> tuple[Spelling, FixSafety] | None:
    """The target's spelling of a CUDA device expression, as cuda-device-string writes it.

    For `auto` an index is kept (`f"{DEVICE.type}:1"`), which on a host without accelerator
    reads `"cpu:1"`: tensors and modules accept that, but `torch.load` does not restore to it
    and Hugging Face compares device maps with `"cpu"`. Where the value goes there, pass
    `index_on_cpu=False`: the index is kept only where there is an accelerator
    (`f"{DEVICE.type}:1" if DEVICE.type != "cpu" else "cpu"`)."""
    if not ctx.fix_target.device_type and edits.target_device_type(ctx) is None:
        return None  # auto, and the module's device variable is not one to build on
    spelling = edits.device_type(ctx, literal)
    if spelling is None:
        return None
    bare = patterns.string_value(literal) == "cuda"
    if spelling.original is not None and spelling.original is not literal:
        # `edits` would rewrite a whole module variable it takes for the device binding (a name
        # matching `device`, such as `device_map`); a placement value is only the literal.
        own = edits.target_device_type(ctx) if bare else None
        if own is None:
            return None
        spelling = Spelling(edits.with_parentheses_of(literal, own.node), own.imports, own.prelude)
    target = ctx.fix_target
    if index_on_cpu or bare or target.one_device_per_process or not target.runs_without_accelerator:
        return spelling, FixSafety.SAFE
    device_type = edits.target_device_type(ctx)
    if device_type is None:
        return None
    # The index where there is an accelerator, the CPU where there is none.
    accelerated = cst.Comparison(device_type.node, [cst.ComparisonTarget(cst.NotEqual(), cst.SimpleString('"cpu"'))])
    either = cst.IfExp(test=accelerated, body=spelling.node, orelse=cst.SimpleString('"cpu"'))
    return Spelling(either, spelling.imports, spelling.prelude), FixSafety.SAFE


def moved_to(
    ctx: FileContext, device: cst.BaseExpression | None, *, index_on_cpu: bool = True
) -> tuple[Spelling, FixSafety] | None:
    """Where `.cuda(device)` moves a tensor, module or storage, spelled for the fix target.

    No argument is the current CUDA device (`"cuda"`); an int literal N, or a name bound once to
    one, is `cuda:N`; a CUDA device string is itself; a name bound once to a string or a
    `torch.device(...)` is kept as it is (cuda-device-string rewrites its value). Anything else
    (`args.gpu`, which may hold an int, None or a device) is only spelled where a process owns
    one device, since every valid argument names that device there, or where the index is
    dropped anyway (see `device_spelling`); elsewhere None."""
    literal: cst.BaseExpression | None = None
    if device is None:
        literal = cuda_literal()
    elif isinstance(device, cst.Integer):
        literal = cuda_literal(int(device.evaluated_value))
    elif patterns.is_cuda_device_literal(device):
        literal = device.deep_clone()
    elif isinstance(device, cst.Name) and (bound := ctx.assigned_value(device)) is not None:
        if isinstance(bound, cst.Integer):
            literal = cst.parse_expression(f'f"cuda:{{{device.value}}}"')
        elif _names_a_device(ctx, bound):
            return Spelling(device), FixSafety.SAFE
    elif ctx.flow is not None and ctx.flow.holds_index(device, ctx.flow.scope):  # a rank, `args.gpu`
        literal = indexed_cuda_literal(device)
    target = ctx.fix_target
    if literal is None and target.one_device_per_process:
        literal = cuda_literal()
    elif literal is None and not index_on_cpu and target.runs_without_accelerator:
        literal = cuda_literal(0)  # some index: device_spelling drops it (unsafe) where it could read "cpu:N"
    if literal is None:
        return None
    return device_spelling(ctx, literal, index_on_cpu=index_on_cpu)


def _names_a_device(ctx: FileContext, value: cst.BaseExpression) -> bool:
    """A string (or a choice between strings) or a `torch.device(...)`: what `.to(device=...)`
    takes just as `.cuda(...)` does."""
    if isinstance(value, cst.IfExp):
        return _names_a_device(ctx, value.body) and _names_a_device(ctx, value.orelse)
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    return isinstance(value, cst.Call) and "torch.device" in ctx.qualified_names(value.func)


def device_object(ctx: FileContext, spelling: Spelling) -> Spelling:
    """`DEVICE` rather than `DEVICE.type` where the binding is the device-agnostic choice
    (`current_accelerator(...) or torch.device("cpu")`, which carries no index): for `.to()`
    and `map_location`, the device reads better than its type and means the same."""
    node = spelling.node
    if not (isinstance(node, cst.Attribute) and node.attr.value == "type" and isinstance(node.value, cst.Name)):
        return spelling
    name = node.value.value
    torch = edits.torch_name(ctx, at_module_level=True)
    if torch is None:
        return spelling
    expression = edits.auto_device_expression(cst.Module([]).code_for_node(torch.node))
    ours = f"{name} = {expression}" in spelling.prelude
    bound = dict(ctx.module_assignments()).get(name)
    if ours or (bound is not None and cst.Module([]).code_for_node(bound) == expression):
        return Spelling(edits.with_parentheses_of(node, node.value), spelling.imports, spelling.prelude)
    return spelling


def map_location_argument(ctx: FileContext, call: cst.Call) -> cst.Arg | None:
    """The `map_location` of a checkpoint loader: the keyword anywhere, or the second
    positional argument of `torch.load` / `torch.jit.load`."""
    arg = patterns.keyword(call, "map_location")
    if arg is None and ctx.qualified_names(call.func) & LOADERS:
        arg = patterns.positional(call, 1)
    return arg


def storage_mover(function: cst.BaseExpression) -> cst.Call | None:
    """The `storage.cuda(...)` a `lambda storage, loc: storage.cuda(...)` returns."""
    if not isinstance(function, cst.Lambda) or len(function.params.params) != 2:
        return None
    body = function.body
    if isinstance(body, cst.Call) and patterns.method_name(body) == "cuda" and not body.lpar:
        storage = function.params.params[0].name.value
        receiver = body.func.value  # type: ignore[attr-defined]
        if isinstance(receiver, cst.Name) and receiver.value == storage:
            return body
    return None


def moves_storage_in_map_location(ctx: FileContext, call: cst.Call) -> bool:
    """Whether `call` is the body of a `map_location=lambda storage, loc: storage.cuda()`
    (cuda-map-location reports and rewrites those)."""
    ancestors = ctx.ancestors
    if len(ancestors) < 3:
        return False
    function, arg, loader = ancestors[-1], ancestors[-2], ancestors[-3]
    return (
        isinstance(loader, cst.Call)
        and isinstance(arg, cst.Arg)
        and arg.value is function
        and storage_mover(function) is call  # type: ignore[arg-type]
        and map_location_argument(ctx, loader) is arg
    )


def cuda_call_device(call: cst.Call) -> tuple[bool, cst.Arg | None, cst.Arg | None]:
    """For `.cuda(device, non_blocking, memory_format=...)`: whether the arguments can be told
    apart (no `*args`/`**kwargs`, at most two positionals), the device argument and a
    positional non_blocking."""
    if any(arg.star for arg in call.args):
        return False, None, None
    positionals = [arg for arg in call.args if arg.keyword is None]
    if len(positionals) > 2:
        return False, None, None
    device = positionals[0] if positionals else patterns.keyword(call, "device")
    non_blocking = positionals[1] if len(positionals) == 2 else None
    return True, device, non_blocking


def on_device_type(subject: cst.BaseExpression, device_type: Spelling) -> Spelling | None:
    """`subject == <type>`: the check that `is_cuda` / `== "cuda"` made for CUDA, for the fix
    target. Where the type is only known at run time (auto) it is `subject != "cpu"`: the one
    accelerator there is, and False on a host without one, as the CUDA check was (no chained
    comparison, no device binding needed). None for the CPU target itself: there the CUDA
    check was False for every tensor, and `== "cpu"` would turn it into True."""
    literal = patterns.string_value(device_type.node)
    if literal == "cpu":
        return None
    if literal is None:
        return Spelling(cst.Comparison(subject, [cst.ComparisonTarget(cst.NotEqual(), cst.SimpleString('"cpu"'))]))
    comparison = cst.Comparison(subject, [cst.ComparisonTarget(cst.Equal(), device_type.node)])
    return Spelling(comparison, device_type.imports, device_type.prelude)


def negated(comparison: cst.Comparison) -> cst.BaseExpression:
    """`a != b` for `a == b` (and the other way round); `not (...)` for a chain."""
    if len(comparison.comparisons) == 1 and isinstance(comparison.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
        link = comparison.comparisons[0]
        operator = cst.NotEqual() if isinstance(link.operator, cst.Equal) else cst.Equal()
        return comparison.with_changes(comparisons=[link.with_changes(operator=operator)])
    return cst.UnaryOperation(cst.Not(), parenthesized(comparison))


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    if node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def needs_parentheses(node: cst.BaseExpression, parent: cst.CSTNode | None) -> bool:
    """Whether a comparison put where `node` is would bind differently without parentheses:
    inside another comparison (it would chain), an arithmetic, bitwise or unary operation,
    or as the object of an attribute, subscript, call or await."""
    if node.lpar:
        return False
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.BinaryOperation, cst.UnaryOperation)):
        return True
    if isinstance(parent, (cst.Attribute, cst.Subscript)):
        return parent.value is node
    if isinstance(parent, cst.Call):
        return parent.func is node
    return isinstance(parent, cst.Await)


def is_stored(node: cst.CSTNode, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether `node` is assigned or deleted rather than read (also inside a target tuple)."""
    child = node
    for parent in reversed(ancestors):
        if isinstance(parent, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
            child = parent
            continue
        if isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)):
            return parent.target is child
        if isinstance(parent, cst.AsName):
            return parent.name is child
        return isinstance(parent, cst.Del)
    return False


def inside_fstring(ancestors: Sequence[cst.CSTNode]) -> bool:
    """A replacement with string literals could clash with the f-string's quotes (before 3.12)."""
    return any(isinstance(node, cst.FormattedString) for node in ancestors)
