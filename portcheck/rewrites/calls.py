"""Small pieces of CST surgery that several rules' fixes share (not a rule).

Dropping an argument, adding a keyword or removing a statement must keep the commas, line
breaks and indentation the code was written with, and keep later positional arguments in
their places; these helpers do that so each rule only decides what to change.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import libcst as cst

from portcheck.rule import FileContext

_TIGHT_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """`name=value`, spaced as PEP 8 spaces keyword arguments."""
    return cst.Arg(value=value, keyword=cst.Name(name), equal=_TIGHT_EQUAL)


def as_keyword(arg: cst.Arg, name: str, value: cst.BaseExpression | None = None) -> cst.Arg:
    """The argument given by keyword (with `value` instead, when given), keeping its comma and
    the whitespace around it."""
    if arg.keyword is not None:
        return arg if value is None else arg.with_changes(value=value)
    return arg.with_changes(keyword=cst.Name(name), equal=_TIGHT_EQUAL, value=arg.value if value is None else value)


def is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def without_arguments(call: cst.Call, unwanted: Collection[cst.Arg]) -> cst.Call:
    """The call without the given arguments. A positional one that a later positional
    argument still needs in place becomes `None` instead of going."""
    gone = {id(arg) for arg in unwanted}
    args = list(call.args)
    kept: list[cst.Arg] = []
    for index, arg in enumerate(args):
        if id(arg) not in gone:
            kept.append(arg)
        elif _is_positional(arg) and any(
            _is_positional(later) and id(later) not in gone for later in args[index + 1 :]
        ):
            kept.append(arg.with_changes(value=cst.Name("None")))
    if not kept:
        return call.with_changes(args=(), whitespace_before_args=cst.SimpleWhitespace(""))
    if kept[-1] is not args[-1]:  # the new last argument ends the call as the old one did
        kept[-1] = kept[-1].with_changes(comma=args[-1].comma, whitespace_after_arg=args[-1].whitespace_after_arg)
    return call.with_changes(args=kept)


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """The call with `name=value` added last, laid out like the arguments before it (on
    its own line in a call written one argument per line, trailing comma kept)."""
    new = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
        separator = _without_comment(args[-2].comma)
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        separator = _without_comment(cst.Comma(whitespace_after=call.whitespace_before_args))
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    args.append(new.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)


def in_current_statement(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Whether `node` lies in the top-level statement being visited. A literal reached through
    a name can sit anywhere; a fix that writes names (`dist`, `DEVICE`) there must not assume
    what is bound at the place being visited is bound there too."""
    ancestors = ctx.ancestors
    return len(ancestors) >= 2 and _contains(ancestors[1], node)


def removable_line(statement: cst.CSTNode, wanted: Callable[[cst.SimpleStatementLine], bool]) -> bool:
    """A one-statement line that `wanted` accepts and that has no comment line above it (the
    comment may be about what follows)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and not any(line.comment is not None for line in statement.leading_lines)
        and wanted(statement)
    )


def block_without(
    block: cst.IndentedBlock | cst.Module, wanted: Callable[[cst.SimpleStatementLine], bool]
) -> cst.IndentedBlock | cst.Module:
    """The block without its `removable_line`s; their blank lines above go to the next
    statement when it has none. libcst writes `pass` into a block left empty."""
    body: list[cst.BaseStatement] = []
    pending: tuple[cst.EmptyLine, ...] = ()
    for statement in block.body:
        if removable_line(statement, wanted):
            assert isinstance(statement, cst.SimpleStatementLine)
            pending = pending or tuple(statement.leading_lines)
            continue
        if pending and not statement.leading_lines:
            statement = statement.with_changes(leading_lines=pending)
        pending = ()
        body.append(statement)
    return block.with_changes(body=body)


def _is_positional(arg: cst.Arg) -> bool:
    return arg.keyword is None and arg.star != "**"


def _without_comment(comma: cst.Comma) -> cst.Comma:
    """A separator to copy: its line break and indentation, not the comment on its line."""
    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace):
        after = after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    return comma.with_changes(whitespace_after=after)


def _contains(node: cst.CSTNode, part: cst.CSTNode) -> bool:
    return node is part or any(_contains(child, part) for child in node.children)
