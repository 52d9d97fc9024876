"""What a fix is, and small builders rules use to make one.

A rule attaches an `Edit` to a report: the node to replace, its replacement (built from the
original so formatting and comments inside survive), how safe that is, and the imports the
replacement needs. The fixer applies the edits; rules never change the tree themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites import versions

if TYPE_CHECKING:
    from portcheck.rule import FileContext

NodeT = TypeVar("NodeT", bound=cst.CSTNode)
ListedT = TypeVar("ListedT", cst.List, cst.Tuple, cst.Set)


@dataclass(frozen=True)
class Edit:
    original: cst.CSTNode
    # RemoveFromParent() deletes a statement; a FlattenSentinel puts several in its place
    replacement: cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel
    safety: FixSafety
    title: str  # what the fix does, for summaries and --diff output
    imports: tuple[str, ...] = ()  # modules the replacement needs bound (`import torch`)
    prelude: tuple[str, ...] = ()  # module-level statements it needs, added after the imports


@dataclass(frozen=True)
class Spelling:
    """An expression a fix writes, with what it needs bound at module level."""

    node: cst.BaseExpression
    imports: tuple[str, ...] = ()
    prelude: tuple[str, ...] = ()
    original: cst.CSTNode | None = None  # the node to replace, when not the one the rule saw

    def edit(self, original: cst.CSTNode, safety: FixSafety, title: str) -> Edit:
        return Edit(self.original or original, self.node, safety, title, self.imports, self.prelude)


def replace_nodes(node: NodeT, replacements: Mapping[int, object]) -> NodeT:
    """`node` with each descendant whose id is a key replaced by its value (a node, or a
    libcst sentinel that removes or flattens it)."""
    return node.visit(_ReplaceByIdentity(replacements))  # type: ignore[return-value]


class _ReplaceByIdentity(cst.CSTTransformer):
    def __init__(self, replacements: Mapping[int, object]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        return self.replacements.get(id(original_node), updated_node)  # type: ignore[return-value]


def string_like(original: cst.CSTNode, value: str) -> cst.BaseExpression:
    """A string literal with `value`, quoted the way the original was (f-strings become plain;
    one in single quotes only because its expressions hold double quotes shows no style)."""
    quote = '"'
    if isinstance(original, cst.SimpleString):
        quote = original.quote
    elif isinstance(original, cst.FormattedString) and not _holds_double_quotes(original):
        quote = original.start[-1] if original.start[-1] in "'\"" else '"'
    if quote not in value and "\\" not in value:
        return cst.SimpleString(f"{quote}{value}{quote}")
    return cst.SimpleString(repr(value))


def with_string_added(listed: ListedT, value: str) -> ListedT:
    """A list, tuple or set display with one more string, after its last element and quoted
    as that one is (`["cuda", "cpu"]` -> `["cuda", "cpu", "tpu"]`), its trailing comma kept."""
    last = listed.elements[-1]
    added = cst.Element(string_like(last.value, value))
    spaced = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    elements = [*listed.elements[:-1], last.with_changes(comma=spaced), added.with_changes(comma=last.comma)]
    return listed.with_changes(elements=elements)


def _holds_double_quotes(fstring: cst.FormattedString) -> bool:
    """Whether an f-string's expressions spell a double quote (which forced its own quotes)."""
    module = cst.Module([])
    return any(
        isinstance(part, cst.FormattedStringExpression) and '"' in module.code_for_node(part) for part in fstring.parts
    )


def dotted(name: str) -> cst.BaseExpression:
    """`a.b.c` as a Name/Attribute chain."""
    head, *rest = name.split(".")
    node: cst.BaseExpression = cst.Name(head)
    for part in rest:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def with_parentheses_of(original: cst.BaseExpression, replacement: cst.BaseExpression) -> cst.BaseExpression:
    """Keep the parentheses (and the whitespace inside them) that wrapped the original."""
    if getattr(original, "lpar", ()) and hasattr(replacement, "lpar"):
        return replacement.with_changes(lpar=original.lpar, rpar=original.rpar)  # type: ignore[attr-defined]
    return replacement


def torch_name(ctx: FileContext, module: str = "torch", *, at_module_level: bool = False) -> Spelling | None:
    """How to write `module` here: the user's own binding (`T` after `import torch as T`), or the
    plain name with an import to add; None when that name is taken by something else."""
    bound = ctx.binding(module, at_module_level=at_module_level)
    if bound is None:
        return None
    name, imports = bound
    return Spelling(dotted(name), imports)


def device_type(ctx: FileContext, original: cst.BaseExpression) -> Spelling | None:
    """The target's spelling of a CUDA device expression (`"cuda"`, `"cuda:1"`, `f"cuda:{i}"`,
    `"cuda:" + str(i)`...). Where a process owns one device (TPU, XLA, CPU) the index goes,
    since the only device it can use is its own; elsewhere it is kept. For `auto` it is the
    device type of the module's device binding. None where no safe spelling exists."""
    target = ctx.fix_target
    if target.keeps_cuda_api:
        return None
    if not target.device_type:
        return _auto_device_type(ctx, original)
    device = target.device_type
    value = original.evaluated_value if isinstance(original, (cst.SimpleString, cst.ConcatenatedString)) else None
    if target.one_device_per_process or value == "cuda":
        return Spelling(with_parentheses_of(original, string_like(original, device)))
    if isinstance(value, str):  # "cuda:N"
        return Spelling(string_like(original, device + value[len("cuda") :]))
    if isinstance(original, cst.FormattedString):
        head = original.parts[0]
        assert isinstance(head, cst.FormattedStringText)
        parts = [head.with_changes(value=f"{device}:"), *original.parts[1:]]
        return Spelling(original.with_changes(parts=parts))
    if isinstance(original, cst.BinaryOperation) and isinstance(original.left, cst.SimpleString):
        prefix = str(original.left.evaluated_value)  # "cuda:" + i, "cuda:%d" % i
        return Spelling(original.with_changes(left=string_like(original.left, device + prefix[len("cuda") :])))
    if isinstance(original, cst.Call) and isinstance(original.func, cst.Attribute):  # "cuda:{:d}".format(i)
        template = original.func.value
        field = str(patterns.string_value(template))[len("cuda") :]
        return Spelling(
            original.with_changes(func=original.func.with_changes(value=string_like(template, device + field)))
        )
    return None


def target_device_type(ctx: FileContext) -> Spelling | None:
    """The fix target's device type as an expression to write anywhere a device type string
    goes (`"tpu"`; for `auto`, `DEVICE.type`)."""
    return device_type(ctx, cst.SimpleString('"cuda"'))


AUTO_DEVICE = "DEVICE"


def auto_device_expression(torch: str) -> str:
    """The one device-agnostic choice: the accelerator present at run time, else the CPU."""
    return f'{torch}.accelerator.current_accelerator(check_available=True) or {torch}.device("cpu")'


def _auto_device_type(ctx: FileContext, original: cst.BaseExpression) -> Spelling | None:
    """For `auto`: `<binding>.type` in place of the literal, reusing the module's own device
    variable where it has one (rewriting its value when the literal is part of it), else a
    `DEVICE = ...` binding added after the imports."""
    torch = torch_name(ctx, at_module_level=True)
    if torch is None or not versions.has(ctx, versions.CHECKED_ACCELERATOR):
        return None
    torch_code = cst.Module([]).code_for_node(torch.node)
    reusable = _module_device_variable(ctx)
    if reusable is not None:
        name, value, is_string = reusable
        if _contains(value, original):
            expression = auto_device_expression(torch_code)
            rewritten = cst.parse_expression(f"({expression}).type" if is_string else expression)
            return Spelling(with_parentheses_of(value, rewritten), torch.imports, original=value)
        if _inside_function(ctx) or _bound_before_this_statement(ctx, value):
            return Spelling(_indexed(original, name if is_string else f"{name}.type"), torch.imports)
    if not ctx.is_free(AUTO_DEVICE):
        return None  # `DEVICE` means something else in this file
    prelude = (f"{AUTO_DEVICE} = {auto_device_expression(torch_code)}",)
    return Spelling(_indexed(original, f"{AUTO_DEVICE}.type"), torch.imports, prelude)


def _module_device_variable(ctx: FileContext) -> tuple[str, cst.BaseExpression, bool] | None:
    """A module-level variable named like a device, bound once, to a CUDA device or to the
    device-agnostic choice: (its name, its value, whether the value is a string). A value that
    computes the device some other way (`os.environ.get("DEV", "cuda")`) is not one."""
    for name, value in ctx.module_assignments():
        if not patterns.is_device_name(name) or name.lower().endswith(("_map", "_ids")):
            continue
        kind = _device_value_kind(ctx, value)
        if kind is not None and (_is_auto_expression(value, kind == "str") or _is_device_choice(ctx, value)):
            return name, value, kind == "str"
    return None


def _is_device_choice(ctx: FileContext, value: cst.BaseExpression) -> bool:
    """A CUDA device chosen once, and nothing else: `"cuda"`, `torch.device("cuda:0")`, or a
    choice between devices on whether one is available. A value that derives the device from
    other settings (`"cuda" if "cuda" in device else "cpu"`) is the user's logic, not a binding."""
    if patterns.is_cuda_device_literal(value):
        return True
    if isinstance(value, cst.Call) and "torch.device" in ctx.qualified_names(value.func) and len(value.args) == 1:
        return _is_device_choice(ctx, value.args[0].value)
    if isinstance(value, cst.IfExp) and "is_available" in cst.Module([]).code_for_node(value.test):
        branches = (value.body, value.orelse)
        return any(_is_device_choice(ctx, branch) for branch in branches) and all(
            _device_value_kind(ctx, branch) is not None for branch in branches
        )
    return False


def _device_value_kind(ctx: FileContext, value: cst.BaseExpression) -> str | None:
    """ "str" for a device string (or a choice of them), "device" for `torch.device(...)` or the
    device-agnostic choice, None for anything else."""
    if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return "str"
    if isinstance(value, cst.IfExp):
        body, orelse = _device_value_kind(ctx, value.body), _device_value_kind(ctx, value.orelse)
        return body if body == orelse else None
    if isinstance(value, cst.Attribute) and value.attr.value == "type":  # (... or torch.device("cpu")).type
        return "str" if _is_auto_expression(value, True) else None
    if isinstance(value, cst.BooleanOperation):
        return "device" if _is_auto_expression(value, False) else None
    if isinstance(value, cst.Call) and "torch.device" in ctx.qualified_names(value.func):
        return "device"
    return None


def _is_auto_expression(value: cst.BaseExpression, is_string: bool) -> bool:
    code = cst.Module([]).code_for_node(value)
    return "accelerator.current_accelerator(check_available=True) or " in code and code.endswith(
        ".type" if is_string else '.device("cpu")'
    )


def _contains(node: cst.CSTNode, part: cst.CSTNode) -> bool:
    return node is part or any(_contains(child, part) for child in node.children)


def _bound_before_this_statement(ctx: FileContext, value: cst.CSTNode) -> bool:
    """Whether module-level code here runs after the variable whose value is `value` is bound."""
    if len(ctx.ancestors) < 2 or not isinstance(ctx.ancestors[0], cst.Module):
        return False
    body = list(ctx.ancestors[0].body)
    here = next((index for index, statement in enumerate(body) if statement is ctx.ancestors[1]), 0)
    return any(_contains(statement, value) for statement in body[:here])


def _inside_function(ctx: FileContext) -> bool:
    """Whether the node runs when a function is called, not when it is defined (decorators and
    default values run at definition)."""
    ancestors = list(ctx.ancestors)
    return any(
        isinstance(node, (cst.FunctionDef, cst.Lambda)) and inner is node.body
        for node, inner in zip(ancestors, ancestors[1:])
    )


def _indexed(original: cst.BaseExpression, device_type_code: str) -> cst.BaseExpression:
    """`<device type>` for `"cuda"`; an f-string keeping the index for `"cuda:1"`, `f"cuda:{i}"`,
    `"cuda:%d" % i`, `"cuda:{}".format(i)` and `"cuda:" + str(i)`."""
    value = patterns.string_value(original)
    if value == "cuda":
        return with_parentheses_of(original, cst.parse_expression(device_type_code))
    quote = '"' if "'" in device_type_code or not isinstance(original, cst.SimpleString) else original.quote
    quote = quote if quote in ("'", '"') else '"'
    if value is not None:
        return cst.parse_expression(f"f{quote}{{{device_type_code}}}{_braces(value[len('cuda') :])}{quote}")
    if isinstance(original, cst.FormattedString):
        head = original.parts[0]
        assert isinstance(head, cst.FormattedStringText)
        typed = cst.parse_expression(f"f{quote}{{{device_type_code}}}:{quote}")
        assert isinstance(typed, cst.FormattedString)
        return original.with_changes(parts=[*typed.parts, *original.parts[1:]])
    if isinstance(original, cst.BinaryOperation) and isinstance(original.left, cst.SimpleString):
        template = str(original.left.evaluated_value)[len("cuda") :]
        left = cst.parse_expression(f"f{quote}{{{device_type_code}}}{_braces(template)}{quote}")
        return original.with_changes(left=left)
    if isinstance(original, cst.Call) and isinstance(original.func, cst.Attribute):
        field = str(patterns.string_value(original.func.value))[len("cuda") :]
        template = cst.parse_expression(f"f{quote}{{{device_type_code}}}{_braces(field)}{quote}")
        return original.with_changes(func=original.func.with_changes(value=template))
    return with_parentheses_of(original, cst.parse_expression(device_type_code))


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")
