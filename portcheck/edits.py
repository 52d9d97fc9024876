"""What a fix is, and small builders rules use to make one.

A rule attaches an `Edit` to a report: the node to replace, its replacement (built from the
original so formatting and comments inside survive), how safe that is, and the imports the
replacement needs. The fixer applies the edits; rules never change the tree themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from portcheck.findings import FixSafety
from portcheck.targets import Target


@dataclass(frozen=True)
class Edit:
    original: cst.CSTNode
    replacement: cst.CSTNode
    safety: FixSafety
    title: str  # what the fix does, for summaries and --diff output
    imports: tuple[str, ...] = ()  # modules the replacement needs bound (`import torch`)


def string_like(original: cst.CSTNode, value: str) -> cst.BaseExpression:
    """A string literal with `value`, quoted the way the original was (f-strings become plain)."""
    quote = '"'
    if isinstance(original, cst.SimpleString):
        quote = original.quote
    elif isinstance(original, cst.FormattedString):
        quote = original.start[-1] if original.start[-1] in "'\"" else '"'
    if quote not in value and "\\" not in value:
        return cst.SimpleString(f"{quote}{value}{quote}")
    return cst.SimpleString(repr(value))


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


def device_literal(original: cst.BaseExpression, target: Target) -> cst.BaseExpression | None:
    """The target's spelling of a CUDA device expression (`"cuda"`, `"cuda:1"`, `f"cuda:{i}"`,
    `"cuda:" + str(i)`...). Where a process owns one device (TPU, XLA, CPU) the index goes;
    elsewhere it is kept. None where the target keeps the CUDA spelling (ROCm)."""
    if target.keeps_cuda_api:
        return None
    device = target.device_type
    value = original.evaluated_value if isinstance(original, (cst.SimpleString, cst.ConcatenatedString)) else None
    if target.one_device_per_process or value == "cuda":
        return with_parentheses_of(original, string_like(original, device))
    if isinstance(value, str):  # "cuda:N"
        return string_like(original, device + value[len("cuda") :])
    if isinstance(original, cst.FormattedString):
        head = original.parts[0]
        assert isinstance(head, cst.FormattedStringText)
        return original.with_changes(parts=[head.with_changes(value=f"{device}:"), *original.parts[1:]])
    if isinstance(original, cst.BinaryOperation) and isinstance(original.left, cst.SimpleString):
        prefix = str(original.left.evaluated_value)  # "cuda:" + i, "cuda:%d" % i
        return original.with_changes(left=string_like(original.left, device + prefix[len("cuda") :]))
    if isinstance(original, cst.Call) and isinstance(original.func, cst.Attribute):  # "cuda:{}".format(i)
        template = original.func.value
        return original.with_changes(func=original.func.with_changes(value=string_like(template, f"{device}:{{}}")))
    return None
