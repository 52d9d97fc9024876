"""PC3: precision and mixed precision (torch.cuda.amp, autocast device and dtype, TF32, cuDNN, float64)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import libcst as cst

from portcheck import patterns

FLOAT16 = frozenset({"torch.float16", "torch.half"})  # the dtype's qualified names
_FLOAT16_CHOICES = frozenset({"fp16", "float16", "half", "16"})  # how settings name float16
_FLOAT16_FLAG = re.compile(r"(^|_)(fp16|half|float16)$", re.IGNORECASE)  # `args.fp16`, `use_half`


def under_test(ancestors: Sequence[cst.CSTNode], is_guard: Callable[[cst.BaseExpression], bool]) -> bool:
    """Whether the last node of `ancestors` (the node itself included) sits in the body of an
    `if`, or is the value of `x if test else y`, whose test `is_guard` accepts."""
    for ancestor, child in zip(ancestors, ancestors[1:]):
        if isinstance(ancestor, (cst.If, cst.IfExp)) and child is ancestor.body and is_guard(ancestor.test):
            return True
    return False


def chooses_float16(test: cst.BaseExpression, flags: bool = True) -> bool:
    """A test that holds where the user asked for float16 (a flag or a precision setting):
    `args.fp16`, `use_half`, `precision == "fp16"`, `dtype in ("float16", "half")`, in an `and`;
    without `flags`, only a precision setting (a flag may well ask for mixed precision)."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (
            chooses_float16(test.left, flags) or chooses_float16(test.right, flags)
        )
    if isinstance(test, (cst.Name, cst.Attribute)):
        return flags and _FLOAT16_FLAG.search(patterns.target_name(test) or "") is not None
    return tests_equal(test, lambda node: patterns.string_value(node) in _FLOAT16_CHOICES)


def tests_equal(test: cst.BaseExpression, is_value: Callable[[cst.CSTNode], bool]) -> bool:
    """`x == value`, `x is value`, `value in x` or `x in (value, ...)`, in a one-link comparison."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    link = test.comparisons[0]
    if not isinstance(link.operator, (cst.Equal, cst.Is, cst.In)):
        return False
    right = link.comparator
    if isinstance(right, (cst.Tuple, cst.List, cst.Set)) and isinstance(link.operator, cst.In):
        return all(is_value(element.value) for element in right.elements)
    return is_value(test.left) or is_value(right)
