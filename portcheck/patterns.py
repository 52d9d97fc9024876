"""Small predicates over libcst nodes that several rules share.

They answer syntactic questions only ("is this a CUDA device string?", "which argument is the
device?"); what a name refers to is the resolver's job.
"""

from __future__ import annotations

import re
from ast import literal_eval
from collections.abc import Callable, Iterator

import libcst as cst

_CUDA_DEVICE = re.compile(r"cuda(:\d+)?")
# The device types torch and its backends name (`torch.device(...).type`), targets or not.
DEVICE_TYPE_NAMES = frozenset({"cuda", "cpu", "mps", "xpu", "npu", "hpu", "mlu", "musa", "xla", "tpu", "neuron"})
_DEVICE_NAME = re.compile(r"(^|_)(device|devices|dev|device_str|device_name)($|_)|^location$", re.IGNORECASE)
_BACKEND_NAME = re.compile(r"(^|_)(backend|dist_backend|process_group_backend)($|_)", re.IGNORECASE)
_DEVICE_MAP_NAME = re.compile(r"(^|_)device_map$", re.IGNORECASE)


def dotted(node: cst.CSTNode) -> str:
    """`a.b.c` for a Name or Attribute chain (as in import statements), else ''."""
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain (non-f, non-bytes) string literal, else None."""
    if type(node) is cst.SimpleString:
        return _simple_string_value(node.value)
    if type(node) is cst.ConcatenatedString:
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def int_value(node: cst.CSTNode) -> int | None:
    """The value of a plain integer literal (`-1` is an operation, so None), else None."""
    return node.evaluated_value if type(node) is cst.Integer else None


def _simple_string_value(text: str) -> str | None:
    """A string literal's value. Without a backslash, its text between the quotes is its value
    (a raw prefix changes nothing then), which spares `ast.literal_eval` on the rules' hottest
    path: the setting rules read every string literal given to a call or a name."""
    if "\\" in text:
        value = literal_eval(text)
        return value if isinstance(value, str) else None
    start = 0
    while text[start] not in "\"'":
        start += 1
    if "b" in text[:start].lower():
        return None
    quote = 3 if text.startswith(('"""', "'''"), start) else 1
    return text[start + quote : len(text) - quote]


def is_cuda_device_string(text: str) -> bool:
    """`cuda` or `cuda:N`, the whole text."""
    return _CUDA_DEVICE.fullmatch(text) is not None


def is_cuda_device_literal(node: cst.CSTNode) -> bool:
    """`"cuda"`, `"cuda:0"`, `f"cuda:{i}"`, `"cuda:" + str(i)`, `"cuda:%d" % i`, `"cuda:{}".format(i)`
    (any one field: `"cuda:{:d}".format(rank)`)."""
    value = string_value(node)
    if value is not None:
        return is_cuda_device_string(value)
    if type(node) is cst.FormattedString:
        parts = node.parts
        head = parts[0] if parts else None
        if type(head) is cst.FormattedStringText:
            if len(parts) == 1:
                return _CUDA_DEVICE.fullmatch(head.value) is not None
            return head.value == "cuda:" and len(parts) == 2
        return False
    if type(node) is cst.BinaryOperation:
        left = string_value(node.left)
        if type(node.operator) is cst.Add:
            return left == "cuda:"
        if type(node.operator) is cst.Modulo:
            return left is not None and _CUDA_PERCENT_FIELD.fullmatch(left) is not None
    if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "format":
        template = string_value(node.func.value)
        return template is not None and _CUDA_FORMAT_FIELD.fullmatch(template) is not None
    return False


# `"cuda:{}"`, `"cuda:{:d}"`, `"cuda:{0}"`, `"cuda:{rank}"`; `"cuda:%d"`, `"cuda:%(rank)s"`: one field, the index
_CUDA_FORMAT_FIELD = re.compile(r"cuda:\{\w*(![rsa])?(:[^{}]*)?\}")
_CUDA_PERCENT_FIELD = re.compile(r"cuda:%(\(\w+\))?[-+ #0]*\d*[dis]")


def value_literals(node: cst.CSTNode, wanted: Callable[[cst.CSTNode], bool]) -> Iterator[cst.CSTNode]:
    """The literals an expression can evaluate to that `wanted` accepts: the expression
    itself, the branches of `a if c else b` and `a or b` (`args.device or "cuda"`), and the
    items of a list or tuple of them, also made by a comprehension (yolact's `devices =
    ["cuda:" + str(x) for x in device_ids]`), and the fallback of a lookup that has one
    (open_clip's `getattr(args, "device", "cuda")`, `config.get("device", "cuda")`)."""
    if wanted(node):
        yield node
    elif type(node) is cst.Call:
        fallback = _lookup_fallback(node)
        if fallback is not None:
            yield from value_literals(fallback, wanted)
    elif type(node) is cst.IfExp:
        yield from value_literals(node.body, wanted)
        yield from value_literals(node.orelse, wanted)
    elif type(node) is cst.BooleanOperation:
        yield from value_literals(node.left, wanted)
        yield from value_literals(node.right, wanted)
    elif type(node) in (cst.List, cst.Tuple):
        for element in node.elements:
            yield from value_literals(element.value, wanted)
    elif type(node) in (cst.ListComp, cst.GeneratorExp):
        yield from value_literals(node.elt, wanted)


def _lookup_fallback(call: cst.Call) -> cst.BaseExpression | None:
    """The value `getattr(obj, name, fallback)`, `mapping.get(key, fallback)` and
    `os.getenv(name, fallback)` give where the lookup finds nothing."""
    given = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    func = call.func
    if type(func) is cst.Name and func.value == "getattr" and len(given) == 3:
        return given[2]
    if type(func) is cst.Attribute and func.attr.value in ("get", "getenv") and len(given) == 2:
        return given[1]
    return None


def cuda_device_literals(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    return value_literals(node, is_cuda_device_literal)


def device_literals_through_names(
    node: cst.BaseExpression, assigned_value: Callable[[cst.Name], cst.BaseExpression | None]
) -> list[cst.CSTNode]:
    """CUDA device literals an argument evaluates to, looking through one plain name binding.

    A name that itself names a device (`device = "cuda"`) is left alone: cuda-device-string
    (PC101) reports the literal where it is bound, so each literal has one owner.
    """
    if type(node) is cst.Name:
        if is_device_name(node.value):
            return []
        bound = assigned_value(node)
        return list(cuda_device_literals(bound)) if bound is not None else []
    return list(cuda_device_literals(node))


def is_device_name(name: str) -> bool:
    """Whether an identifier names a device: `device`, `dev`, `train_device`, `DEVICE`, a
    loader's `location`..."""
    return _DEVICE_NAME.search(name) is not None


def is_device_like(node: cst.BaseExpression) -> bool:
    """`device`, `x.device`, `x.device.type`, `args.device`, `device_type`, `str(device)`,
    `torch.device(...)`: an expression that holds a device or its type."""
    if type(node) is cst.Name:
        return is_device_name(node.value)
    if type(node) is cst.Attribute:
        return (node.attr.value == "type" and is_device_like(node.value)) or is_device_name(node.attr.value)
    if type(node) is cst.Call and node.args:
        func = node.func
        if type(func) is cst.Name and func.value in ("str", "repr"):
            return is_device_like(node.args[0].value)
        return type(func) is cst.Attribute and func.attr.value == "device"
    return False


def is_device_map_name(name: str) -> bool:
    """Whether an identifier names a Hugging Face device map: `device_map`, `model_device_map`."""
    return _DEVICE_MAP_NAME.search(name) is not None


def is_backend_name(name: str) -> bool:
    return _BACKEND_NAME.search(name) is not None


def target_name(node: cst.CSTNode) -> str | None:
    """The identifier an assignment target or dict key names: `x`, `self.x`, `"x"`."""
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        return node.attr.value
    return string_value(node)


def setting_key(target: cst.BaseExpression) -> str | None:
    """The setting an assignment target names: `x`, `self.x`, and the string key of a
    subscript, `kwargs["x"]`."""
    if type(target) is cst.Subscript and len(target.slice) == 1:
        index = target.slice[0].slice
        return string_value(index.value) if type(index) is cst.Index else None
    return target_name(target)


def is_true(node: cst.CSTNode | None) -> bool:
    """The literal `True`."""
    return type(node) is cst.Name and node.value == "True"


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call, index: int) -> cst.Arg | None:
    """The index-th positional argument, or None if absent or hidden behind `*args`."""
    position = 0
    for arg in call.args:
        if arg.keyword is not None or arg.star == "**":
            break
        if arg.star == "*":
            return None
        if position == index:
            return arg
        position += 1
    return None


def argument(call: cst.Call, index: int, name: str) -> cst.Arg | None:
    """An argument given by position or by keyword."""
    return positional(call, index) or keyword(call, name)


def method_name(call: cst.Call) -> str | None:
    """`m` for a call written `<anything>.m(...)`."""
    return call.func.attr.value if type(call.func) is cst.Attribute else None


def is_chain_prefix(node: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
    """True when `node` is not a whole dotted name: `a.b` in `a.b.c`, or the `c` of `a.b.c`."""
    if type(parent) is cst.Attribute:
        return parent.value is node or parent.attr is node
    return False


# Methods that return the module they are called on, moved or switched: `Net(...).cuda().eval()`
# is still the `Net`.
RETURN_THE_RECEIVER = frozenset({"to", "cuda", "cpu", "eval", "train", "half", "float", "bfloat16", "requires_grad_"})


def unchained(node: cst.BaseExpression) -> cst.BaseExpression:
    """`Net(...)` in `Net(...).cuda().eval()`: what is left under the methods that return their receiver."""
    while type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in RETURN_THE_RECEIVER:
        node = node.func.value
    return node


# torch's GradScaler classes, by every name they are imported by.
GRAD_SCALERS = frozenset(
    {
        "torch.GradScaler",  # torch.amp's, re-exported
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cpu.amp.GradScaler",
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",  # FSDP's, for `device="cuda"` too
    }
)
# Calls whose "cuda" device argument another rule owns (PC302 autocast, PC405 device meshes).
AMP_DEVICE_CALLS = frozenset(
    {
        "torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast",
        "torch.GradScaler", "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.amp.custom_fwd",
        "torch.amp.custom_bwd", "torch.get_autocast_dtype", "torch.set_autocast_dtype",
        "torch.is_autocast_enabled", "torch.set_autocast_enabled", "torch.is_autocast_available",
        "torch.amp.is_autocast_available", "torch.amp.autocast_mode.is_autocast_available",
    }
)  # fmt: skip
DEVICE_MESH_CALLS = frozenset(
    {
        "torch.distributed.device_mesh.init_device_mesh", "torch.distributed.init_device_mesh",
        "torch.distributed.device_mesh.DeviceMesh", "torch.distributed.DeviceMesh",
        "torch.distributed.tensor.DeviceMesh", "torch.distributed._tensor.DeviceMesh",
        "torch.distributed._tensor.init_device_mesh",
    }
)  # fmt: skip
TENSOR_METHOD_NAMES = frozenset({"torch.Tensor", "torch.nn.Module", "torch.nn.modules.module.Module"})
AUTOGRAD_FUNCTIONS = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})


def resolves_outside_torch_classes(names: frozenset[str]) -> bool:
    """True when an `x.method` reference is known to come from an import other than a torch
    class (e.g. a module attribute), so it cannot be the Tensor or Module method."""
    return bool(names) and not any(name.rpartition(".")[0] in TENSOR_METHOD_NAMES for name in names)


_EQUALITY = (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)


def compares_literal_with(
    node: cst.Comparison, is_literal: Callable[[cst.CSTNode], bool], is_subject: Callable[[cst.BaseExpression], bool]
) -> bool:
    """Whether some `==`, `!=`, `in` or `not in` link of a comparison chain pits a wanted
    literal (or a tuple, list or set holding one) against a wanted subject, either way round."""

    def holds(side: cst.BaseExpression) -> bool:
        if type(side) in (cst.Tuple, cst.List, cst.Set):
            return any(is_literal(element.value) for element in side.elements)
        return is_literal(side)

    left = node.left
    for link in node.comparisons:
        right = link.comparator
        if type(link.operator) in _EQUALITY:
            if (holds(left) and is_subject(right)) or (holds(right) and is_subject(left)):
                return True
        left = right
    return False


def imported_modules(node: cst.Import | cst.ImportFrom, is_known: Callable[[str], bool]) -> Iterator[str]:
    """The modules an import statement names that `is_known` accepts: each `import a.b`; for
    `from a import b`, `a` itself when it is known, else each `a.b`. Relative imports name the
    repository's own code and yield nothing."""
    if type(node) is cst.Import:
        candidates = [dotted(alias.name) for alias in node.names]
    elif node.relative or node.module is None:
        return
    else:
        module = dotted(node.module)
        if is_known(module) or type(node.names) is cst.ImportStar:
            candidates = [module]
        else:
            candidates = [f"{module}.{dotted(alias.name)}" for alias in node.names]
    yield from (candidate for candidate in candidates if is_known(candidate))


# What an `except` must catch for a failed import to be survived, and what ends a program instead.
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_EXITS = frozenset({"exit", "quit", "sys.exit", "os._exit"})


_RANK_PRINT = re.compile(r"print_?(0|rank_?0|master|main)")  # `print0(...)`, `print_rank_0(...)`
_LOG_LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


def is_logging_call(call: cst.Call) -> bool:
    """`print(...)`, `fabric.print(...)`, `warnings.warn(...)`, `logging.error(...)`,
    `logger.info(...)`, `self.log.warning(...)`, a rank-0 `print0(...)`: a call that only
    tells the user something."""
    name = dotted(call.func)
    if name in ("print", "warnings.warn", "warn") or name.endswith(".print"):  # `fabric.print(...)`
        return True
    if _RANK_PRINT.fullmatch(name):
        return True
    receiver, _, method = name.rpartition(".")
    return method in _LOG_LEVELS and "log" in receiver.rpartition(".")[2].lower()


def simple_statements(body: cst.BaseSuite) -> list[cst.CSTNode]:
    """The statements of a block in order, those on one line one by one (`a(); b()`, and the
    block of `if ok: print(x)`); a compound statement stands for itself."""
    lines = [body] if type(body) is cst.SimpleStatementSuite else body.body
    return [
        statement
        for line in lines
        for statement in (line.body if type(line) in (cst.SimpleStatementLine, cst.SimpleStatementSuite) else [line])
    ]


def caught_names(handler: cst.ExceptHandler) -> set[str] | None:
    """The exception types an `except` names, as written (`{"OSError", "subprocess.CalledProcessError"}`);
    None for a bare `except:`, which catches everything."""
    caught = handler.type
    if caught is None:
        return None
    types = caught.elements if type(caught) is cst.Tuple else [caught]
    return {dotted(t.value if type(t) is cst.Element else t) for t in types}


def carries_on_without_import(handler: cst.ExceptHandler) -> bool:
    """An `except` that catches ImportError and neither raises nor exits: the program goes on
    without what the `try` imports."""
    names = caught_names(handler)
    if names is not None and not names & _IMPORT_ERRORS:
        return False
    for statement in simple_statements(handler.body):
        if type(statement) is cst.Raise:
            return False
        call = statement.value if type(statement) is cst.Expr else None
        if type(call) is cst.Call and dotted(call.func) in _EXITS:
            return False
    return True


def class_like(qualified: str) -> bool:
    """`pkg.ops.AllReduce`: a class by the convention of its last name (CapWords, not CONSTANT)."""
    name = qualified.rpartition(".")[2]
    return name[:1].isupper() and not name.isupper()
