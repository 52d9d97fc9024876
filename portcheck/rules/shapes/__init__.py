"""PC5: dynamic shapes and host syncs: what recompiles on TPU/XLA/Gaudi and fails on Trainium.

Helpers shared by this family only: severities derived from each target's `dynamic-shapes`
fact, target-specific advice, predicates that say whether an expression reads tensor values
(tensor methods cannot be resolved, so they are matched by name on receivers that do not resolve
to a non-torch import), a base class that keeps those spelling-matched rules to files that
import torch, and one for rules about what runs every step (step contexts are portcheck.flow's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property, partial
from typing import ClassVar, NamedTuple

import libcst as cst
from libcst.helpers import get_full_name_for_node

from portcheck import flow, patterns, project, resolve
from portcheck import targets as target_data
from portcheck.resolve import Scope
from portcheck.rewrites.calls import is_none
from portcheck.rule import ERROR, INFO, OFF, UNPLACED, WARNING, FileContext, Rule, Severity, at_most_info
from portcheck.walk import descendants
from portcheck.wording import verb

# --- severities ------------------------------------------------------------------------------


def _by_dynamic_shapes(levels: Mapping[str, Severity]) -> dict[str, Severity]:
    return {name: levels[target.dynamic_shapes] for name, target in target_data.all_targets().items()}


def _with_a_device(levels: Mapping[str, Severity]) -> dict[str, Severity]:
    """Off on targets that compute on the host (device type "cpu"): a tensor there is already
    in host memory, so reading it copies nothing and waits for no device."""
    return {name: OFF if target_data.get(name).device_type == "cpu" else level for name, level in levels.items()}


# Data-dependent ops that also read tensor values on the host: still a sync where shapes are
# free, if there is a device to sync with.
SYNC_SEVERITY = _with_a_device(_by_dynamic_shapes({"unsupported": ERROR, "recompile": WARNING, "free": INFO}))
# The targets whose compiler takes only static shapes (Trainium's).
_STATIC_ONLY = frozenset(
    name for name, target in target_data.all_targets().items() if target.dynamic_shapes == "unsupported"
)
# Pure recompilation hazards (varying batch shapes): harmless where shapes are free.
RECOMPILE_SEVERITY = _by_dynamic_shapes({"unsupported": ERROR, "recompile": WARNING, "free": OFF})
# One more shape per run (the last, smaller batch): one extra compilation, cached after.
ONE_MORE_SHAPE_SEVERITY = _by_dynamic_shapes({"unsupported": INFO, "recompile": INFO, "free": OFF})


# Why a finding of a step rule is info: the code runs on no step path the analysis follows.
_OFF_STEP = " (info: no step loop or forward() that portcheck follows reaches it)"
_OFF_STEP_STATIC = (
    " (no step loop or forward() that portcheck follows reaches it: info, a warning where only static shapes compile)"
)


def advice(targets: Sequence[str]) -> str:
    """A hint tail for shape hazards on the selected targets: which of them compile only static
    shapes, and which offer bounded dynamism. Empty when none of that applies."""
    parts = []
    static_only = [t for t in targets if target_data.get(t).dynamic_shapes == "unsupported"]
    if static_only:
        compile_ = verb(static_only, "compiles", "compile")
        parts.append(f"{'/'.join(static_only)} {compile_} only static shapes: pad or bucket to fixed sizes")
    parts.extend(
        f"on {t}, {target_data.get(t).bounded_dynamism}" for t in targets if target_data.get(t).bounded_dynamism
    )
    return "".join(f"; {part}" for part in parts)


# --- what an expression reads ------------------------------------------------------------------

_DEPTH = 4  # how many names and casts to look through; also stops `x = x.sum()` cycles
# Methods whose result is a tensor when their receiver is one (and not NumPy's).
_TENSOR_RESULTS = frozenset({"float", "half", "double", "long", "detach", "clone", "mean", "sum", "norm"})
_REDUCTIONS = frozenset(
    {"sum", "max", "min", "mean", "amax", "amin", "norm", "std", "var", "prod", "median", "argmax", "argmin",
     "count_nonzero", "item"}
)  # fmt: skip
_TORCH_REDUCTIONS = frozenset(f"torch.{name}" for name in _REDUCTIONS - {"item"})
_READ_BACKS = frozenset({"item", "tolist"})  # what copies a tensor's numbers into Python's
_TRUTH_METHODS = frozenset({"any", "all", "item", "equal", "allclose", "is_nonzero"})
_TORCH_TRUTH = frozenset(
    f"torch.{name}" for name in ("any", "all", "equal", "allclose", "is_nonzero", "isnan", "isinf", "isfinite")
)
_MASK_OPS = frozenset(
    {"bool", "isnan", "isinf", "isfinite", "isneginf", "isposinf", "isin", "isclose", "logical_not",
     "logical_and", "logical_or", "logical_xor", "eq", "ne", "gt", "ge", "lt", "le", "greater", "less",
     "greater_equal", "less_equal", "not_equal", "any", "all"}
)  # fmt: skip
_TORCH_MASK_OPS = frozenset(f"torch.{name}" for name in _MASK_OPS - {"bool"})
_JOINS = frozenset({"torch.stack", "torch.cat", "torch.concat", "torch.vstack", "torch.hstack"})
_AS_TENSOR = frozenset({"torch.as_tensor"})  # the same values, maybe elsewhere
# einops' functions: the same elements in another layout (`repeat(mask, "b n -> (b h) n", h=8)`).
_REARRANGED = frozenset({"einops.rearrange", "einops.repeat"})
# Methods that give the same elements another shape or place: a mask stays a mask.
_VIEWS = frozenset({"view", "reshape", "flatten", "contiguous", "clone", "detach", "expand", "expand_as", "squeeze",
                    "unsqueeze"})  # fmt: skip
# torch functions that return a tensor, for telling a tensor from a Python value in a test.
_TENSOR_MAKERS = frozenset(
    f"torch.{name}" for name in (
        "tensor", "as_tensor", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
        "empty_like", "arange", "linspace", "rand", "randn", "randint", "rand_like", "randn_like", "cat",
        "concat", "stack", "where", "multinomial", "argmax", "argmin", "topk", "sort", "argsort", "gather",
        "softmax", "log_softmax", "sigmoid", "tanh", "exp", "log", "abs", "clamp", "masked_fill", "cumsum",
        "matmul", "einsum", "logical_not", "logical_and", "logical_or", "eq", "ne", "gt", "ge", "lt", "le",
        "isnan", "isinf", "isfinite", "mean", "sum", "norm", "sqrt", "min", "max", "var", "std",
        "nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount",
        "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "neg", "square",
        "round", "floor", "ceil", "trunc", "sign", "maximum", "minimum", "clip", "amax", "amin", "prod",
        "any", "all", "count_nonzero", "cumprod", "diff", "mm", "bmm", "outer", "reshape", "flatten", "squeeze",
        "unsqueeze", "transpose", "permute", "flip", "roll", "tril", "triu", "index_select", "repeat_interleave",
        "cos", "sin", "tan", "acos", "asin", "atan", "atan2", "cosh", "sinh", "log2", "log10", "log1p",
        "expm1", "exp2", "rsqrt", "reciprocal", "erf", "erfinv", "lerp", "addcmul", "addcdiv", "addmm",
        "baddbmm", "cdist", "dot", "logsumexp", "median", "quantile", "nanmean", "nansum", "randperm",
        "normal", "bernoulli", "eye", "relu", "hypot", "logaddexp", "tensordot", "diag", "diagonal",
        "clone", "take_along_dim", "scatter", "scatter_add", "index_add", "searchsorted", "bucketize",
        "nn.utils.clip_grad_norm_", "nn.utils.clip_grad_norm", "nn.utils.get_total_norm",
        "nn.Parameter", "nn.parameter.Parameter",
    )
)  # fmt: skip
# Methods only a tensor has (not an array, a list or a module): what they return is a tensor,
# whatever the receiver is known to be (`scores.view(-1).topk(k)` where `scores = decoder.fc(h)`).
_TENSOR_ONLY_METHODS = frozenset(
    {"topk", "unsqueeze", "masked_fill", "masked_fill_", "expand_as", "view_as", "type_as", "index_select",
     "log_softmax", "softmax", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "detach",
     "int", "long", "bool"}
)  # fmt: skip
_NOT_TENSORS = frozenset(
    {"item", "tolist", "numpy", "size", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr",
     "stride", "is_contiguous", "is_floating_point", "is_complex", "is_signed", "is_pinned", "get_device"}
)  # fmt: skip
_MOVERS = frozenset({"to", "cuda"})
_MASK_NAME = re.compile(r"(^|_)masks?$", re.IGNORECASE)
# Methods a receiver of unknown class more likely answers to as a torch, Python or logging
# object than as the repository's own (`optimizer.step()`, `meter.update(...)`, `pbar.set_postfix(...)`):
# no step call links them to a method of the repository by name alone.
_COMMON_METHODS = frozenset({
    "forward", "step", "zero_grad", "backward", "train", "eval", "to", "cuda", "cpu", "half", "float",
    "state_dict", "load_state_dict", "parameters", "named_parameters", "modules", "children", "apply",
    "item", "tolist", "numpy", "size", "view", "reshape", "detach", "clone", "copy", "update", "get",
    "items", "keys", "values", "append", "extend", "add", "pop", "insert", "remove", "clear", "format",
    "join", "split", "strip", "replace", "encode", "decode", "read", "write", "close", "flush", "log",
    "info", "debug", "warning", "error", "set_description", "set_postfix", "add_scalar", "add_scalars",
    "add_image", "add_images", "add_histogram", "save", "load", "reset", "run", "start", "stop", "next",
    "send", "put", "wait", "sum", "mean", "max", "min", "sort", "index", "count",
})  # fmt: skip
# attributes of a tensor that are tensors, and the fields of what `max(dim)`, `sort` and `topk` return
_TENSOR_VIEWS = frozenset({"data", "T", "mT", "H", "mH", "real", "imag", "values", "indices"})
_VALUE_COMPARISONS = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
_MASK_OPERATORS = (cst.BitAnd, cst.BitOr, cst.BitXor)
_NARROWING_UPDATES = (cst.MultiplyAssign, cst.BitAndAssign, cst.BitOrAssign, cst.BitXorAssign)


_SHOWN = 40  # characters of an expression quoted in a message


def shown(node: cst.CSTNode) -> str:
    """An expression as written, cut to fit in a message."""
    code = cst.Module(body=[]).code_for_node(node).strip()
    return code if len(code) <= _SHOWN else code[: _SHOWN - 3] + "..."


# Tensor methods that keep the shape, seen through on a concatenation's result.
_SAME_SHAPE = frozenset({"detach", "contiguous", "clone", "to", "long", "int", "float", "half", "bfloat16"})


class IndexSelect(NamedTuple):
    """The parts of `torch.index_select(x, dim, index)` or `x.index_select(dim, index)`."""

    source: cst.BaseExpression | None  # the tensor rows are picked from
    dim: cst.Arg | None
    index: cst.Arg | None
    shown: str  # how the call is named in a message


def index_select(ctx: FileContext, call: cst.Call) -> IndexSelect | None:
    """The parts of an `index_select` call, as a function or a method; None for other calls."""
    if patterns.method_name(call) != "index_select":
        return None
    if "torch.index_select" in ctx.qualified_names(call.func):
        source = patterns.argument(call, 0, "input")
        value = source.value if source is not None else None
        dim, index = patterns.argument(call, 1, "dim"), patterns.argument(call, 2, "index")
        return IndexSelect(value, dim, index, "torch.index_select")
    receiver = call.func.value  # type: ignore[attr-defined]
    return IndexSelect(
        receiver, patterns.argument(call, 0, "dim"), patterns.argument(call, 1, "index"), ".index_select()"
    )


def shape_kept(value: cst.BaseExpression) -> cst.BaseExpression:
    """The call under methods that keep a tensor's shape: `torch.cat(...)` in
    `torch.cat(...).detach()`."""
    while (
        type(value) is cst.Call
        and type(value.func) is cst.Attribute
        and value.func.attr.value in _SAME_SHAPE
        and type(value.func.value) is cst.Call
    ):
        value = value.func.value
    return value


def innermost_loop(ancestors: Sequence[cst.CSTNode]) -> cst.For | cst.While | None:
    """The loop whose body holds the node, within its function: what repeats it. A loop
    further out repeats the inner loop as a whole, which mostly starts over with the same
    shapes (DenseNet's layers)."""
    for index in range(len(ancestors) - 2, -1, -1):
        node = ancestors[index]
        kind = type(node)  # not `isinstance`: see portcheck.walk
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            return None
        if (kind is cst.For or kind is cst.While) and ancestors[index + 1] is node.body:
            return node  # type: ignore[return-value]
    return None


def tensor_method(ctx: FileContext, node: cst.CSTNode, names: frozenset[str]) -> bool:
    """`<receiver>.m(...)` with `m` in `names`, where the receiver may be a tensor (it resolves
    to nothing outside torch, and is no NumPy array)."""
    return (
        type(node) is cst.Call
        and patterns.method_name(node) in names
        and not patterns.resolves_outside_torch_classes(ctx.qualified_names(node.func))
        and type(node.func) is cst.Attribute
        and not numpy_valued(ctx, node.func.value)
    )


def resolved_call(ctx: FileContext, node: cst.CSTNode, names: frozenset[str]) -> bool:
    """A call of a function whose qualified name is in `names`."""
    return type(node) is cst.Call and bool(ctx.qualified_names(node.func) & names)


def builtin_call(ctx: FileContext, node: cst.CSTNode, names: tuple[str, ...]) -> cst.BaseExpression | None:
    """The single argument of `int(x)` / `bool(x)`... when the builtin is not shadowed by an import."""
    if (
        type(node) is cst.Call
        and type(node.func) is cst.Name
        and node.func.value in names
        and not ctx.qualified_names(node.func)
        and len(node.args) == 1
        and not node.args[0].star
    ):
        return node.args[0].value
    return None


_NUMPY_DEPTH = 8  # NumPy statistics chain names and arithmetic: `valid = union > 0`, `union = gt + pred - tp`...


def numpy_valued(ctx: FileContext, node: cst.CSTNode, depth: int = 0, seen: frozenset[str] = frozenset()) -> bool:
    """Whether an expression is a NumPy array by how it was made: a `numpy` call or `.numpy()`,
    a method or an element of one (`np.floor(a).astype(int)`, `arr[0]`), a comparison or
    arithmetic of one (`arr == 0`, `arr / 2`), or a name bound to one of those and never to a torch call
    (`w = np.bincount(c); w = 1 / w`), also a parameter the function first rebinds to one. Such values index and compare on the host: no device,
    nothing to sync or recompile. `seen`: the names being looked through, a cycle's end."""
    if depth > _NUMPY_DEPTH:
        return False
    parts: list[cst.CSTNode] = []
    if type(node) is cst.Call:
        if patterns.method_name(node) == "numpy" or any(
            name.split(".")[0] == "numpy" for name in ctx.qualified_names(node.func)
        ):
            return True
        parts = [node.func.value] if type(node.func) is cst.Attribute else []
    elif type(node) is cst.Subscript:
        parts = [node.value]
    elif type(node) is cst.Comparison:
        parts = [node.left, *(link.comparator for link in node.comparisons)]
    elif type(node) is cst.BinaryOperation:
        parts = [node.left, node.right]
    elif type(node) is cst.UnaryOperation:
        parts = [node.expression]
    elif type(node) is cst.Name and node.value not in seen:
        values = ctx.values_before_updates(node)
        if not values and ctx.flow is not None:  # facenet's `boxes = boxes.cpu().numpy()` of a parameter
            rebound = ctx.flow.resolver.rebound_parameter(node)
            if rebound is not None and all(each is not node for each in descendants(rebound)):
                values = [rebound]  # read after the rebinding, not in it
        if any(_made_by_torch(ctx, value) for value in values):
            return False
        seen, parts = seen | {node.value}, list(values)
    return any(numpy_valued(ctx, part, depth + 1, seen) for part in parts)


def in_host_memory(ctx: FileContext, node: cst.BaseExpression) -> bool:
    """Whether a tensor demonstrably lives in host memory, asked where the walk is: put there
    (`.cpu()`, `torch.from_numpy`), made from Python data on the default device where nothing
    may set another (`torch.as_tensor([obj["bbox"] for obj in anno])`), or, unless sent to a
    device, any tensor of a dataset's methods or a collate function, which DataLoader
    workers run. Indexing and comparing it runs on the host: nothing to sync or recompile."""
    flow_ = ctx.flow
    if flow_ is None:
        return False
    home = flow_.home(node)
    if home is flow.Home.HOST or (
        home is flow.Home.DEFAULT and not flow_.default_device_set(ctx.ancestors, ctx.source)
    ):
        return True
    return home is not flow.Home.MOVED and flow_.in_data_worker(ctx.ancestors)


def off_host_at_end(ctx: FileContext, node: cst.BaseExpression) -> Callable[[], bool]:
    """A `holds` test (see `StepRule.report_in_step`) for a tensor not known to be in host
    memory where the walk is: asked again at the end of the module, which knows every call of
    the function it is in (`Shard(tokens)`, passed a tensor read into host memory)."""
    return lambda: not in_host_memory(ctx, node)


def reads_tensor_value(ctx: FileContext, node: cst.BaseExpression) -> bool:
    """Whether a number or an index is taken from a tensor: `t.item()`, `lengths.max()`, a
    tensor itself (its `__index__`)."""
    return reads_tensor_scalar(ctx, node) or tensor_valued(ctx, node)


def read_in_host_memory(ctx: FileContext, node: cst.BaseExpression) -> bool:
    """Whether every tensor an expression reads a number from is in host memory, not copied
    there on the way (`start + self.seq_len + 1` with `start = torch.randint(0, n, (1,))`)."""
    if type(node) is cst.BinaryOperation:
        parts = [node.left, node.right]
    elif type(node) is cst.UnaryOperation:
        parts = [node.expression]
    else:
        return not _copies(node) and in_host_memory(ctx, node)
    return all(read_in_host_memory(ctx, part) for part in parts if reads_tensor_value(ctx, part))


def _copies(node: cst.BaseExpression) -> bool:
    """A method chain with a copy to the host in it: `lens.cpu().max()`, a sync of its own."""
    while type(node) is cst.Call and type(node.func) is cst.Attribute:
        if node.func.attr.value in ("cpu", "to"):
            return True
        node = node.func.value
    return False


def _made_by_torch(ctx: FileContext, node: cst.BaseExpression) -> bool:
    """A torch call, a model's run (SV2TTS's `embeds = model(inputs)`, later also rebound to
    `embeds.detach().cpu().numpy()`), or a method chain on one (`torch.from_numpy(a).cuda()`)."""
    while type(node) is cst.Call:
        if any(name.split(".")[0] == "torch" for name in ctx.qualified_names(node.func)) or flow.runs_model(node):
            return True
        if type(node.func) is not cst.Attribute:
            return False
        node = node.func.value
    return False


def values_reaching(
    ctx: FileContext, node: cst.CSTNode, path: Sequence[cst.CSTNode] | None = None
) -> tuple[cst.BaseExpression, ...]:
    """The values a name may hold: its one binding, else those that reach the statement the
    walk is in (`j = r < t; x = x[j]; j, k = m.T; y = y[j]`), or the last statement of `path`
    (the nodes from the module down to it: an `if` the walk visits)."""
    if type(node) is not cst.Name:
        return ()
    bound = ctx.assigned_value(node)
    if bound is not None or ctx.flow is None or ctx.flow.elsewhere:  # the walk's path is another scope's
        return () if bound is None else (bound,)
    if path is None:  # from the statement the walk visits (an `if` whose test is asked about), down to the node
        current = ctx.walker.current if ctx.walker is not None else None
        path = ctx.ancestors if current is None else (*ctx.ancestors, current)
    return _reaching_values(path, node.value, ctx.flow)


def _reaching_values(
    path: Sequence[cst.CSTNode], name: str, module_flow: flow.DeviceFlow
) -> tuple[cst.BaseExpression, ...]:
    """The values that reach the walk's statement from the last statements before it, in its
    block or an enclosing one of the same function, that bind `name` by `=` (for `a, b = v`,
    `v`): that of a plain assignment, and those of an `if` whose branches assign the name
    last (`m = t > 0` then `if cap: m = m & (t < cap)`; YOLO's `if multi_label: x = ... else:
    x = ...`), with what reaches the `if` where a path through it leaves the name alone.
    Nothing where a binding of another kind, or another compound statement, may come last."""
    found: list[cst.BaseExpression] = []
    for index in range(len(path) - 1, 0, -1):
        block, statement = path[index - 1], path[index]
        if type(block) in (cst.FunctionDef, cst.Lambda, cst.ClassDef):
            return ()
        if type(block) not in (cst.IndentedBlock, cst.Module):
            continue
        position = next((i for i, each in enumerate(block.body) if each is statement), None)
        for previous in reversed(block.body[:position] if position is not None else ()):
            bound = _binds_by_assignment(previous, name, module_flow)
            if bound is None:
                continue
            if type(bound) is not bool:  # an expression
                return (*found, bound)  # type: ignore[arg-type]
            branches = _assigned_in_branches(previous, name, module_flow)
            if branches is None:
                return ()
            found.extend(branches[0])
            if branches[1]:
                return tuple(found)
    return ()


def _assigned_in_branches(
    statement: cst.CSTNode, name: str, module_flow: flow.DeviceFlow
) -> tuple[list[cst.BaseExpression], bool] | None:
    """The values an `if` gives `name` in the branches that bind it (each one's last binding,
    a plain assignment), and whether every path through it does; None where a branch binds
    it otherwise."""
    if type(statement) is not cst.If:
        return None
    body = _assigned_last(statement.body, name, module_flow)
    if body is False:
        return None
    values = [] if body is None else [body]
    orelse = statement.orelse
    if orelse is None:
        return values, False
    if type(orelse) is cst.If:  # `elif`
        inner = _assigned_in_branches(orelse, name, module_flow)
        return None if inner is None else ([*values, *inner[0]], body is not None and inner[1])
    other = _assigned_last(orelse.body, name, module_flow)
    if other is False:
        return None
    return [*values, *([] if other is None else [other])], body is not None and other is not None


def _assigned_last(block: cst.BaseSuite, name: str, module_flow: flow.DeviceFlow) -> cst.BaseExpression | bool | None:
    """The value the last statement of a block that binds `name` assigns it (False where it
    binds it otherwise), None where none binds it."""
    for inner in reversed(block.body if type(block) is cst.IndentedBlock else ()):
        bound = _binds_by_assignment(inner, name, module_flow)
        if bound is not None:
            return bound if isinstance(bound, cst.BaseExpression) else False
    return None


def _binds_by_assignment(
    statement: cst.CSTNode, name: str, module_flow: flow.DeviceFlow
) -> cst.BaseExpression | bool | None:
    """The value a statement assigns `name` (False where it binds it otherwise or may), None
    where it does not bind it."""
    if type(statement) is cst.SimpleStatementLine:
        for small in reversed(statement.body):
            if type(small) is cst.Assign and any(_target_names(t.target, name) for t in small.targets):
                return _paired_value(small, name)
            if type(small) in (cst.AugAssign, cst.AnnAssign) and _target_names(small.target, name):
                return _mask_update(small)
        return None
    if type(statement) in (cst.FunctionDef, cst.ClassDef):
        return False if statement.name.value == name else None  # its body is a scope of its own
    return False if name in module_flow.names_bound_in(statement) else None


def makes_instance(ctx: FileContext, node: cst.BaseExpression | None) -> bool:
    """`Tacotron(...)`, `nn.Linear(...)`: an object of a class (a model), not a tensor, which the
    legacy constructors (`torch.FloatTensor(...)`) and torch's functions make."""
    if type(node) is not cst.Call:
        return False
    func = node.func
    title = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else ""
    names = ctx.qualified_names(func)
    return title[:1].isupper() and all(not name.startswith("torch.") or name.startswith("torch.nn.") for name in names)


def _is_property(function: cst.FunctionDef) -> bool:
    """`@property` (or `@cached_property`): reading the attribute runs it."""
    return any(
        (get_full_name_for_node(decorator.decorator) or "").rpartition(".")[2] in ("property", "cached_property")
        for decorator in function.decorators
    )


def defined_names(ctx: FileContext, function: cst.FunctionDef) -> tuple[str, ...]:
    """`pkg.mod.function` (`pkg.mod.Class.method` for a method), and, for a module of a
    package, `pkg.function`, the name its package re-exports it by (`import distributed as
    dist; dist.all_gather(...)` where `distributed/__init__.py` imports it from
    `.distributed`), and so on up (yolact's `from layers import Detect`, which
    `layers/functions/__init__.py` re-exports and `layers/__init__.py` star-imports), from
    each name imports may give the module: another file's step loop calls it by any (a base
    class's loop that calls the method on `self` calls it by its class's name too:
    `Project.subclasses`)."""
    module_flow = ctx.flow
    assert module_flow is not None
    owner = module_flow.owner_class(function)
    local = ".".join([*([owner] if owner else []), function.name.value])
    names: dict[str, None] = {}
    # the module's names from the folder the scripts run from too (RIFE's `from model.pytorch_msssim
    # import ssim_matlab`, `model/` without __init__.py; Megatron's `megatron.training`, re-exporting
    # `pretrain` from `training.py`, below a `megatron/` without one)
    for module in ctx.module.import_names:
        parts = module.split(".")
        names.update(dict.fromkeys(f"{'.'.join(parts[:end])}.{local}" for end in range(len(parts), 0, -1)))
    if owner is not None and _is_property(function):
        names.update(dict.fromkeys(name + project.PROPERTY_GETTER for name in list(names)))  # read as `meter.avg`
    return tuple(names)


def _is_own(receiver: cst.BaseExpression) -> bool:
    return type(receiver) is cst.Name and receiver.value in ("self", "cls")


def _mask_update(statement: cst.AugAssign | cst.AnnAssign) -> cst.BaseExpression | bool:
    """What a mask is narrowed by in place (yolact's `keep *= scores > t`, `valid &= ~pad`):
    a mask again, which the comparison stands for; False for any other update."""
    value = statement.value
    narrowing = type(statement) is cst.AugAssign and type(statement.operator) in _NARROWING_UPDATES
    mask = type(value) is cst.Comparison or (
        type(value) is cst.UnaryOperation and type(value.operator) is cst.BitInvert
    )
    return value if narrowing and mask and value is not None else False


def _paired_value(assign: cst.Assign, name: str) -> cst.BaseExpression:
    """What `a, b = x, y` gives `b`: `y`; for any other unpacking, the whole value."""
    value = assign.value
    for each in assign.targets:
        target = each.target
        if type(target) in (cst.Tuple, cst.List) and type(value) in (cst.Tuple, cst.List):
            pairs = list(zip(target.elements, value.elements))  # type: ignore[attr-defined]
            if len(target.elements) == len(value.elements) and not any(  # type: ignore[attr-defined]
                type(part) is cst.StarredElement for pair in pairs for part in pair
            ):
                return next((item.value for element, item in pairs if _target_names(element.value, name)), value)
    return value


def _target_names(target: cst.BaseExpression, name: str) -> bool:
    if type(target) is cst.Name:
        return target.value == name
    if type(target) in (cst.Tuple, cst.List):
        return any(_target_names(element.value, name) for element in target.elements)
    return False


def reads_tensor_scalar(ctx: FileContext, node: cst.CSTNode, depth: int = 0, *, read_back: bool = True) -> bool:
    """Whether an expression takes a number out of tensor data: `t.item()`, `lengths.max()`,
    `int(mask.sum())`, `int(counts[i])`, `n + 1` where `n = t.sum()`. Shapes (`x.size(0)`, `len(x)`) are not.
    Without `read_back`, not a name bound to a number the program has read back to the host
    (`.item()`, `int(t)`, an item of `.tolist()`): that copy is where it waited."""
    if depth > _DEPTH:
        return False
    if tensor_method(ctx, node, _REDUCTIONS) or resolved_call(ctx, node, _TORCH_REDUCTIONS):
        return True
    summed = builtin_call(ctx, node, ("max", "min", "sum"))
    if read_back and summed is not None and _read_back(ctx, summed, depth + 1):
        return True  # `max(lengths)`, `sum([n > t for n in lengths])` after `lengths = lens.tolist()`
    if read_back and type(node) is cst.Subscript and _read_back(ctx, node.value, depth + 1):
        return True  # `lengths[i]`
    bounds = _clamped(ctx, node)
    if bounds:  # `max(int(t.item()), 1)`: clamped, still the data's
        return any(reads_tensor_scalar(ctx, bound, depth + 1, read_back=read_back) for bound in bounds)
    inner = builtin_call(ctx, node, ("int", "float"))
    if inner is not None and tensor_valued(ctx, inner):
        return True  # `int(nlabel[b])`: a tensor's element
    values = (inner,) if inner is not None else values_reaching(ctx, node)
    if values and not read_back and inner is None and any(_numbers_read_back(ctx, value) for value in values):
        return False  # `n = t.item()`, then `if n > k:`: the copy into `n` was where it waited
    if values:
        return all(reads_tensor_scalar(ctx, value, depth + 1, read_back=read_back) for value in values)
    if type(node) is cst.BinaryOperation:
        return reads_tensor_scalar(ctx, node.left, depth + 1, read_back=read_back) or reads_tensor_scalar(
            ctx, node.right, depth + 1, read_back=read_back
        )
    if type(node) is cst.UnaryOperation:
        return reads_tensor_scalar(ctx, node.expression, depth + 1, read_back=read_back)
    return False


def _numbers_read_back(ctx: FileContext, node: cst.CSTNode) -> bool:
    """`t.item()`, `int(t)`, `q[s].item() - 1`, `int(math.ceil(x.item() * r))`: a number copied out."""
    if tensor_method(ctx, node, _READ_BACKS) or builtin_call(ctx, node, ("int", "float")) is not None:
        return True
    if type(node) is cst.BinaryOperation:
        return _numbers_read_back(ctx, node.left) or _numbers_read_back(ctx, node.right)
    return type(node) is cst.UnaryOperation and _numbers_read_back(ctx, node.expression)


def _clamped(ctx: FileContext, node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The values `max(a, b)` or `min(a, b, c)` picks from (the builtins, not shadowed)."""
    if (
        type(node) is not cst.Call
        or type(node.func) is not cst.Name
        or node.func.value not in ("max", "min")
        or ctx.qualified_names(node.func)
        or len(node.args) < 2
        or any(arg.star or arg.keyword for arg in node.args)
    ):
        return []
    return [arg.value for arg in node.args]


def _read_back(ctx: FileContext, node: cst.BaseExpression, depth: int) -> bool:
    """A list of numbers read back from a tensor (`lengths = (lens - 1).tolist()`, not a NumPy
    array's), or a comprehension over one: the numbers are the data's."""
    if depth > _DEPTH:
        return False
    if type(node) in (cst.ListComp, cst.GeneratorExp):
        return _read_back(ctx, node.for_in.iter, depth + 1)
    values = values_reaching(ctx, node)
    return bool(values) and all(_lists_tensor_values(ctx, value) for value in values)


def _lists_tensor_values(ctx: FileContext, value: cst.BaseExpression) -> bool:
    """`t.tolist()` of a tensor, also joined to other lists (LLaVA's `[-1] +
    torch.where(ids == IMAGE)[0].tolist() + [n]`)."""
    if type(value) is cst.BinaryOperation and type(value.operator) is cst.Add:
        return _lists_tensor_values(ctx, value.left) or _lists_tensor_values(ctx, value.right)
    return (
        type(value) is cst.Call
        and patterns.method_name(value) == "tolist"
        and type(value.func) is cst.Attribute
        and not numpy_valued(ctx, value.func.value)
    )


def _compared(node: cst.Comparison) -> list[cst.BaseExpression]:
    return [link.comparator for link in node.comparisons]


def tests_tensor_value(ctx: FileContext, node: cst.CSTNode, depth: int = 0, *, read_back: bool = True) -> bool:
    """Whether a condition needs tensor values: `mask.any()`, `torch.equal(a, b)`,
    `x.sum() > 0`, `x.sum()`, `bool(t.max())`, `tok in eos_ids`. `self.training`, `x.dim() == 3`,
    `x is None` are not. Without `read_back`, numbers compared once read back are not either
    (`reads_tensor_scalar`)."""
    if depth > _DEPTH:
        return False
    if type(node) is cst.BooleanOperation:
        return tests_tensor_value(ctx, node.left, depth + 1, read_back=read_back) or tests_tensor_value(
            ctx, node.right, depth + 1, read_back=read_back
        )
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Not:
        return tests_tensor_value(ctx, node.expression, depth + 1, read_back=read_back)
    if type(node) is cst.BinaryOperation and type(node.operator) in (cst.BitOr, cst.BitAnd, cst.BitXor):
        # GroundingDINO's `if output.isnan().any() | output.isinf().any():`
        return tests_tensor_value(ctx, node.left, depth + 1, read_back=read_back) or tests_tensor_value(
            ctx, node.right, depth + 1, read_back=read_back
        )
    if type(node) is cst.Comparison:
        if any(type(side) is cst.Name and side.value == "None" for side in (node.left, *_compared(node))):
            return False  # `x != None`: a tensor compared with None answers False (or True), no values read
        members = [link.comparator for link in node.comparisons if type(link.operator) in (cst.In, cst.NotIn)]
        if members and any(tensor_valued(ctx, side) for side in (node.left, *members)):
            return True  # `tok in eos_ids`, `x in t`: each element compared, the answer read on the host
        if not any(type(link.operator) in _VALUE_COMPARISONS for link in node.comparisons):
            return False
        sides = (node.left, *(link.comparator for link in node.comparisons))
        return any(
            reads_tensor_scalar(ctx, side, depth + 1, read_back=read_back) or tensor_valued(ctx, side) for side in sides
        )
    if tensor_method(ctx, node, _TRUTH_METHODS) or resolved_call(ctx, node, _TORCH_TRUTH):
        return True
    if tensor_method(ctx, node, _REDUCTIONS):  # `if fg_mask.sum():` (YOLOv9's loss): nonzero, read on the host
        return True
    inner = builtin_call(ctx, node, ("bool",))
    if inner is not None:
        return reads_tensor_scalar(ctx, inner, depth + 1) or tests_tensor_value(ctx, inner, depth + 1)
    inner = builtin_call(ctx, node, ("all", "any"))
    if type(inner) in (cst.GeneratorExp, cst.ListComp):  # `any(not p.grad.isfinite().all() for p in ps)`
        return tests_tensor_value(ctx, inner.elt, depth + 1)
    if inner is not None:  # Python iterates the tensor and tests each element
        return tensor_valued(ctx, inner)
    return tensor_valued(ctx, node)


def _bound_as_number(ctx: FileContext, name: cst.Name, value: cst.BaseExpression) -> bool:
    """Whether a value of `name` is bound in the branch of `if isinstance(x, (float, int)):` of
    the function that binds it, and reads `x` (BasicSR's `cal_gray_noise = gray_noise > 0`,
    where the other branch compares a tensor). Looked up from the function, not from where the
    walk stands: the question may come from anywhere in the module."""
    owner = ctx.flow.resolver.scope_of(name.value) if ctx.flow is not None else None
    function = owner.owner if owner is not None else None
    if type(function) is not cst.FunctionDef:
        return False
    return any(
        _tests_number(ctx, branch.test, value) and any(each is value for each in ctx.flow.own_nodes(branch.body))
        for branch in ctx.flow.own_nodes(function.body, cst.If)
    )


def _tests_number(ctx: FileContext, test: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """`isinstance(x, (float, int))` (or one of them) for an `x` that `value` reads."""
    if type(test) is not cst.Call or patterns.dotted(test.func) != "isinstance" or ctx.qualified_names(test.func):
        return False
    if len(test.args) != 2 or type(test.args[0].value) is not cst.Name:
        return False
    kinds = test.args[1].value
    spelled = (
        {patterns.dotted(each.value) for each in kinds.elements}
        if type(kinds) is cst.Tuple
        else {patterns.dotted(kinds)}
    )
    return spelled <= {"int", "float"} and reads_names(value, {test.args[0].value.value})


_OPTIONAL = frozenset({"typing.Optional", "typing.Union"})
_PASSING_BUILTINS = frozenset({"abs", "min", "max"})  # what they return is what they are given
_TENSOR_TYPE = re.compile(r"torch\.(?:[A-Z]\w*)?Tensor")  # torch.Tensor, torch.LongTensor...


def _names_class(node: cst.BaseExpression) -> bool:
    """`AllReduce`, `dist.AllGather`: a class by the name's convention (`model.apply(init)` is a
    module's)."""
    return patterns.class_like(patterns.dotted(node))


_UNKNOWN = "?"  # in `seen`, before a name: its value here is what is being asked, so not known to be one


def tensor_valued(ctx: FileContext, node: cst.CSTNode, depth: int = 0, seen: frozenset[str] = frozenset()) -> bool:
    """`_tensor_valued`, each question answered once per outermost question: a name read
    twelve times in each of eight chained sums (`a2 = a1 + a1 + ...`) asks about the same
    values again and again, exponentially many times where nothing caps the arithmetic."""
    answers = _answers.get()
    if answers is None:
        token = _answers.set({})
        try:
            return tensor_valued(ctx, node, depth, seen)
        finally:
            _answers.reset(token)
    where = (id(ctx.flow.resolver.scope), ctx.flow.elsewhere) if ctx.flow is not None else None
    key = (node, depth, seen, where)  # the node itself: it stays alive, so no other node takes its id
    if key not in answers:
        answers[key] = _tensor_valued(ctx, node, depth, seen)
    return answers[key]


# The answers of the outermost `tensor_valued` question being asked (None between questions):
# the flow learns more as the walk goes on, so an answer is not kept past its question.
_answers: ContextVar[dict[tuple[object, ...], bool] | None] = ContextVar("tensor_answers", default=None)


def _tensor_valued(ctx: FileContext, node: cst.CSTNode, depth: int, seen: frozenset[str]) -> bool:
    """Whether an expression is a tensor: what a torch function makes (`torch.zeros`,
    `torch.multinomial`, `F.softmax`, `clip_grad_norm_`...), what the module's own function
    returns (or a method of its class, through `self.`), what a model returns (`model(x)`,
    `self.net(x)`), what an autograd Function's `apply`
    makes of a tensor, a value sent to a device, `abs()`, `min()` or `max()` of one, a gradient
    (`p.grad`), a view of a tensor (`.data`, `.T`), a tensor method, index or comparison of
    one, a method only tensors have (`.topk(k)`, `.unsqueeze(1)`), an item a loop takes from one (or from an
    optimizer's `group["params"]`), or a name bound to one (`seen`: the names being
    looked through; a cycle such as `pos = pos[-1:] + 1` leaves it to the name's other values), also after a
    number (`norm = 0.`, then `norm = clip_grad_norm_(...)` or `loss += F.l1_loss(z, h)`). A
    parameter is one where it is annotated so, where the function's own body first rebinds it
    to one, or where every call of its function in the module passes one; a name unpacked from
    what the module's function returns, where that item is one, or first from what a model
    returns (`logits, past = model(ids)`); what a function of the module returns where it
    returns a parameter as given, the argument passed for it. The results of unknown calls
    are not known to be tensors."""
    if depth > 2 * _DEPTH:  # a longer chain than a value test: names, methods, indexes
        return False
    if type(node) is cst.Call:
        names = ctx.qualified_names(node.func)
        if names & _TENSOR_MAKERS or any(name.startswith("torch.nn.functional.") for name in names):
            return True
        if not names and type(node.func) is cst.Name and node.func.value in _PASSING_BUILTINS:
            # `abs(ix)`, `max(iy - b, 0)`: the tensor itself, or one of those compared
            given = [arg.value for arg in node.args if not arg.star and not arg.keyword]
            if len(given) >= (1 if node.func.value == "abs" else 2):
                return any(tensor_valued(ctx, value, depth + 1, seen) for value in given)
        returned = ctx.flow.returned_values(node) if ctx.flow is not None else ()
        given = _passed_through(node, returned)
        if given is not None:  # `logits = process(logits, ...)` where it returns its parameter
            return tensor_valued(ctx, given, depth + 1, seen)
        if returned:  # what the module's own function returns (`get_sigmas_karras(n, ...)`)
            inner = frozenset(each for each in seen if each.startswith("self."))  # its names are its own
            return all(
                ctx.flow.in_scope(scope, partial(tensor_valued, ctx, value, depth + 1, inner))
                for value, scope in returned
            )
        if not names and (flow.runs_model(node) or flow.runs_given_model(node)):
            # what a model returns: `logits = model(ids)[:, -1]`, `eps = self.net(x, t)`, `decode_one_token(model=model, x=x)`
            return True
        method = patterns.method_name(node)
        receiver = node.func.value if type(node.func) is cst.Attribute else None
        if method in _TENSOR_ONLY_METHODS and not names:
            return True
        if receiver is not None and not names and method not in _NOT_TENSORS and _torch_keywords(node):
            return True  # `labels.sum(dim=2)`: `dim=` and `keepdim=` are torch's spelling (NumPy's is `axis=`)
        if method == "apply" and receiver is not None and _names_class(receiver):
            # a torch.autograd.Function's (`AllReduce.apply(loss)`): tensors in, tensors out
            return any(tensor_valued(ctx, arg.value, depth + 1, seen) for arg in node.args if not arg.keyword)
        moved = method in _MOVERS and not names and ctx.flow is not None and ctx.flow.home(node) is flow.Home.MOVED
        if moved and not makes_instance(ctx, receiver):
            return True  # sent to a device (`append_zero(sigmas).to(device)`): what is tested there is a tensor
        return (
            receiver is not None
            and not names
            and method not in _NOT_TENSORS
            and tensor_valued(ctx, receiver, depth, seen)  # like arithmetic, a method chain ends in the tree
        )
    if type(node) is cst.Subscript:
        return tensor_valued(ctx, node.value, depth, seen)
    if type(node) is cst.Comparison:
        if not any(type(link.operator) in _VALUE_COMPARISONS for link in node.comparisons):
            return False
        return any(
            tensor_valued(ctx, side, depth + 1, seen) for side in (node.left, *(c.comparator for c in node.comparisons))
        )
    if type(node) is cst.BinaryOperation:  # arithmetic costs no depth: the tree ends, names do not
        return tensor_valued(ctx, node.left, depth, seen) or tensor_valued(ctx, node.right, depth, seen)
    if type(node) is cst.UnaryOperation and type(node.operator) is not cst.Not:
        return tensor_valued(ctx, node.expression, depth, seen)
    if type(node) is cst.IfExp:  # a tensor either way, or one way where the other value is unknown or None
        body, orelse = (tensor_valued(ctx, part, depth + 1, seen) for part in (node.body, node.orelse))
        return (body or _open(node.body)) and (orelse or _open(node.orelse)) and (body or orelse)
    if type(node) is cst.Attribute and not ctx.qualified_names(node):
        if node.attr.value == "grad":
            return True  # a parameter's gradient: `p.grad.data.norm(2)`
        assigned = (
            flow.is_self_attribute(node) and ctx.flow is not None and ctx.flow.self_attribute_values(node.attr.value)
        )
        if node.attr.value in _TENSOR_VIEWS and not assigned:  # GPTQ's `self.H` is its own, no view of `self`
            return tensor_valued(ctx, node.value, depth + 1, seen)
    if flow.is_self_attribute(node) and ctx.flow is not None:  # a buffer: `self.register_buffer("ptr", ...)`
        assert type(node) is cst.Attribute
        key = f"self.{node.attr.value}"
        if _UNKNOWN + key in seen:
            return False
        if key in seen or ctx.flow.is_buffer(node.attr.value):
            return True
        bound = ctx.flow.self_attribute_values(node.attr.value)
        # the names seen so far are another scope's: only the attributes carry over; where every
        # value reads the attribute itself (OLMo's `self.min_train_loss = min(self.min_train_loss,
        # loss)`), it says nothing of itself: the other parts of those values decide
        cyclic = all(_reads_attribute(value, node.attr.value) for value, _ in bound)
        carried = frozenset(each for each in seen if each.startswith(("self.", _UNKNOWN + "self."))) | {
            _UNKNOWN + key if cyclic else key
        }
        return bool(bound) and all(
            ctx.flow.in_scope(scope, partial(tensor_valued, ctx, value, depth + 1, carried)) for value, scope in bound
        )
    if type(node) is cst.Name:
        if node.value in seen:
            return True
        if _UNKNOWN + node.value in seen:
            return False
        if _backpropagated(ctx, node):
            return True  # `loss.backward()` in the same function: whatever else binds it, a tensor
        values, inner = ctx.values_before_updates(node), seen | {node.value}
        # Also bound otherwise (a loop's batch, then `x = x.to(device)`): what reaches here, where
        # that says so without the name's own earlier value (`path = f(path) if c else path`).
        explicit = not values and ctx.flow is not None and ctx.flow.resolver.explicit_values(node)
        reaching = values_reaching(ctx, node) if explicit else ()
        unknown = seen | {_UNKNOWN + node.value}
        if reaching and all(_reaching_tensor(ctx, node, value, depth + 1, unknown) for value in reaching):
            return True
        iterated = ctx.flow.iterated(node) if ctx.flow is not None and not values else None
        if iterated is not None:  # an item of a tensor: `for t_cur, t_next in zip(t_steps[:-1], t_steps[1:])`
            return _group_parameters(ctx, iterated) or tensor_valued(ctx, iterated, depth + 1, inner)
        mixed = ctx.flow.resolver.values_and_unpacking(node) if ctx.flow is not None and not values else None
        if mixed is not None:  # `logits, past = model(x)`, then `logits = logits[:, -1, :]`
            return all(tensor_valued(ctx, value, depth + 1, inner) for value in mixed[0]) and all(
                _unpacked_tensor(ctx, call, index, depth + 1, inner) for call, index in mixed[1]
            )
        if not values:
            annotated = ctx.parameter_annotation(node)
            if annotated is not None:
                return _annotated_tensor(ctx, annotated[0]) and all(
                    tensor_valued(ctx, value, depth + 1, inner) for value in annotated[1]
                )
            given = f"parameter:{node.value}"  # inside its rebinding, the name is what callers give
            rebound = ctx.flow.resolver.rebound_parameter(node) if ctx.flow is not None and given not in seen else None
            if rebound is not None:  # made a tensor first: `tx = torch.as_tensor(tx * W).to(x.device)`
                return tensor_valued(ctx, rebound, depth + 1, seen | {given})
            filled = _filled_where_left_out(ctx, node) if given not in seen else None
            if filled is not None:  # `if max_length is None: max_length = length.max()`
                return tensor_valued(ctx, filled, depth + 1, seen | {given})
            return _passed_tensors(ctx, node, depth) or _used_as_tensor(ctx, node)
        # `class_acc = None` on the other path: where the name holds the tensor, reading it waits
        values = [value for value in values if not is_none(value)] or values
        if len(values) > 1:  # BasicSR's `cal_gray_noise = gray_noise > 0` where the noise is a number
            values = [value for value in values if not _bound_as_number(ctx, node, value)] or values
        others = [value for value in values if not flow.is_number(value)]
        if len(others) == len(values):
            return all(tensor_valued(ctx, value, depth + 1, inner) for value in values)
        # A number first, a tensor on the way (`norm = 0.`, then `norm = clip_grad_norm_(...)`, or
        # `loss = 0.`, then `loss += F.l1_loss(z, h)`): where it holds the tensor, reading it waits.
        # The number starts any cycle (`running = 0.95 * running + reward`, `start = end` after
        # `end = start + n`): none of the names looked through counts as a tensor here.
        doubted = frozenset(each for each in seen if each.startswith("self."))
        if not others and ctx.flow is not None:
            return any(tensor_valued(ctx, value, depth + 1, doubted) for value in ctx.flow.resolver.updates(node))
        return all(tensor_valued(ctx, value, depth + 1, doubted) for value in others)
    return False


def _reads_attribute(value: cst.BaseExpression, attribute: str) -> bool:
    """Whether a value reads `self.<attribute>`."""
    return any(
        flow.is_self_attribute(node) and node.attr.value == attribute  # type: ignore[attr-defined]
        for node in (value, *descendants(value))
    )


def _group_parameters(ctx: FileContext, iterated: cst.BaseExpression) -> bool:
    """`group["params"]` in `for group in self.param_groups:` (an optimizer's `step()`, nanoT5's
    AdamWScale): the parameters it updates, each a tensor."""
    if type(iterated) is not cst.Subscript or len(iterated.slice) != 1 or type(iterated.value) is not cst.Name:
        return False
    key = iterated.slice[0].slice
    if type(key) is not cst.Index or patterns.string_value(key.value) != "params" or ctx.flow is None:
        return False
    groups = ctx.flow.iterated(iterated.value)
    return type(groups) is cst.Attribute and groups.attr.value == "param_groups"


def _backpropagated(ctx: FileContext, node: cst.Name) -> bool:
    """Whether the function that binds the name calls `.backward()` on it."""
    module_flow = ctx.flow
    owner = module_flow.resolver.scope_of(node.value) if module_flow is not None else None
    function = owner.owner if owner is not None else None
    return type(function) is cst.FunctionDef and node.value in module_flow.backpropagated(function)  # type: ignore[union-attr]


def _reaching_tensor(
    ctx: FileContext, node: cst.Name, value: cst.BaseExpression, depth: int, seen: frozenset[str]
) -> bool:
    """Whether a value that reaches `node` makes it a tensor: the item the name takes where it
    is unpacked from it (`logits, stats = model(x)`: only `logits`), else the value itself."""
    assert ctx.flow is not None
    unpacked = [index for source, index in ctx.flow.resolver.unpacking_sources(node) if source is value]
    if unpacked:
        return all(_unpacked_tensor(ctx, value, index, depth, seen) for index in unpacked)  # type: ignore[arg-type]
    return tensor_valued(ctx, value, depth, seen)


def _passed_through(call: cst.Call, returned: Sequence[tuple[cst.BaseExpression, Scope]]) -> cst.BaseExpression | None:
    """What `call` passes for the parameter its function returns as given (LoRA's
    `_postprocess_next_token_scores(scores, ...)`, which changes `scores` in place and returns
    it), where every `return` returns it and the function never rebinds it; else None."""
    names = {value.value for value, _ in returned if type(value) is cst.Name}
    scope = returned[0][1] if returned else None
    if len(names) != 1 or any(type(value) is not cst.Name or each is not scope for value, each in returned):
        return None
    (name,) = names
    assert scope is not None
    function = scope.owner
    if type(function) is not cst.FunctionDef or scope.values.get(name) != [None] or scope.updated.get(name):
        return None
    return argument_for(call, function, name)


def argument_for(call: cst.Call, function: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    """What `call` of `function` (a method called through its instance: `self` is not passed)
    passes for its parameter `name`; None where it passes nothing for it, or unpacks arguments."""
    params = function.params
    positional = [param.name.value for param in (*params.posonly_params, *params.params)]
    if type(call.func) is cst.Attribute:  # `self.process(x)`: `self` is not passed
        positional = positional[1:]
    if name not in positional and all(param.name.value != name for param in params.kwonly_params):
        return None
    for index, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
        if arg.keyword is None and index < len(positional) and positional[index] == name:
            return arg.value
    return None


def _unpacked_tensor(
    ctx: FileContext,
    call: cst.Call | cst.Subscript | cst.Name,
    index: int,
    depth: int,
    seen: frozenset[str] = frozenset(),
) -> bool:
    """Whether the item at `index` of what `call` returns is a tensor: any item of a tensor
    (`row, col = idxs[i]` after `idxs = torch.nonzero(mask)`), or of what a torch function or
    tensor method returns (`values, ids = torch.topk(...)`, `q, k, v = qkv.unbind(0)`), the first
    output of a model (`logits, past = model(ids)`), or where the module's function returns one
    there (`sigma_down, sigma_up = get_ancestral_step(...)`); of a name, where each list it is
    bound to holds tensors. `seen`: the names being looked through (`pred, ind =
    pred[mask].sort()` reads the `pred` it rebinds)."""
    if type(call) is cst.Name:
        return _holds_tensors(ctx, call, depth, seen)
    if type(call) is cst.Subscript:
        return tensor_valued(ctx, call, depth, seen)
    names = ctx.qualified_names(call.func)
    if not names and flow.runs_model(call):
        return index == 0  # what else it returns may be anything (`logits, stats = model(x)`)
    if any(name.startswith("diffusers.") and name.endswith(".retrieve_timesteps") for name in names):
        return index == 0  # the scheduler's timesteps, a tensor on the device, and their count
    if tensor_valued(ctx, call, depth, seen):
        return True
    return _returned_item_tensor(ctx, call, index, depth)


def _holds_tensors(ctx: FileContext, node: cst.Name, depth: int, seen: frozenset[str]) -> bool:
    """Whether every list `=` binds the name to holds tensors (StyleTTS2's `batch = [b.to(device)
    for b in batch[1:]]`, then `texts, input_lengths, ... = batch`), where one does at all."""
    if node.value in seen or ctx.resolver is None:
        return False
    values, unknown = ctx.resolver.explicit_values(node), seen | {_UNKNOWN + node.value}
    return bool(values) and all(_items_tensors(ctx, value, depth + 1, unknown) for value in values)


def _items_tensors(ctx: FileContext, value: cst.BaseExpression, depth: int, seen: frozenset[str]) -> bool:
    """Whether each item of a list display or comprehension is a tensor."""
    if type(value) in (cst.ListComp, cst.GeneratorExp):
        return tensor_valued(ctx, value.elt, depth, seen)  # type: ignore[attr-defined]
    if type(value) in (cst.List, cst.Tuple):
        items = value.elements  # type: ignore[attr-defined]
        return bool(items) and all(
            type(item) is cst.Element and tensor_valued(ctx, item.value, depth, seen) for item in items
        )
    return False


def _returned_item_tensor(ctx: FileContext, call: cst.Call, index: int, depth: int) -> bool:
    """Whether every return of the module's function that `call` calls is a tuple whose item
    at `index` is a tensor (`return sigma_down, sigma_up`); for a method of an instance of one
    of the module's classes, where every return of one class's method is (whisper's
    `tokens, completed = self.decoder.update(...)`: greedy decoding's `completed` is a tensor,
    beam search's a bool)."""
    assert ctx.flow is not None
    module_flow = ctx.flow

    def item_tensor(returned: Sequence[tuple[cst.BaseExpression, Scope]]) -> bool:
        return bool(returned) and all(
            type(value) is cst.Tuple
            and index < len(value.elements)
            and type(value.elements[index]) is cst.Element
            and module_flow.in_scope(scope, partial(tensor_valued, ctx, value.elements[index].value, depth + 1))
            for value, scope in returned
        )

    returned = module_flow.returned_values(call)
    if returned:
        return item_tensor(returned)
    return any(item_tensor(each) for each in module_flow.returned_per_class(call))


def _passed_tensors(ctx: FileContext, node: cst.Name, depth: int) -> bool:
    """A parameter that every call of its function in the module passes a tensor
    (`self.p_sample(img, times, times_next)` with `times_next = steps[i + 1]`); of a function
    the module never calls, one that another module passes a tensor (see `given_elsewhere`)."""
    module_flow = ctx.flow
    if module_flow is None:
        return False
    function = module_flow.resolver.parameter_of(node)
    passed = module_flow.passed_arguments(function, node.value) if function is not None else None
    if passed == [] and ctx.project.complete:
        assert function is not None
        return given_elsewhere(ctx, function, node.value)
    if passed == []:  # the second pass asks again, knowing what other modules pass
        assert function is not None
        position = _position_of(function, node.value)
        module_flow.note_callers_asked(node.value, *(() if position is None else (position, position - 1)))
    return bool(passed) and all(
        module_flow.in_scope(scope, partial(tensor_valued, ctx, value, depth + 1)) for value, scope in passed or ()
    )


def _filled_where_left_out(ctx: FileContext, node: cst.Name) -> cst.BaseExpression | None:
    """The value a function fills its parameter with (see `Resolver.filled_parameter`), where
    a call leaves it out: one of the module's, or another module's (none of its own calls)."""
    module_flow = ctx.flow
    filled = module_flow.resolver.filled_parameter(node) if module_flow is not None else None
    if module_flow is None or filled is None or module_flow.passed_arguments(filled[0], node.value):
        return None
    return filled[1]


def _used_as_tensor(ctx: FileContext, node: cst.Name) -> bool:
    """A parameter its function calls a method only tensors have on (`length.unsqueeze(1)`,
    glow-tts' `sequence_mask(length)`): whatever callers pass, it is a tensor."""
    module_flow = ctx.flow
    function = module_flow.resolver.parameter_of(node) if module_flow is not None else None
    if module_flow is None or function is None:
        return False
    return bool(module_flow.methods_called_on(function, node.value) & _TENSOR_ONLY_METHODS)


def given_elsewhere(ctx: FileContext, function: cst.FunctionDef, name: str) -> bool:
    """Whether another module passes a tensor for a parameter of one of the module's
    functions, or for the parameter of the same name and position of another of them: a
    library's functions share their conventions (k-diffusion's samplers all take the noise
    schedule `sigmas` third, and a script calls one of them with a tensor)."""
    module_flow = ctx.flow
    known = ctx.project.tensor_parameters_in(ctx.module.name)
    if not known or module_flow is None:
        return False
    functions = module_flow.module_functions()
    owner = module_flow.method_class(function)
    if owner is not None:  # a model's `forward`, run by calling the model: the arguments of that call
        position = _position_of(function, name)
        method = f"{owner}.{function.name.value}"
        if position is not None and not flow.is_static(function):
            position -= 1  # a call passes no `self`
        return (method, name) in known or (position is not None and (method, str(position)) in known)
    if functions.get(function.name.value) is not function:
        return False  # a nested function: its callers are not looked up by name
    position = _position_of(function, name)
    for other, parameter in known:
        sibling = functions.get(other)
        if sibling is None or (parameter != name and parameter != str(position)):
            continue
        if sibling is function or (position is not None and _position_of(sibling, name) == position):
            return True
    return False


def _position_of(function: cst.FunctionDef, name: str) -> int | None:
    """The position of a parameter that callers may pass positionally."""
    params = (*function.params.posonly_params, *function.params.params)
    return next((index for index, param in enumerate(params) if param.name.value == name), None)


def _open(node: cst.BaseExpression) -> bool:
    """The other value of a tensor-or-something choice that leaves the name a tensor on one
    path: None (`acc = ... if mixup is None else None`), or an attribute or call whose value
    portcheck cannot tell (`self.model.alphas`)."""
    return is_none(node) or type(node) in (cst.Attribute, cst.Call, cst.Subscript)


def _annotated_classes(ctx: FileContext, annotation: cst.BaseExpression) -> set[str]:
    """The classes an annotation names: `Cache`, `Optional[Cache]`, `Cache | None`."""
    if type(annotation) is cst.BinaryOperation and type(annotation.operator) is cst.BitOr:
        return _annotated_classes(ctx, annotation.left) | _annotated_classes(ctx, annotation.right)
    if type(annotation) is cst.Subscript and ctx.qualified_names(annotation.value) & _OPTIONAL:
        parts = [element.slice.value for element in annotation.slice if type(element.slice) is cst.Index]
        return {name for part in parts for name in _annotated_classes(ctx, part)}
    return set(ctx.qualified_names(annotation))


def _annotated_tensor(ctx: FileContext, annotation: cst.BaseExpression) -> bool:
    """`torch.Tensor`, `torch.LongTensor`, `Optional[torch.Tensor]`, `torch.Tensor | None`: a
    tensor where it is not None (a test of it for None is no test of its values)."""
    if type(annotation) is cst.BinaryOperation and type(annotation.operator) is cst.BitOr:
        return _annotated_tensor(ctx, annotation.left) or _annotated_tensor(ctx, annotation.right)
    if type(annotation) is cst.Subscript and ctx.qualified_names(annotation.value) & _OPTIONAL:
        return any(
            type(element.slice) is cst.Index and _annotated_tensor(ctx, element.slice.value)
            for element in annotation.slice
        )
    return any(_TENSOR_TYPE.fullmatch(name) for name in ctx.qualified_names(annotation))


def is_bool_mask(ctx: FileContext, node: cst.CSTNode, depth: int = 0, seen: frozenset[str] = frozenset()) -> bool:
    """Whether an index expression is a boolean mask: `x > 0`, `~valid`, `(a > 0) & (b < 1)`,
    `m.bool()`, `torch.isnan(x)`, a tensor made or cast with `dtype=torch.bool`
    (`torch.ones(n, dtype=torch.bool)`, `m.to(torch.bool)`), a view of one (`m.view(-1)`,
    `m.T`) or part of one (`m[i]`), masks stacked (`torch.stack((j, k))`), either value of an
    `if` expression, a name holding one of those (`values_reaching`), or an attribute of
    `self` the module binds only to those (`self.lora_ind = w.new_zeros(n, dtype=torch.bool)`). `depth`: the names looked through;
    `seen`: the attributes and names being looked through."""
    if depth > _DEPTH:
        return False
    if type(node) is cst.Comparison:
        return any(type(link.operator) in _VALUE_COMPARISONS for link in node.comparisons)
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.BitInvert:
        return True  # `~` on an index is a negated mask; integer tensors would index from the end
    if type(node) is cst.BinaryOperation and type(node.operator) in _MASK_OPERATORS:
        return is_bool_mask(ctx, node.left, depth, seen) or is_bool_mask(ctx, node.right, depth, seen)
    if tensor_method(ctx, node, _MASK_OPS) or resolved_call(ctx, node, _TORCH_MASK_OPS) or _of_bool_dtype(ctx, node):
        return True
    if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in _VIEWS:
        return is_bool_mask(ctx, node.func.value, depth, seen)
    if _moved(ctx, node):  # `(m.sum(0) > 0).to(device)`: the same mask elsewhere
        assert type(node) is cst.Call and type(node.func) is cst.Attribute
        return is_bool_mask(ctx, node.func.value, depth, seen)
    if resolved_call(ctx, node, _AS_TENSOR) and not _of_bool_dtype(ctx, node):  # `torch.as_tensor(keep, device=d)`
        assert type(node) is cst.Call
        return bool(node.args) and is_bool_mask(ctx, node.args[0].value, depth, seen)
    if resolved_call(ctx, node, _REARRANGED):  # vector-quantize-pytorch's `repeat(mask, 'b n -> c (b h) n', ...)`
        assert type(node) is cst.Call
        return bool(node.args) and is_bool_mask(ctx, node.args[0].value, depth, seen)
    if type(node) is cst.Attribute and node.attr.value in ("T", "mT"):
        return is_bool_mask(ctx, node.value, depth, seen)
    if type(node) is cst.Subscript:  # `xc[i]`: a row of a mask
        return is_bool_mask(ctx, node.value, depth, seen)
    if type(node) is cst.IfExp:  # `[i] if overlap else labels == i`: a mask where the test fails
        return is_bool_mask(ctx, node.body, depth, seen) or is_bool_mask(ctx, node.orelse, depth, seen)
    if resolved_call(ctx, node, _JOINS):  # `torch.stack((ones_like(j), j, k))`: masks joined
        assert type(node) is cst.Call
        parts = node.args[0].value if node.args else None
        if type(parts) in (cst.Tuple, cst.List):
            return any(is_bool_mask(ctx, element.value, depth, seen) for element in parts.elements)  # type: ignore[union-attr]
        return parts is not None and _named_mask(parts)  # `torch.cat(fg_masks, 0)`: a list of masks appended
    if flow.is_self_attribute(node) and ctx.flow is not None:
        assert type(node) is cst.Attribute
        name = node.attr.value
        if name in seen:
            return True
        values = ctx.flow.self_attribute_values(name)
        return bool(values) and all(
            ctx.flow.in_scope(scope, partial(is_bool_mask, ctx, value, depth + 1, seen | {name}))
            for value, scope in values
        )
    local = f":{node.value}" if type(node) is cst.Name else ""
    if _MASK_HELD + local in seen or _OTHER_HELD + local in seen:
        # a value made from the name itself: what the name held, a mask where its other values
        # are (`m = repeat(m, ...)` after `m = mask`), else where it was before (`valid_mask =
        # valid_mask.detach()` of a parameter so called; not `idx = idx[perm]`)
        return _MASK_HELD + local in seen
    values = values_reaching(ctx, node)
    if not values:
        return _mask_before(ctx, node, depth, seen)
    rebound = local and all(reads_names(value, {node.value}) for value in values)  # type: ignore[attr-defined]
    held = _MASK_HELD if not rebound or _mask_before(ctx, node, depth, seen) else _OTHER_HELD
    return all(
        is_bool_mask(ctx, value, depth + 1, seen | {held + local}) or (_opaque_call(ctx, value) and _named_mask(node))
        for value in values
    )


_MASK_HELD, _OTHER_HELD = "mask", "other"  # in `is_bool_mask`'s `seen`, before `:name`


def _mask_before(ctx: FileContext, node: cst.CSTNode, depth: int, seen: frozenset[str]) -> bool:
    """Whether a name no assignment here binds holds a mask: a parameter that a call of the
    module passes one (gcn's `test(..., idx_test)`), or one called a mask, or tested as bools."""
    passed = _passed_for(ctx, node)
    if passed:
        return any(
            ctx.flow.in_scope(scope, partial(is_bool_mask, ctx, value, depth + 1, seen))  # type: ignore[union-attr]
            for value, scope in passed
        )
    iterated = _iterated_for(ctx, node)
    if iterated is not None:  # an element of what the loop walks: masks where that holds masks
        return is_bool_mask(ctx, iterated, depth + 1, seen) or _named_mask(iterated)
    return _named_mask(node) or _tested_as_bool(ctx, node)


def _iterated_for(ctx: FileContext, node: cst.CSTNode) -> cst.BaseExpression | None:
    """What the innermost loop around the walk that binds the name `node` as its target walks
    over: segment-anything's `for i_mask in keep_by_nms:` takes indices from what NMS kept."""
    if type(node) is not cst.Name:
        return None
    for ancestor in reversed(ctx.ancestors):
        if type(ancestor) in flow.NESTED_SCOPES:
            return None
        if type(ancestor) is cst.For and type(ancestor.target) is cst.Name and ancestor.target.value == node.value:
            return ancestor.iter
    return None


def _passed_for(ctx: FileContext, node: cst.CSTNode) -> list[tuple[cst.BaseExpression, Scope]]:
    """What the module's calls pass for the parameter `node` names; none for other names."""
    module_flow = ctx.flow
    if module_flow is None or type(node) is not cst.Name:
        return []
    function = module_flow.resolver.parameter_of(node)
    return (module_flow.passed_arguments(function, node.value) or []) if function is not None else []


def _opaque_call(ctx: FileContext, node: cst.CSTNode) -> bool:
    """A call of the program's own (no import resolves it): what it returns is known by the
    name it is given (`fg_mask, rel = self.get_geometry_constraint(...)` in YOLOX)."""
    return type(node) is cst.Call and not ctx.qualified_names(node.func)


def _torch_keywords(call: cst.Call) -> bool:
    """A call given `dim=` or `keepdim=`."""
    return any(arg.keyword is not None and arg.keyword.value in ("dim", "keepdim") for arg in call.args)


def _named_mask(node: cst.CSTNode) -> bool:
    """A name or attribute called a mask whose values the module does not show (a parameter,
    `self.metadata.to_cache_mask`): `valid_mask`, `text_mask`. An index tensor is named for
    its indices; what is called a mask and indexes a tensor selects by True values."""
    name = node.value if type(node) is cst.Name else node.attr.value if type(node) is cst.Attribute else ""
    return _MASK_NAME.search(name) is not None


def _tested_as_bool(ctx: FileContext, node: cst.CSTNode) -> bool:
    """A name whose function asks whether it holds bools (segment-anything's `MaskData.filter`:
    `elif isinstance(v, list) and keep.dtype == torch.bool:`): its callers pass masks."""
    function = flow.enclosing_function(ctx.ancestors)
    if type(node) is not cst.Name or function is None or ctx.flow is None:
        return False
    return node.value in ctx.flow.tested_as_bool(function, ctx.source)


def _moved(ctx: FileContext, node: cst.CSTNode) -> bool:
    """`.to(device)`, `.cuda()`, `.cpu()`: the same values on another device, no dtype given."""
    if type(node) is not cst.Call or patterns.method_name(node) not in ("to", "cuda", "cpu") or ctx.flow is None:
        return False
    return not any(
        (arg.keyword is not None and arg.keyword.value == "dtype") or ctx.flow.is_dtype(arg.value) for arg in node.args
    )


def _of_bool_dtype(ctx: FileContext, node: cst.CSTNode) -> bool:
    """A call given `dtype=torch.bool`, or `.to(torch.bool)`: a tensor of bools."""
    if type(node) is not cst.Call:
        return False
    given = [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "dtype"]
    if patterns.method_name(node) == "to":
        given += [arg.value for arg in node.args[:1] if arg.keyword is None]
    return any("torch.bool" in ctx.qualified_names(value) for value in given)


def controlling_part(ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """The `if`/`while`/ternary/`assert` test or slice bound that `node` belongs to, with the
    statement or slice holding it.

    PC504 and PC505 own the host syncs that decide control flow or slice lengths; PC503 asks
    this to leave those to them."""
    child = node
    for parent in reversed(ancestors):
        if type(parent) in (cst.If, cst.While, cst.IfExp, cst.Assert) and parent.test is child:
            return parent, child
        if type(parent) is cst.Slice and any(child is bound for bound in (parent.lower, parent.upper, parent.step)):
            return parent, child
        if isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return None
        child = parent
    return None


DATALOADERS = flow.DATALOADERS


# --- files that use torch ----------------------------------------------------------------------


def _is_torch_module(dotted: str | None) -> bool:
    return dotted is not None and (dotted == "torch" or dotted.startswith("torch."))


class TensorRule(Rule):
    """A rule that matches tensor methods or operators by spelling. It reports only in files that
    import torch: a module that never does (numpy data transforms, pandas scripts) has no tensors
    of its own, and `arr[arr > 0]` or `df.col.unique()` there are not torch."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._imports_torch = False

    def visit_Import(self, node: cst.Import) -> None:
        if any(_is_torch_module(get_full_name_for_node(alias.name)) for alias in node.names):
            self._imports_torch = True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not node.relative and node.module is not None and _is_torch_module(get_full_name_for_node(node.module)):
            self._imports_torch = True

    def leave_Module(self, node: cst.Module) -> None:
        if not self._imports_torch:
            self.reports.clear()


class StepRule(TensorRule):
    """A TensorRule about what runs once per step: in forward(), in a step loop, or in a function
    of the module called from one of those (`run_step()`, `log_losses()`). Whether a function is
    called every step is known only once the walk has seen its callers, so reports in functions
    wait for the end of the module, and so may the test that decides them.

    A step loop that calls a function of another module of the repository
    (`utils.clip_gradients(model)`, `metric_logger.update(loss=loss)`) records it (a project
    fact); the second pass reports what that function does every step, and only that.

    A rule about shapes (`every_n_steps`) counts what runs under `if step % N == 0:` too: a
    host sync read back every N steps is the remedy, but a new shape every N steps compiles a
    new graph each time (gaussian-splatting's densification), and what it resizes, every step
    after."""

    every_n_steps: ClassVar[bool] = False
    # Whether a function that reads back what its caller gives where it is a tensor (`if
    # isinstance(v, torch.Tensor): v = v.item()`) is recorded (TENSOR_READER), and the calls of
    # another module's step loops that give it a tensor are reported in the second pass.
    reads_given_tensors: ClassVar[bool] = False
    # a helper's hazard waits for the step loops of other files, whatever words its file holds
    walks_every_file = True

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._in_functions: list[_InFunction] = []
        self._step_calls: list[_CallSite] = []  # calls of other modules' functions, for `note_step_call`
        self._tensors_given: dict[tuple[int, str], bool] = {}  # (function, name): see `_given_tensors`
        self._callees: dict[
            int, list[str]
        ] = {}  # call: see `_local_callees`, asked for step calls and tensor arguments
        self._receivers: dict[int, set[str]] = {}  # receiver: see `_receiver_classes`
        self._pending: set[str] = set()  # what `_note_pending` recorded

    @classmethod
    def project_triggers(cls, known: project.Project) -> tuple[bytes, ...]:
        """The functions another file's step loop calls, and those another file passes tensors;
        and the names of those that read back a given tensor (`reads_given_tensors`)."""
        return known.step_callee_triggers + (known.tensor_reader_triggers if cls.reads_given_tensors else ())

    @cached_property
    def _retyped(self) -> bool:
        """In the second pass, whether other modules pass tensors to the module's functions:
        then its own step loops are judged again, knowing those parameters hold tensors."""
        return self.ctx.project.complete and bool(self.ctx.project.tensor_parameters_in(self.ctx.module.name))

    def step_context(self, ancestors: Sequence[cst.CSTNode]) -> str | cst.FunctionDef | None:
        """forward() or the step loop the node runs in; else the function it is directly in,
        which `report_in_step` asks about at the end of the module; None off the step path,
        and in the second pass wherever the module itself runs steps (the first pass said)."""
        module_flow = self.ctx.flow
        if module_flow is None or module_flow.off_the_step_path(ancestors, periodic_exempts=not self.every_n_steps):
            return None
        local = module_flow.step_context(ancestors)
        if local is not None:
            return None if self.ctx.project.complete and not self._retyped else local
        return flow.enclosing_function(ancestors)

    def note_step_call(self, call: cst.Call) -> None:
        """In the first pass, note a call of another module's function (or a method of its
        class); the end of the module records it where it runs every step (in a step loop,
        forward(), or a function called from those), once the methods a loop calls are known."""
        module_flow = self.ctx.flow
        if self.ctx.project.complete or module_flow is None or not self.ctx.project.local_packages:
            return
        ancestors = self.ctx.ancestors
        function = flow.enclosing_function(ancestors)
        if function is not None and function.name.value == "__init__":
            return  # a constructor builds the model: no step
        if function is None and not any(type(node) in (cst.For, cst.While) for node in ancestors):
            return
        own = self.ctx.module.name + "."
        callees = [callee for callee in self._local_callees(call, function, ancestors) if not callee.startswith(own)]
        if not callees:
            callees = self._own_method_in_loop(call, function, ancestors)
        if not callees:
            callees = self._unresolved_method(call, function, ancestors)
        if not callees or module_flow.off_the_step_path(ancestors, periodic_exempts=False):
            return  # the callees first: most calls have none, and the path is the dearer question
        periodic = module_flow.off_the_step_path(ancestors)  # under `if step % N == 0:`
        for callee in callees:  # `model.forward(...)` where `model` may be a Transformer or a Mamba
            site = _CallSite(callee, call, function, None, tuple(ancestors), module_flow.scope, periodic)
            self._step_calls.append(site)

    def note_property_read(self, node: cst.Attribute) -> None:
        """In the first pass, note a read of an attribute of another module's class instance
        (efficientvit's `train_loss.avg`, an `AverageMeter` property that calls `.item()`): a
        property runs like a call, every step where the read is in a step loop. The record
        names the property's getter (`...AverageMeter.avg.fget`), which only a method under
        `@property` answers to: a method read without a call (`plotter = builder.plot`) runs
        where it is called, not where it is read."""
        module_flow = self.ctx.flow
        known = self.ctx.project
        if known.complete or module_flow is None or not known.local_packages or not flow.reads(node, self.ctx.parent):
            return
        ancestors = self.ctx.ancestors
        function = flow.enclosing_function(ancestors)
        if function is None or function.name.value == "__init__" or _is_own(node.value):
            return
        own = self.ctx.module.name + "."
        classes = {self.ctx.module.absolute(name) for name in self._receiver_classes(node.value, function, ancestors)}
        callees = sorted(
            f"{name}.{node.attr.value}{project.PROPERTY_GETTER}"
            for name in classes
            if name.rpartition(".")[2][:1].isupper() and known.is_local(name) and not name.startswith(own)
        )
        if not callees or module_flow.off_the_step_path(ancestors, periodic_exempts=False):
            return
        periodic = module_flow.off_the_step_path(ancestors)
        tensors = "yes" if self._given_tensors(node.value, function) else "no"
        for callee in callees:
            self._step_calls.append(
                _CallSite(callee, node, function, tensors, tuple(ancestors), module_flow.scope, periodic)
            )

    def _given_tensors(self, receiver: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        """Whether the function hands the object a tensor through a method (`train_loss.update(loss)`):
        what its properties then read may be tensors."""
        if type(receiver) is not cst.Name:
            return False
        key = (id(function), receiver.value)
        if key not in self._tensors_given:
            self._tensors_given[key] = any(
                type(node) is cst.Call
                and type(node.func) is cst.Attribute
                and type(node.func.value) is cst.Name
                and node.func.value.value == receiver.value
                and any(self._may_pass_tensor(arg) for arg in node.args)
                for node in descendants(function.body)
            )
        return self._tensors_given[key]

    def _own_method_in_loop(
        self, call: cst.Call, function: cst.FunctionDef | None, ancestors: Sequence[cst.CSTNode]
    ) -> list[str]:
        """`pkg.base.Solver.run_step` for `self.run_step(...)` in a step loop of `Solver`: a
        subclass in another module may override it (audiocraft's MusicGenSolver), and its hazards
        then run every step of this loop."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        owner = module_flow.owner_class(function) if function is not None else None
        if owner is None or not flow.is_self_attribute(call.func) or module_flow.step_loop(ancestors) is None:
            return []
        return [f"{self.ctx.module.name}.{owner}.{call.func.attr.value}"]  # type: ignore[union-attr]

    def _unresolved_method(
        self, call: cst.Call, function: cst.FunctionDef | None, ancestors: Sequence[cst.CSTNode]
    ) -> list[str]:
        """`*.detect_objects` for `model.detect_objects(...)` where nothing tells what `model`
        holds (the SSD tutorial's `model = checkpoint["model"]`): the project links it to the
        repository's one method of that name whose hazards wait for a caller
        (`Project.step_caller`). Not the names torch's, Python's and the usual loggers' objects
        answer to (`optimizer.step()`, `meter.update(...)`), which such a receiver more likely is."""
        func = call.func
        if type(func) is not cst.Attribute or self.ctx.qualified_names(func):
            return []
        method = func.attr.value
        if method.startswith("_") or method in _COMMON_METHODS or _is_own(func.value):
            return []  # `self.initialize(x)`: the class's own, or a base's (`_inherited`)
        if self._receiver_classes(func.value, function, ancestors):
            return []  # a class of another package, or one of this module's
        return [f"{project.ANY_CLASS}.{method}"]

    def _called_names(self, func: cst.BaseExpression) -> frozenset[str]:
        """What a call's function resolves to; for a name bound nowhere in a module that
        star-imports the repository's modules, each it may come from (`maximum_path` after
        StyleTTS2's `from utils import *`)."""
        names = self.ctx.qualified_names(func)
        if not names and type(func) is cst.Name and self.ctx.resolver is not None:
            return frozenset(self.ctx.resolver.star_sources(func.value))
        return names

    def note_tensor_arguments(self, call: cst.Call) -> None:
        """In the first pass, record what a call of another module's function passes it as a
        tensor, or as what one of the repository's functions returns (a tensor where that
        function's module says so): the second pass judges the callee's loops knowing it."""
        known = self.ctx.project
        if known.complete or not known.local_packages or type(call.func) not in (cst.Name, cst.Attribute):
            return
        names = {self.ctx.module.absolute(name) for name in self._called_names(call.func)}
        callees = sorted(
            name
            for name in names
            if known.is_local(name)
            and name.rpartition(".")[0] not in ("", self.ctx.module.name)
            and not patterns.class_like(name)
        )
        called_object = type(call.func) is cst.Name or flow.is_self_attribute(call.func)
        if (
            not callees and not names and called_object
        ):  # a model of another module called: `slmadv(...)` runs its `forward`
            ancestors = self.ctx.ancestors
            own = self.ctx.module.name + "."
            called = self._local_callees(call, flow.enclosing_function(ancestors), ancestors)
            callees = [
                name.removesuffix("__call__") + "forward"
                for name in called
                if name.endswith(".__call__") and not name.startswith(own)
            ]
        if not callees:
            return
        position: int | None = 0
        for arg in call.args:
            if arg.star == "*":
                position = None  # what follows has unknown positions
            if arg.star:
                continue
            key = arg.keyword.value if arg.keyword is not None else None if position is None else str(position)
            if arg.keyword is None and position is not None:
                position += 1
            origin = self._origin(arg.value) if key is not None else None
            for callee in callees if origin is not None else ():  # each it may be (star imports)
                self.record(project.TENSOR_ARGUMENT, callee, call, parameter=key, origin=origin)

    def _origin(self, value: cst.BaseExpression) -> str | None:
        """Where an argument comes from: the empty string for a tensor, the qualified name of
        the repository's function whose result it is (`sigmas` after `sigmas =
        K.sampling.get_sigmas_karras(...)`), None for anything else."""
        if tensor_valued(self.ctx, value):
            return ""
        made = self.ctx.assigned_value(value) if type(value) is cst.Name else value
        if type(made) is not cst.Call:
            return None
        names = {self.ctx.module.absolute(name) for name in self.ctx.qualified_names(made.func)}
        local = sorted(name for name in names if "." in name and self.ctx.project.is_local(name))
        return local[0] if local else None

    def record_module_facts(self, module: cst.Module) -> None:
        """In the first pass, record what other modules' step code needs of this one's top
        level: the functions whose every return is a tensor (k-diffusion's `get_sigmas_karras`:
        what another module passes on of their results), and the repository's classes each
        class derives from (audiocraft's MagnetSolver from MusicGenSolver, itself from
        base.StandardSolver: a base's step loop that calls `self.run_step(...)` runs the
        override of every subclass), the module's own too."""
        module_flow = self.ctx.flow
        if self.ctx.project.complete or not self.ctx.project.local_packages or module_flow is None:
            return
        own = {defined.name.value for defined in module.body if type(defined) is cst.ClassDef}
        for defined in module.body:
            if type(defined) is cst.FunctionDef:
                returned = module_flow.returns_of(defined)
                if returned and all(
                    module_flow.in_scope(scope, partial(tensor_valued, self.ctx, value)) for value, scope in returned
                ):
                    self.record(project.TENSOR_RETURN, f"{self.ctx.module.name}.{defined.name.value}", UNPLACED)
                self._record_step_parameters(defined)
            elif type(defined) is cst.ClassDef:
                bases = {self.ctx.module.absolute(base) for base in module_flow.class_bases(defined.name.value)}
                bases |= {  # one of the module's own (LAVIS' `AOKVQATask(VQATask)`), by its module's name
                    f"{self.ctx.module.name}.{base.value.value}"
                    for base in defined.bases
                    if type(base.value) is cst.Name and base.value.value in own
                }
                for base in sorted(base for base in bases if "." in base and self.ctx.project.is_local(base)):
                    self.record(project.SUBCLASS, f"{self.ctx.module.name}.{defined.name.value}", UNPLACED, base=base)
            elif type(defined) is cst.SimpleStatementLine:
                self._record_namespace_members(defined, module)
        self._record_handed_functions()

    def _record_namespace_members(self, line: cst.SimpleStatementLine, module: cst.Module) -> None:
        """`flash_attn = SimpleNamespace(flash_attn_with_kvcache=flash_attn_with_kvcache)`: each
        member that holds one of the module's functions (NAMESPACE_MEMBER)."""
        functions = {statement.name.value for statement in module.body if type(statement) is cst.FunctionDef}
        for statement in line.body:
            if not (type(statement) is cst.Assign and len(statement.targets) == 1):
                continue
            target, value = statement.targets[0].target, statement.value
            if type(target) is not cst.Name or type(value) is not cst.Call:
                continue
            if "types.SimpleNamespace" not in self.ctx.qualified_names(value.func):
                continue
            own = f"{self.ctx.module.name}."
            for arg in value.args:
                if arg.keyword is not None and type(arg.value) is cst.Name and arg.value.value in functions:
                    name = f"{own}{target.value}.{arg.keyword.value}"
                    self.record(project.NAMESPACE_MEMBER, name, UNPLACED, target=f"{own}{arg.value.value}")

    def _record_step_parameters(self, function: cst.FunctionDef) -> None:
        """The parameters the function hands to a call made every step (`Flow.step_parameters`)."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        handed = module_flow.step_parameters(function)
        positional = [param.name.value for param in (*function.params.posonly_params, *function.params.params)]
        for parameter, where in sorted(handed.items()):
            position = str(positional.index(parameter)) if parameter in positional else "-1"
            for name in defined_names(self.ctx, function):
                self.record(
                    project.STEP_PARAMETER,
                    name,
                    UNPLACED,
                    position=position,
                    keyword=parameter,
                    where=f"{where} in {self.ctx.path}",
                )

    def _record_handed_functions(self) -> None:
        """The module's functions it hands to another module's function of the repository
        (`pretrain(..., forward_step)`): where that one runs what it is given every step, so do
        they (`project.handed_step_calls`)."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        own = self.ctx.module.name + "."
        for function, call, scope, position, keyword in module_flow.handed_functions():
            callees = module_flow.in_scope(scope, partial(self.ctx.qualified_names, call.func))
            for callee in sorted(callees):
                if self.ctx.project.is_local(callee) and not callee.startswith(own):
                    self.record(
                        project.HANDED_FUNCTION,
                        f"{self.ctx.module.name}.{function.name.value}",
                        UNPLACED,
                        callee=callee,
                        position=str(position),
                        keyword=keyword,
                    )

    def _passes_tensor(self, call: cst.CSTNode) -> bool:
        return type(call) is cst.Call and any(self._may_pass_tensor(arg) for arg in call.args)

    def _may_pass_tensor(self, arg: cst.Arg) -> bool:
        """An argument that may be a tensor; for `**losses`, a dict built by a comprehension
        whose values are not read back to numbers (detr: `{k: v * weight_dict[k] for ...}`)."""
        if arg.star != "**":
            return self._may_be_tensor(arg.value)
        value = arg.value
        if type(value) is cst.Name:
            value = self.ctx.assigned_value(value) or value
        if type(value) is not cst.DictComp:
            return False
        return not self._read_back_number(value.value)

    def _read_back_number(self, item: cst.BaseExpression) -> bool:
        """`v.item()`, `float(v)`, `int(v)`, or one of those in arithmetic with what is no tensor
        (dinov2's `v.item() / distributed.get_global_size()`): a Python number."""
        if type(item) is cst.BinaryOperation:
            return self._read_back_number(item.left) and not tensor_valued(self.ctx, item.right)
        return type(item) is cst.Call and (
            patterns.method_name(item) == "item" or patterns.dotted(item.func) in ("float", "int")
        )

    def _may_be_tensor(self, value: cst.BaseExpression, seen: frozenset[str] = frozenset()) -> bool:
        """A tensor (or what a tensor method returns: `(a == b).float().mean()`), or a name
        bound to one on some path (`acc = None` on another), or a choice of one. `seen`: the
        names being looked through."""
        if type(value) is cst.Name:
            if value.value in seen:
                return False
            values, seen = self.ctx.values_before_updates(value), seen | {value.value}
            return any(self._may_be_tensor(bound, seen) for bound in values)
        if type(value) is cst.IfExp:
            return self._may_be_tensor(value.body, seen) or self._may_be_tensor(value.orelse, seen)
        return tensor_valued(self.ctx, value) or tensor_method(self.ctx, value, _TENSOR_RESULTS)

    def _local_callees(
        self, call: cst.Call, function: cst.FunctionDef | None, ancestors: Sequence[cst.CSTNode]
    ) -> list[str]:
        found = self._callees.get(id(call))
        if found is None:
            found = self._callees[id(call)] = self._find_local_callees(call, function, ancestors)
        return found

    def _find_local_callees(
        self, call: cst.Call, function: cst.FunctionDef | None, ancestors: Sequence[cst.CSTNode]
    ) -> list[str]:
        """`pkg.utils.clip_gradients` for `utils.clip_gradients(...)`, `pkg.utils.Logger.update`
        for `logger.update(...)` after `logger = utils.Logger()`, in a function given
        `logger: Logger`, or for `self.logger.update(...)` after `self.logger = Logger()`
        (`given or Logger()`, or under `isinstance(self.logger, Logger)`), and
        `pkg.loss.Loss.__call__` for `loss_fn(...)` after `loss_fn = Loss()`, and a method a
        base class of another module gives (`self.prepare_inputs(...)`): names of the
        repository, each it may be."""
        func, known, module_flow = call.func, self.ctx.project, self.ctx.flow
        if type(func) not in (cst.Name, cst.Attribute) or module_flow is None:
            return []
        names = {self.ctx.module.absolute(name) for name in self._called_names(func)}
        if not names and flow.is_self_attribute(func) and not module_flow.self_attribute_values(func.attr.value):
            names = self._inherited(func.attr.value, ancestors)  # type: ignore[union-attr]
        if not names:  # a method of an object, or calling the object: `loss_fn(pred, y)` runs `__call__`
            called = type(func) is cst.Name or flow.is_self_attribute(func)
            receiver, method = (func, "__call__") if called else (func.value, func.attr.value)  # type: ignore[union-attr]
            classes = {self.ctx.module.absolute(name) for name in self._receiver_classes(receiver, function, ancestors)}
            names = {f"{name}.{method}" for name in classes if name.rpartition(".")[2][:1].isupper()}
        return sorted(name for name in names if "." in name and known.is_local(name))

    def _inherited(self, method: str, ancestors: Sequence[cst.CSTNode]) -> set[str]:
        """`pkg.arch.MetaForCausalLM.prepare_inputs` for `self.prepare_inputs(...)` in a class
        that does not define it but derives from a class of another module of the repository
        (LLaVA's models take their forward's helpers from a mixin); empty elsewhere."""
        owner = next((node for node in reversed(ancestors) if type(node) is cst.ClassDef), None)
        if owner is None or any(
            type(statement) is cst.FunctionDef and statement.name.value == method for statement in owner.body.body
        ):
            return set()
        bases = {
            self.ctx.module.absolute(name) for base in owner.bases for name in self.ctx.qualified_names(base.value)
        }
        own = self.ctx.module.name + "."
        return {f"{base}.{method}" for base in bases if self.ctx.project.is_local(base) and not base.startswith(own)}

    def _receiver_classes(
        self, receiver: cst.BaseExpression, function: cst.FunctionDef | None, ancestors: Sequence[cst.CSTNode]
    ) -> set[str]:
        """The qualified names of the classes whose instance `receiver` may hold (for a name, as
        any of its `=` values makes, whatever else binds it); found once per receiver, which a
        call's callees and its method's owner both ask about."""
        found = self._receivers.get(id(receiver))
        if found is None:
            found = self._receivers[id(receiver)] = self._find_receiver_classes(receiver, function, ancestors)
        return found

    def _find_receiver_classes(
        self, receiver: cst.BaseExpression, function: cst.FunctionDef | None, ancestors: Sequence[cst.CSTNode]
    ) -> set[str]:
        module_flow = self.ctx.flow
        assert module_flow is not None
        found: set[str] = set()
        if type(receiver) is cst.Name:
            made = module_flow.resolver.explicit_values(receiver)
            found |= {name for value in made for name in self._classes_made(value)}
            if (kind := _annotation(function, receiver.value)) is not None:  # `model = model.eval()` after it
                found |= _annotated_classes(self.ctx, kind)
        elif flow.is_self_attribute(receiver):
            assert type(receiver) is cst.Attribute
            for value, scope in module_flow.self_attribute_values(receiver.attr.value):
                found |= module_flow.in_scope(scope, partial(self._classes_made, value))
        else:
            return found
        return found | self._narrowed(receiver, ancestors)

    def _classes_made(self, value: cst.BaseExpression, depth: int = 0) -> set[str]:
        """The classes `Logger(...)`, `given or Logger(...)`, `A() if c else B()` instantiate,
        also through a method that returns its module (`Tacotron2(hparams).cuda()`) and what a
        function of the module returns (tacotron2's `model = load_model(hparams)`)."""
        if type(value) is cst.Call:
            # A function of the repository builds what its arguments name: stylegan3's
            # `loss = dnnlib.util.construct_class_by_name(**loss_kwargs)` holds no class it names.
            made = {
                name
                for name in self.ctx.qualified_names(value.func)
                if not name.rpartition(".")[2][:1].islower()
                or not self.ctx.project.is_local(self.ctx.module.absolute(name))
            }
            module_flow = self.ctx.flow
            if made or depth >= 3 or module_flow is None:
                return made
            if type(value.func) is cst.Attribute and value.func.attr.value in patterns.RETURN_THE_RECEIVER:
                return self._classes_made(value.func.value, depth + 1)
            return {
                name
                for returned, scope in module_flow.returned_values(value)
                for name in module_flow.in_scope(scope, partial(self._classes_returned, returned, depth + 1))
            }
        if type(value) is cst.BooleanOperation and depth < 3:
            return self._classes_made(value.left, depth + 1) | self._classes_made(value.right, depth + 1)
        if type(value) is cst.IfExp and depth < 3:
            return self._classes_made(value.body, depth + 1) | self._classes_made(value.orelse, depth + 1)
        return set()

    def _classes_returned(self, returned: cst.BaseExpression, depth: int) -> set[str]:
        """The classes a returned value may be an instance of: for a name, each value `=` gives it
        in its scope."""
        if type(returned) is not cst.Name:
            return self._classes_made(returned, depth)
        module_flow = self.ctx.flow
        assert module_flow is not None
        values = module_flow.resolver.explicit_values(returned)
        return {name for value in values for name in self._classes_made(value, depth)}

    def _narrowed(self, receiver: cst.BaseExpression, ancestors: Sequence[cst.CSTNode]) -> set[str]:
        """The classes an enclosing `if isinstance(receiver, C):` narrows the receiver to."""
        spelled = None  # asked only under an `isinstance` test: most calls have none around them
        found: set[str] = set()
        for node, child in zip(ancestors, ancestors[1:]):
            test = node.test if type(node) is cst.If and child is node.body else None
            if not (type(test) is cst.Call and type(test.func) is cst.Name and test.func.value == "isinstance"):
                continue
            subject, kind = patterns.positional(test, 0), patterns.positional(test, 1)
            spelled = spelled or get_full_name_for_node(receiver)
            if subject is not None and kind is not None and get_full_name_for_node(subject.value) == spelled:
                found |= self.ctx.qualified_names(kind.value)
        return found

    def report_in_step(
        self, node: cst.CSTNode, where: str | cst.FunctionDef, holds: Callable[[], bool] | None = None, **fields: object
    ) -> None:
        """Report `node` in the step context `where` if `holds()`: now, or at the end of the
        module if the function it is in turns out to be called every step (`holds` is then
        asked in the scope it was made in: most functions are not, so most tests never run)."""
        if isinstance(where, str):
            function = flow.enclosing_function(self.ctx.ancestors)
            if function is not None and self.handed_off(where, fields):
                # judged again at the end: a loop that samples through a function defined below
                # it decodes (mistral-inference's `next_token = sample(...)`), and keeps nothing
                assert self.ctx.flow is not None
                self._in_functions.append(
                    _InFunction(function, (), node, self.ctx.chain(node), fields, holds, self.ctx.flow.scope)
                )
            elif holds is None or holds():
                severity = self._severity_in_branch(self.ctx.chain(node), node)
                self.report(node, **self._judged(where, severity, fields), where=where, **fields)
            return
        module_flow = self.ctx.flow
        assert module_flow is not None
        chain = self.ctx.chain(node)
        gates = flow.parameter_gates(chain, where)
        self._in_functions.append(_InFunction(where, gates, node, chain, fields, holds, module_flow.scope))

    def report_by_reach(
        self,
        node: cst.CSTNode,
        severity: dict[str, Severity] | None = None,
        holds: Callable[[], bool] | None = None,
        static_off_step: bool = False,
        **fields: object,
    ) -> None:
        """Report `node` at the rule's severity where it runs every step (see `report_in_step`),
        and as info elsewhere: what no step reaches (plots, metrics, data preparation,
        exports) runs on host data or once, where a dynamic shape costs one compilation at
        most. The message's `{reach}` says which. `severity`: the report's own, if not the
        rule's; `holds`: a test asked at the end of the module (in a function only);
        `static_off_step`: for a tensor known to be on the device, a warning where no step
        reaches it on the targets that compile only static shapes, as Trainium's compiler
        rejects a dynamic dimension however seldom the code runs."""
        module_flow = self.ctx.flow
        ancestors = self.ctx.ancestors
        if module_flow is None:
            return
        off_path = module_flow.off_the_step_path(ancestors, periodic_exempts=not self.every_n_steps)
        local = None if off_path else module_flow.step_context(ancestors)
        function = flow.enclosing_function(ancestors)
        if function is None or off_path or (local is not None and holds is None):
            if self.ctx.project.complete and not self._retyped:
                return  # the first pass reported it
            if holds is not None and not holds():
                return  # asked now: no step waits for the end of the module
            if local is not None:
                in_branch = self._severity_in_branch(self.ctx.chain(node), node, severity)
                self.report(node, severity=in_branch or severity, reach="", **fields)
            else:
                off_step, reach = self._off_step(severity, static_off_step)
                self.report(node, severity=off_step, reach=reach, **fields)
            return
        chain = self.ctx.chain(node)
        gates = () if local is not None else flow.parameter_gates(chain, function)
        fields = {**fields, "reach": ""}
        self._in_functions.append(
            _InFunction(
                function,
                gates,
                node,
                chain,
                fields,
                holds,
                module_flow.scope,
                info_off_step=True,
                severity=severity,
                local=local,
                static_off_step=static_off_step,
            )
        )

    def handed_off(self, root: str, fields: Mapping[str, object]) -> bool:
        """Whether a report whose step context is `root` ("a training loop", "forward()"...)
        hands its value to code outside torch, where the cost is the output's own: then info,
        with `hand_off_hint`. Never, unless a rule says otherwise."""
        return False

    hand_off_hint = ""

    def _judged(
        self, root: str, severity: dict[str, Severity] | None, fields: Mapping[str, object]
    ) -> dict[str, object]:
        """The severity (and hint) of a report in the step context `root`, also as the second
        pass spells another file's ("`f()`, called from a step loop, in pkg/run.py")."""
        root = root.rpartition("called from ")[2].split(" in ")[0].rstrip(",")
        if not self.handed_off(root, fields):
            return {"severity": severity}
        return {"severity": self._off_step_severity(severity), "hint": self.hand_off_hint}

    def _off_step_severity(self, severity: dict[str, Severity] | None = None) -> dict[str, Severity]:
        assert isinstance(self.severity, dict)
        return at_most_info(severity or self.severity)

    def _off_step(self, severity: dict[str, Severity] | None, static: bool) -> tuple[dict[str, Severity], str]:
        """The severity and the message's `{reach}` of a report no step reaches (see
        `report_by_reach`)."""
        levels = self._off_step_severity(severity)
        if not static:
            return levels, _OFF_STEP
        return {
            name: WARNING if level is not OFF and name in _STATIC_ONLY else level for name, level in levels.items()
        }, _OFF_STEP_STATIC

    def leave_Module(self, node: cst.Module) -> None:
        module_flow = self.ctx.flow
        for site in self._step_calls if module_flow is not None else ():
            where = module_flow.in_scope(site.scope, partial(module_flow.step_context, site.ancestors))
            periodic = site.periodic
            if where is None and site.function is not None:
                caller = module_flow.called_every_step(site.function)
                if caller is None:  # only every N steps, maybe: for the shape hazards
                    caller = module_flow.called_every_step(site.function, periodic_exempts=False)
                    periodic = True
                where = f"`{site.function.name.value}()`, called from {caller}," if caller else None
            if where is not None:
                where = f"{where} in {self.ctx.path}"
                host = module_flow.as_walked(site.ancestors, site.scope, partial(_host_keys, self.ctx, site.call))
                tensors = site.tensors
                if tensors is None:  # asked only of the calls that run every step
                    passes = module_flow.as_walked(site.ancestors, site.scope, partial(self._passes_tensor, site.call))
                    tensors = "yes" if passes else "no"
                self.record(
                    project.STEP_CALL,
                    site.callee,
                    UNPLACED,
                    where=where,
                    tensors=tensors,
                    host=" ".join(host),
                    periodic="yes" if periodic else "no",
                )
        for deferred in self._in_functions if module_flow is not None else ():
            # asked again now the module is known: the loop around it may call methods defined after it
            own = deferred.local or module_flow.in_scope(
                deferred.scope, partial(module_flow.step_context, deferred.chain)
            )
            caller = own or module_flow.called_every_step(
                deferred.function, deferred.gates, periodic_exempts=not self.every_n_steps
            )
            if self.ctx.project.complete and not (self._retyped and caller is not None):
                # gates stay unjudged: another file's call may well give the flag
                local = caller is not None or module_flow.runs_steps(deferred.function)
                caller = None if local else self._called_elsewhere(deferred)
                if caller is None:
                    continue
            elif caller is None:
                if not module_flow.runs_steps(deferred.function):
                    self._note_pending(deferred)
                if not deferred.info_off_step:
                    continue
            if deferred.holds is not None and not module_flow.in_scope(deferred.scope, deferred.holds):
                continue
            if caller is not None:
                where = own or f"`{deferred.function.name.value}()`, called from {caller},"
                severity = (
                    module_flow.in_scope(
                        deferred.scope,
                        partial(self._severity_in_branch, deferred.chain, deferred.node, deferred.severity),
                    )
                    or deferred.severity
                )
                report = self.report_here(
                    deferred.node,
                    **self._judged(own or caller, severity, deferred.fields),
                    chain=deferred.chain,
                    where=where,
                    **deferred.fields,
                )
                self.reports.append(report)
            else:
                severity, reach = self._off_step(deferred.severity, deferred.static_off_step)
                fields = {**deferred.fields, "reach": reach}
                report = self.report_here(deferred.node, severity=severity, chain=deferred.chain, **fields)
                self.reports.append(report)
        self._in_functions.clear()  # their tests hold the rule: let the file's tree go with it
        super().leave_Module(node)

    def _severity_in_branch(
        self, chain: Sequence[cst.CSTNode], node: cst.CSTNode, severity: dict[str, Severity] | None = None
    ) -> dict[str, Severity] | None:
        """Off for the targets that a branch for other devices, not CUDA, keeps the node from
        (`if mps:` where `mps = "mps" in device.type`); None (`severity`, else the rule's own)
        elsewhere."""
        module_flow = self.ctx.flow
        reach = module_flow.reach(chain, node) if module_flow is not None else flow.ANYWHERE
        if reach.includes("cuda"):
            return None  # everywhere, or in a CUDA branch that a port may open to the target
        assert isinstance(self.severity, dict)
        return {
            name: level if reach.includes(target_data.get(name).device_type) else OFF
            for name, level in (severity or self.severity).items()
        }

    def _note_pending(self, deferred: _InFunction) -> None:
        """In the first pass, record the names by which another file's step loop would run what
        waits here for a caller (the function, or one of the module's functions that calls
        it): the second pass reads the file again only where one does (`Project.pending_step_files`)."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        for function in (deferred.function, *module_flow.callers(deferred.function, past_steps=False)):
            for name in defined_names(self.ctx, function):
                if name not in self._pending:
                    self._pending.add(name)
                    self.record(project.STEP_PENDING, name, UNPLACED)
        if self.reads_given_tensors and self.reads_given(deferred.fields) and self._tensor_only(deferred.chain):
            for name in defined_names(self.ctx, deferred.function):
                self.record(
                    project.TENSOR_READER, name, deferred.node, chain=deferred.chain, read=str(deferred.fields["call"])
                )

    def reads_given(self, fields: Mapping[str, object]) -> bool:
        """Whether a waiting report (its fields) reads a value back (`reads_given_tensors`): its
        rule says."""
        return False

    def _called_elsewhere(self, deferred: _InFunction) -> str | None:
        """The step loop of another file that calls the function every step (second pass),
        directly or through functions of this module that call it (`optimize()` calls
        `self._norms()`); for what runs only `if isinstance(v, torch.Tensor):`, one whose call
        passes a tensor."""
        module_flow = self.ctx.flow
        assert module_flow is not None
        tensor_only = self._tensor_only(deferred.chain)
        for function in (deferred.function, *module_flow.callers(deferred.function, past_steps=False)):
            known = self.ctx.project
            where = next(
                filter(
                    None,
                    (
                        known.step_caller(name, tensor_only, self.every_n_steps)
                        for name in defined_names(self.ctx, function)
                    ),
                ),
                None,
            )
            if where is not None:
                return where if function is deferred.function else f"`{function.name.value}()`, called from {where}"
        return None

    @classmethod
    def in_second_pass(cls, known: project.Project, path: str, module: str) -> bool:
        """Over the files whose hazards wait for a step loop that another file runs, the
        modules where what another module passes tensors answers a question the first pass
        asked (`Project.passes_asked_tensors`), and the modules of a package that names such a
        function (`distributed.all_gather` may be `distributed.distributed`'s, re-exported)."""
        owners = known.tensor_parameter_owners
        return (
            path in known.pending_step_files
            or known.passes_asked_tensors(module)
            or module.rpartition(".")[0] in owners
            or (cls.reads_given_tensors and path in known.tensor_reader_callers)
        )

    def _tensor_only(self, chain: Sequence[cst.CSTNode]) -> bool:
        """Whether the node runs only `if isinstance(v, torch.Tensor):` where `v` is what the
        caller gives (MetricLogger.update's `for k, v in kwargs.items()`), not the object's
        own state (segment-anything's MaskData.filter over `self._stats.items()`)."""
        function = flow.enclosing_function(chain)
        for node, child in zip(chain, chain[1:]):
            test = node.test if type(node) is cst.If and child is node.body else None
            if type(test) is cst.Call and type(test.func) is cst.Name and test.func.value == "isinstance":
                kind, subject = patterns.positional(test, 1), patterns.positional(test, 0)
                if kind is not None and "torch.Tensor" in self.ctx.qualified_names(kind.value):
                    return function is None or subject is None or _given_by_caller(function, subject.value)
        return False


def _given_by_caller(function: cst.FunctionDef, subject: cst.BaseExpression) -> bool:
    """Whether a value is a parameter of the function (not `self`), or a name it binds from
    one (`for k, v in kwargs.items():`, `v = args[0]`); a value of another kind, maybe."""
    if type(subject) is not cst.Name:
        return True
    given = function.params
    stars = [each for each in (given.star_arg, given.star_kwarg) if type(each) is cst.Param]
    params = {param.name.value for param in (*given.posonly_params, *given.params, *given.kwonly_params, *stars)} - {
        "self",
        "cls",
    }
    if subject.value in params:
        return True
    for node in descendants(function.body, flow.NESTED_SCOPES):
        if type(node) is cst.For:
            target, source = node.target, node.iter
        elif type(node) is cst.Assign and len(node.targets) == 1:
            target, source = node.targets[0].target, node.value
        else:
            continue
        binds = any(type(each) is cst.Name and each.value == subject.value for each in (target, *descendants(target)))
        if binds and reads_names(source, params):
            return True
    return False


def _host_keys(ctx: FileContext, call: cst.Call | cst.Attribute) -> list[str]:
    """The positions and keywords of a call's arguments that are host data where the walk is."""
    keys, position = [], 0
    for arg in call.args if type(call) is cst.Call else ():
        if arg.star:
            break  # what follows has unknown positions
        if arg.keyword is None:
            position += 1
        if holds_host_data(ctx, arg.value, {}):
            keys.append(arg.keyword.value if arg.keyword is not None else str(position - 1))
    return keys


def holds_host_data(
    ctx: FileContext,
    node: cst.BaseExpression,
    bound: Mapping[str, cst.BaseExpression | None],
    seen: frozenset[str] = frozenset(),
) -> bool:
    """Whether an expression is host data where the walk is: a number or a string, a number
    read back (`loss.item()`), a tensor in host memory, or a list, tuple, dict or comprehension
    of those (torchvision's `res = {id: out for id, out in zip(ids, outputs)}` after `outputs =
    [{k: v.to(cpu_device) for k, v in t.items()} for t in outputs]`). `bound`: what the
    comprehensions around `node` take the names they bind from; `seen`: the names being
    looked through."""
    if type(node) is cst.Name and node.value in bound:
        source = bound[node.value]
        return source is not None and holds_host_data(ctx, source, {}, seen)
    if type(node) is cst.Name:
        if node.value in seen or len(seen) > _DEPTH:
            return False
        values, seen = values_reaching(ctx, node), seen | {node.value}
        return bool(values) and all(holds_host_data(ctx, value, {}, seen) for value in values)
    if type(node) in (cst.List, cst.Tuple, cst.Dict):
        elements = node.elements  # type: ignore[attr-defined]
        return all(holds_host_data(ctx, element.value, bound, seen) for element in elements)
    if isinstance(node, cst.BaseComp):
        inner: cst.CompFor | None = node.for_in
        bound = {**bound}
        while inner is not None:
            for name in flow.target_names(inner.target):
                bound[name] = flow.item_source(inner.target, inner.iter, name)
            inner = inner.inner_for_in
        item = node.value if type(node) is cst.DictComp else node.elt  # type: ignore[attr-defined]
        return holds_host_data(ctx, item, bound, seen)
    if type(node) in (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString):
        return True
    if type(node) is cst.Call and (
        patterns.method_name(node) in ("item", "tolist") or patterns.dotted(node.func) in ("float", "int")
    ):
        return True
    return in_host_memory(ctx, node)  # a name a comprehension binds has no home of its own: `v.cpu()` has


def _annotation(function: cst.FunctionDef | None, name: str) -> cst.BaseExpression | None:
    """The annotation of `function`'s parameter `name` (`trainer: Trainer`)."""
    if function is None:
        return None
    params = function.params
    every = (*params.posonly_params, *params.params, *params.kwonly_params)
    param = next((each for each in every if each.name.value == name), None)
    return param.annotation.annotation if param is not None and param.annotation is not None else None


@dataclass(frozen=True)
class _CallSite:
    """A call of another module's function or method, to record if it runs every step."""

    callee: str  # its qualified name
    call: cst.Call | cst.Attribute  # an attribute read runs a property
    function: cst.FunctionDef | None  # the function it is made in
    tensors: str | None  # "yes" where it may pass a tensor; None: its arguments say, once it is recorded
    ancestors: tuple[cst.CSTNode, ...]
    scope: Scope
    periodic: bool  # made under `if step % N == 0:`: every N steps only


@dataclass(frozen=True)
class _InFunction:
    """A report that waits for the end of the module: whether its function runs every step."""

    function: cst.FunctionDef
    gates: tuple[str, ...]  # parameters a call must give for it to run (flow.parameter_gates)
    node: cst.CSTNode
    chain: tuple[cst.CSTNode, ...]
    fields: dict[str, object]
    holds: Callable[[], bool] | None
    scope: Scope
    info_off_step: bool = False  # reported as info where no step reaches it (`report_by_reach`)
    severity: dict[str, Severity] | None = None  # the report's own, if not the rule's
    local: str | None = None  # the step context the node is in, where only `holds` was left to ask
    static_off_step: bool = False  # a warning off the step path where only static shapes compile


_INT_ANNOTATIONS = frozenset({"int", "Optional[int]", "int | None", "typing.Optional[int]"})


def integer_positions(function: cst.FunctionDef, *, by_default: bool = True) -> set[str]:
    """The parameters of `function` that hold an integer position: annotated `int` (or
    `Optional[int]`), with an integer default (unless not `by_default`: BERT's
    `past_key_values_length=0`, which an encoder never moves), or where the function writes a
    tensor from there on (`cache[:, p : p + n] = x`)."""
    params = (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)
    found = set()
    for param in params:
        annotation = param.annotation.annotation if param.annotation is not None else None
        spelled = cst.Module([]).code_for_node(annotation) if annotation is not None else ""
        if spelled in _INT_ANNOTATIONS or (by_default and type(param.default) is cst.Integer):
            found.add(param.name.value)
    written = {
        part.slice.lower.value
        for node in descendants(function.body, flow.NESTED_SCOPES)
        if type(node) is cst.AssignTarget and type(node.target) is cst.Subscript
        for part in node.target.slice
        if type(part.slice) is cst.Slice and type(part.slice.lower) is cst.Name
    }
    return found | (written & {param.name.value for param in params})


# What makes a tensor of a size it is given (or pads or resizes one by it, given first), and
# what a size may sit in on the way there.
_RESIZED = frozenset({"torch.nn.functional.pad", "torch.nn.functional.interpolate"})
_SIZE_TAKERS = _RESIZED | {f"torch.{name}" for name in ("arange", "zeros", "ones", "empty", "full", "rand", "randn")}
_RESIZES = frozenset({"expand", "view", "reshape", "repeat", "new_zeros", "new_ones", "new_empty", "new_full"})
_WITHIN_A_SIZE = (cst.Arg, cst.Tuple, cst.List, cst.Element, cst.BinaryOperation, cst.Index, cst.SubscriptElement)


def used_as_size(ctx: FileContext, function: cst.FunctionDef, name: str) -> bool:
    """Whether the function sizes something by the name: a range, a new tensor, a padding, a
    view or an expansion (`torch.arange(0, max_len)`, `F.pad(y, (0, y_len - n))`,
    `.expand(batch_size, max_len)`), a slice."""
    for reference, path in flow.references(function, name) or ():
        child: cst.CSTNode = reference
        for parent in reversed(path):
            if type(parent) is cst.Slice:
                return True
            if type(parent) is cst.Call and child is not parent.func:
                names = ctx.qualified_names(parent.func)
                resized = bool(names & _RESIZED) and bool(parent.args) and child is parent.args[0]  # the tensor
                if (names & _SIZE_TAKERS and not resized) or (not names and patterns.method_name(parent) in _RESIZES):
                    return True
                break  # given to another call: that one's use
            if not isinstance(parent, _WITHIN_A_SIZE):
                break
            child = parent
    return False


def filling_in(ancestors: Sequence[cst.CSTNode]) -> tuple[cst.FunctionDef, str] | None:
    """The function and its parameter whose fill-in, where a call leaves the parameter out, the
    node at the end of `ancestors` is part of (see `resolve.filled_when_left_out`): it runs
    only for such calls."""
    function = flow.enclosing_function(ancestors)
    body = function.body if function is not None else None
    index = next((i for i, node in enumerate(ancestors) if node is body), len(ancestors))
    if function is None or index + 1 >= len(ancestors):
        return None
    statement = ancestors[index + 1]  # of the function's own body
    assign = next((node for node in ancestors[index + 2 :] if type(node) is cst.Assign), None)
    target = assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
    if type(target) is not cst.Name:
        return None
    filled = resolve.filled_when_left_out(statement, target.value)
    return (function, target.value) if filled is not None and filled[0] is assign else None


def reads_names(node: cst.BaseExpression, names: set[str]) -> bool:
    """Whether an expression reads one of `names`."""
    return any(type(each) is cst.Name and each.value in names for each in (node, *descendants(node)))
