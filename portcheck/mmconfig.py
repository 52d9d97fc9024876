"""OpenMMLab's Python configs (MMDetection, MMSegmentation, MMEngine), read as data.

A config is a module of plain assignments, `_base_ = [...]` and settings built as
`dict(type=...)`; nothing is executed. The rules that know a setting read it here."""

from __future__ import annotations

import libcst as cst

from portcheck import patterns


def settings(module: cst.Module) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """The module's top-level assignments (target, value), where it is a config; else none."""
    assignments = [
        (target.target, small.value)
        for statement in module.body
        if isinstance(statement, cst.SimpleStatementLine)
        for small in statement.body
        if isinstance(small, cst.Assign)
        for target in small.targets
    ]
    return assignments if any(_is_config_setting(target, value) for target, value in assignments) else []


def builds_dict(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict"


def dicts(value: cst.BaseExpression) -> list[cst.Call]:
    """The `dict(...)` calls a setting's value is built of, nested ones too, in source order."""
    found = [value] if isinstance(value, cst.Call) and builds_dict(value) else []
    children = value.args if isinstance(value, cst.Call) else getattr(value, "elements", ())
    for child in children:
        found.extend(dicts(child.value))
    return found


def kind(built: cst.Call) -> str | None:
    """The `type=` a `dict(...)` names, as a string."""
    given = patterns.keyword(built, "type")
    return patterns.string_value(given.value) if given is not None else None


def _is_config_setting(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """`_base_ = [...]`, or a setting built of `dict(type=...)` (also in a list, or nested: a
    datasets file's `train_pipeline = [dict(type="LoadImageFromFile"), ...]`): what OpenMMLab
    configs hold."""
    if patterns.target_name(target) == "_base_":
        return True
    return any(patterns.keyword(each, "type") is not None for each in dicts(value))
