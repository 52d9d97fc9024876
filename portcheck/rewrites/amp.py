"""Shared pieces of the mixed-precision fixes (PC301-PC304): which dtype an autocast should
name on the fix target, how to spell it, and argument-list surgery that keeps the call's
layout (one line or one argument per line)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from portcheck import patterns
from portcheck.rewrites import edits

if TYPE_CHECKING:
    from portcheck.rule import FileContext
    from portcheck.targets import Target

AUTOCAST_CALLS = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})


def default_dtype_differs(target: Target) -> bool:
    """torch's autocast default for the target's device type is not the dtype it should use
    (PrivateUse1 backends such as tpu and neuron get float16, although they want bfloat16)."""
    return bool(target.amp_dtype) and target.autocast_default_dtype != target.amp_dtype


def wants_explicit_dtype(target: Target) -> bool:
    """Whether an autocast written for the target should name its dtype: where torch's default
    is wrong, and on the bfloat16-native accelerators whose right default is a plugin's choice
    (xla, hpu), so that a plugin or torch release changing it cannot change the program. The
    CPU's bfloat16 default is torch's own; `auto` means each device's own default."""
    return default_dtype_differs(target) or (target.bf16_native and target.device_type != "cpu")


def amp_dtype(ctx: FileContext) -> edits.Spelling | None:
    """`torch.bfloat16` (or `T.bfloat16`) for the fix target's AMP dtype, with the import it needs."""
    torch = edits.torch_name(ctx)
    if torch is None or not ctx.fix_target.amp_dtype:
        return None
    return edits.Spelling(cst.Attribute(value=torch.node, attr=cst.Name(ctx.fix_target.amp_dtype)), torch.imports)


def needs(*spellings: edits.Spelling) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The imports and module prelude a set of spellings needs, each once, in order."""
    imports: list[str] = []
    prelude: list[str] = []
    for spelling in spellings:
        imports += [module for module in spelling.imports if module not in imports]
        prelude += [statement for statement in spelling.prelude if statement not in prelude]
    return tuple(imports), tuple(prelude)


def has_star(call: cst.Call, star: str = "") -> bool:
    """Whether the call passes `*args` (star="*"), `**kwargs` ("**"), or either ("")."""
    return any(arg.star and (not star or arg.star == star) for arg in call.args)


def positional_count(call: cst.Call) -> int:
    """How many arguments come before the first keyword or `**` (a `*args` counts as one)."""
    count = 0
    for arg in call.args:
        if arg.keyword is not None or arg.star == "**":
            break
        count += 1
    return count


def insert_args(call: cst.Call, index: int, new: Sequence[cst.Arg]) -> cst.Call:
    """`call` with `new` inserted before its `index`-th argument, laid out the way its
    arguments are: `f(a, b)` stays on one line, one argument per line stays so, and a trailing
    comma stays trailing."""
    args = list(call.args)
    if not new:
        return call
    if not args:
        inserted = [arg.with_changes(comma=_comma(_SPACE)) for arg in new[:-1]]
        return call.with_changes(args=[*inserted, new[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)])
    if index < len(args):  # each new argument takes the place, and the leading space, of args[index]
        separator = _comma(_space_before(call, index))
        inserted = [arg.with_changes(comma=separator) for arg in new]
        return call.with_changes(args=[*args[:index], *inserted, *args[index:]])
    last = args[-1]
    separator = _comma(_space_before(call, len(args) - 1))
    inserted = [arg.with_changes(comma=separator) for arg in new[:-1]]
    # what followed the last argument (a trailing comma, a line break) now follows the new last
    inserted.append(new[-1].with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg))
    last = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=[*args[:-1], last, *inserted])


def device_argument(call: cst.Call, names: frozenset[str]) -> cst.Arg | None:
    """The argument that carries the device type in one of the device-generic AMP calls."""
    if names & _DEVICE_KEYWORD_ONLY:
        return patterns.keyword(call, "device_type")
    if names & _DEVICE_NAMED_DEVICE:
        return patterns.argument(call, 0, "device")
    return patterns.argument(call, 0, "device_type")


def root_name(node: cst.BaseExpression) -> cst.Name | None:
    """The name a dotted reference starts with: `torch` in `torch.cuda.amp`."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None


_SPACE = cst.SimpleWhitespace(" ")
_DEVICE_KEYWORD_ONLY = frozenset({"torch.amp.custom_fwd", "torch.amp.custom_bwd"})
_DEVICE_NAMED_DEVICE = frozenset({"torch.GradScaler", "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})


def _space_before(call: cst.Call, index: int) -> cst.BaseParenthesizableWhitespace:
    """The whitespace before the call's `index`-th argument."""
    if index == 0:
        return call.whitespace_before_args
    comma = call.args[index - 1].comma
    return comma.whitespace_after if isinstance(comma, cst.Comma) else _SPACE


def _comma(space: cst.BaseParenthesizableWhitespace) -> cst.Comma:
    """A comma followed by `space` when that breaks the line, else by one space."""
    return cst.Comma(whitespace_after=space if isinstance(space, cst.ParenthesizedWhitespace) else _SPACE)
