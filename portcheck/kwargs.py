"""The keyword options a call receives, also through `**name` of a dict built in the module.

Training scripts gather DataLoader options in dicts (`train_kwargs = {"batch_size": 64}`,
`train_kwargs.update(cuda_kwargs)`, `DataLoader(ds, **train_kwargs)`). A rule that reads an
option must see through them, or it misses the loader (a `shuffle=True` in the dict) or, worse,
takes an option for absent that the dict sets. Names are followed through the resolver's
assigned values; a dict is read from its literal, `dict(...)`, `{**a, **b}`, `a | b`, and the
`.update(...)`, `.setdefault(...)` and `name["key"] = value` that change it in its own scope.
Whatever cannot be read makes the result incomplete, and rules then say nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from portcheck import patterns, resolve

if TYPE_CHECKING:
    from portcheck.rule import FileContext

_DEPTH = 4  # names followed from dict to dict; also stops `a = {**b}; b = {**a}`
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


@dataclass(frozen=True)
class Setting:
    """One place that sets an option: its value, and the node holding it (a keyword argument,
    a dict entry, a subscript assignment)."""

    value: cst.BaseExpression
    holder: cst.CSTNode


@dataclass
class Options:
    """Every setting of each option a call may receive; `complete` is False when some source
    could not be read (an option may then be set that is not listed)."""

    settings: dict[str, list[Setting]] = field(default_factory=dict)
    complete: bool = True

    def add(self, key: str, value: cst.BaseExpression, holder: cst.CSTNode) -> None:
        self.settings.setdefault(key, []).append(Setting(value, holder))

    def values(self, key: str) -> list[cst.BaseExpression]:
        return [setting.value for setting in self.settings.get(key, [])]


def call_options(ctx: FileContext, call: cst.Call) -> Options:
    """The keyword options of `call`, its `**` dicts read as far as the module tells. Asked
    while the walk is at the call (names resolve in its scope)."""
    options = Options()
    for arg in call.args:
        if arg.keyword is not None:
            options.add(arg.keyword.value, arg.value, arg)
        elif arg.star == "**":
            _expand(ctx, arg.value, options, 0)
    return options


def _expand(ctx: FileContext, value: cst.BaseExpression, options: Options, depth: int) -> None:
    """Add what the mapping `value` holds."""
    if depth > _DEPTH:
        options.complete = False
    elif type(value) is cst.Dict:
        _dict_literal(ctx, value, options, depth)
    elif is_dict_call(ctx, value):
        assert type(value) is cst.Call
        _dict_call(ctx, value, options, depth)
    elif type(value) is cst.BinaryOperation and type(value.operator) is cst.BitOr:
        _expand(ctx, value.left, options, depth + 1)
        _expand(ctx, value.right, options, depth + 1)
    elif type(value) is cst.Name:
        _name(ctx, value, options, depth)
    else:
        options.complete = False


def _dict_literal(ctx: FileContext, value: cst.Dict, options: Options, depth: int) -> None:
    for element in value.elements:
        if type(element) is cst.StarredDictElement:
            _expand(ctx, element.value, options, depth + 1)
            continue
        key = patterns.string_value(element.key)
        if key is None:
            options.complete = False
        else:
            options.add(key, element.value, element)


def is_dict_call(ctx: FileContext, value: cst.BaseExpression) -> bool:
    """`dict(...)`, the builtin (no import binds the name)."""
    return (
        type(value) is cst.Call
        and type(value.func) is cst.Name
        and value.func.value == "dict"
        and not ctx.qualified_names(value.func)
    )


def _dict_call(ctx: FileContext, call: cst.Call, options: Options, depth: int) -> None:
    for arg in call.args:
        if arg.keyword is not None:
            options.add(arg.keyword.value, arg.value, arg)
        elif arg.star == "*":
            options.complete = False
        else:  # dict(other) and dict(**other)
            _expand(ctx, arg.value, options, depth + 1)


def _name(ctx: FileContext, name: cst.Name, options: Options, depth: int) -> None:
    """A name bound by `=` only: each value it is bound to, and what its scope adds later."""
    values = ctx.assigned_values(name)
    scope = _binding_scope(ctx.ancestors, values)
    if not values or scope is None:
        options.complete = False
        return
    for value in values:
        _expand(ctx, value, options, depth + 1)
    for mutation in _mutations(scope, name.value):
        _mutation(ctx, mutation, options, depth)


def _binding_scope(ancestors: Sequence[cst.CSTNode], values: Sequence[cst.CSTNode]) -> cst.CSTNode | None:
    """The innermost function (or the module) around the walk that holds the assignments: the
    scope whose statements may change the dict."""
    for node in reversed(ancestors):
        if type(node) in (cst.FunctionDef, cst.Module) and all(_contains(node, value) for value in values):
            return node
    return None


def _contains(node: cst.CSTNode, part: cst.CSTNode) -> bool:
    return node is part or any(_contains(child, part) for child in node.children)


def _mutations(scope: cst.CSTNode, name: str) -> Iterator[cst.CSTNode]:
    """`name.update(...)` / `name.setdefault(...)` calls and `name[...] = ...` assignments in the
    scope, and in the functions inside it that do not bind the name themselves (a function may
    change a dict of its module without a `global`)."""
    body = scope.body.body if type(scope) is cst.FunctionDef else scope.children  # type: ignore[union-attr]
    stack: list[cst.CSTNode] = list(body)
    while stack:
        node = stack.pop()
        if type(node) in _SCOPES and _binds(node, name):
            continue
        if type(node) is cst.Call and _method_of(node, name) in ("update", "setdefault"):
            yield node
        elif type(node) is cst.Assign and any(_subscript_of(target.target, name) for target in node.targets):
            yield node
        stack.extend(node.children)


def _binds(node: cst.CSTNode, name: str) -> bool:
    """Whether a nested function, lambda or class has a `name` of its own."""
    outside = resolve.Scope("module", None)
    if type(node) in (cst.FunctionDef, cst.Lambda):
        return name in resolve.function_scope(node, outside).bound
    assert type(node) is cst.ClassDef
    return name in resolve.class_scope(node, outside).bound


def _method_of(call: cst.Call, name: str) -> str | None:
    func = call.func
    if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == name:
        return func.attr.value
    return None


def _subscript_of(target: cst.BaseExpression, name: str) -> bool:
    return type(target) is cst.Subscript and type(target.value) is cst.Name and target.value.value == name


def _mutation(ctx: FileContext, node: cst.CSTNode, options: Options, depth: int) -> None:
    if type(node) is cst.Assign:
        _subscript_assignment(node, options)
    elif type(node) is cst.Call and patterns.method_name(node) == "setdefault":
        key = patterns.positional(node, 0)
        value = patterns.positional(node, 1)
        if key is None or value is None or patterns.string_value(key.value) is None:
            options.complete = False
        else:
            options.add(patterns.string_value(key.value) or "", value.value, value)
    elif type(node) is cst.Call:
        _dict_call(ctx, node, options, depth)  # update() takes what dict() takes


def _subscript_assignment(node: cst.Assign, options: Options) -> None:
    for target in node.targets:
        subscript = target.target
        if type(subscript) is not cst.Subscript:
            continue
        element = subscript.slice[0].slice if len(subscript.slice) == 1 else None
        key = patterns.string_value(element.value) if type(element) is cst.Index else None
        if key is None:
            options.complete = False
        else:
            options.add(key, node.value, node)
