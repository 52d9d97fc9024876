"""Fixes for the names in the CUDA API table (cuda_api.toml), for the rules built on CudaApiRule.

The table says what replaces a name (`rename`, `expression`, per target), what a call may be
given (`arguments`), since which torch (`since`), whether the replacement raises on a host with
no accelerator (`guard`) and what the call amounts to there (`without-accelerator`). This
module turns one use of a name into an edit, reading the fix target's fields only:

- a target whose code never sees an accelerator (`runs_without_accelerator`, no
  `accelerator_api`: cpu) drops a bare call that only matters with an accelerator and writes
  the call's off-accelerator value where it is used as one;
- a target whose code may or may not have one (both: auto) guards such calls with
  `torch.accelerator.is_available()`: an `if` around a bare call, a conditional expression
  around a value;
- every other target gets the replacement as it is, where the table gives one it can run;
- calls already inside an availability check are renamed as they are.

Everything else (unknown argument shapes, CUDA device strings passed as indices, replacements
newer than the torch in use) is left to the rule's report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import libcst as cst

from portcheck import patterns
from portcheck.findings import FixSafety
from portcheck.rewrites.edits import Edit, Spelling, dotted, with_parentheses_of
from portcheck.rewrites.versions import has
from portcheck.rule import FileContext
from portcheck.targets import api

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][\w.]*)\}")
_BLOCKS = (cst.IndentedBlock, cst.Module)
# Where a conditional expression needs no parentheses of its own.
_LOOSE_PARENTS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Arg, cst.Expr)
_DEVICE_PARAMETER = "device"  # parameters of this name take a device: only an index carries over


@cache
def _guard() -> tuple[str, tuple[int, ...] | None]:
    """The availability check a guard writes, and since when torch has it (from the table)."""
    entry = next(e for e in api.table().values() if e.rename.endswith(".is_available") and e.rename != e.name)
    return entry.rename, entry.since


# --- spelling names the way the file binds them -------------------------------------------------


def spell_module(ctx: FileContext, module: str) -> Spelling | None:
    """`module` as this file can write it here: the user's own binding, or the plain name with
    the import it needs; None when the name is taken by something else."""
    bound = ctx.binding(module)
    if bound is not None:
        return Spelling(dotted(bound[0]), bound[1])
    top = module.split(".", 1)[0]
    if top != module:
        bound = ctx.binding(top)
        if bound is not None:
            return Spelling(dotted(bound[0] + module[len(top) :]), (*bound[1], module))
    return None


def spell(ctx: FileContext, qualified: str) -> Spelling | None:
    """A qualified name (`torch.accelerator.synchronize`) written through the file's bindings:
    the name itself or a prefix of it when the file imports one (`sdpa_kernel` after
    `from torch.nn.attention import sdpa_kernel`, `T.accelerator.synchronize` after
    `import torch as T`), else through its module with an import to add."""
    parts = qualified.split(".")
    for end in range(len(parts), 1, -1):
        bound = ctx.binding(".".join(parts[:end]))
        if bound is not None and not bound[1]:
            return Spelling(dotted(".".join([bound[0], *parts[end:]])))
    module = parts[0] if parts[0] == "torch" else ".".join(parts[:-1])
    base = spell_module(ctx, module)
    if base is None:
        return None
    rest = qualified[len(module) :]
    return Spelling(dotted(code(base.node) + rest), base.imports)


def expression(ctx: FileContext, template: str) -> Spelling | None:
    """An expression template with `{module}` placeholders, written for this file."""
    imports: list[str] = []
    missing = False

    def fill(match: re.Match[str]) -> str:
        nonlocal missing
        spelled = spell_module(ctx, match.group(1))
        if spelled is None:
            missing = True
            return match.group(0)
        imports.extend(i for i in spelled.imports if i not in imports)
        return code(spelled.node)

    text = _PLACEHOLDER.sub(fill, template)
    return None if missing else Spelling(cst.parse_expression(text), tuple(imports))


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


# --- where a name is used -----------------------------------------------------------------------


@dataclass(frozen=True)
class Use:
    """One reference to a CUDA name, seen from the rule that reports it."""

    node: cst.Name | cst.Attribute
    call: cst.Call | None  # the call the name is the function of
    outer: cst.CSTNode | None  # what holds the call (or the bare name)
    line: cst.SimpleStatementLine | None  # the statement line the call makes up, alone
    block: cst.Module | cst.IndentedBlock | None  # the block holding `line`
    guarded: bool  # only reached where an accelerator is available
    check: cst.If | None = None  # `if torch.cuda.is_available():` around `line` alone, with no else

    @property
    def bare(self) -> bool:
        """A call whose value is thrown away (`x(); torch.cuda.synchronize()`, `if a: f()`)."""
        return self.call is not None and isinstance(self.outer, cst.Expr)

    @property
    def stored(self) -> bool:
        """The name is assigned or deleted (`torch.cuda.synchronize = f`), not used."""
        holder = self.outer
        if isinstance(holder, (cst.AssignTarget, cst.Del)):
            return True
        return isinstance(holder, (cst.AnnAssign, cst.AugAssign)) and holder.target is self.node

    @classmethod
    def of(cls, ctx: FileContext, node: cst.Name | cst.Attribute) -> Use:
        chain = list(ctx.ancestors)
        call = chain[-1] if chain and isinstance(chain[-1], cst.Call) and chain[-1].func is node else None
        depth = 2 if call is not None else 1
        outer = chain[-depth] if len(chain) >= depth else None
        line = block = None
        if (
            call is not None
            and isinstance(outer, cst.Expr)
            and len(chain) >= 4
            and isinstance(chain[-3], cst.SimpleStatementLine)
            and len(chain[-3].body) == 1
            and isinstance(chain[-4], _BLOCKS)
        ):
            line, block = chain[-3], chain[-4]
        check = _sole_guard(ctx, chain[:-4]) if block is not None and len(block.body) == 1 else None
        return cls(node, call, outer, line, block, runs_only_with_accelerator(ctx, [*chain, node]), check)


def _sole_guard(ctx: FileContext, chain: Sequence[cst.CSTNode]) -> cst.If | None:
    """The `if` whose whole body is the block below `chain` (`if torch.cuda.is_available():
    torch.cuda.manual_seed_all(seed)`, `if torch.cuda.current_device() != device:
    torch.cuda.set_device(device)`), in a block of statements, with no `else`, no comment of
    its own and a test that only asks: what goes with the one call it guards."""
    if len(chain) < 2 or not isinstance(chain[-1], cst.If) or not isinstance(chain[-2], _BLOCKS):
        return None
    check = chain[-1]
    body = check.body
    commented = any(line.comment for line in (*check.leading_lines, *getattr(body, "footer", ())))
    header = getattr(body, "header", None)
    if check.orelse is not None or commented or (header is not None and header.comment is not None):
        return None
    return check if _only_asks(ctx, check.test) else None


_QUERY_BUILTINS = frozenset({"hasattr", "isinstance", "len"})
_QUERY_MODULES = ("torch.cuda.", "torch.accelerator.", "torch.backends.")


def _only_asks(ctx: FileContext, test: cst.BaseExpression) -> bool:
    """A test without side effects: names, attributes, literals, comparisons and boolean logic
    of those, `hasattr()`, `isinstance()` and `len()`, and torch's device queries
    (`torch.cuda.is_available()`, `torch.cuda.current_device()`)."""
    if isinstance(test, (cst.Name, cst.BaseString, cst.Integer, cst.Float)):
        return True
    if isinstance(test, cst.Attribute):
        return _only_asks(ctx, test.value)
    if isinstance(test, cst.UnaryOperation):
        return _only_asks(ctx, test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _only_asks(ctx, test.left) and _only_asks(ctx, test.right)
    if isinstance(test, cst.Comparison):
        return _only_asks(ctx, test.left) and all(_only_asks(ctx, link.comparator) for link in test.comparisons)
    if not isinstance(test, cst.Call) or any(arg.star for arg in test.args):
        return False
    names = ctx.qualified_names(test.func)
    builtin = isinstance(test.func, cst.Name) and test.func.value in _QUERY_BUILTINS and not names
    queries = builtin or any(name.startswith(_QUERY_MODULES) for name in names)
    return queries and all(_only_asks(ctx, arg.value) for arg in test.args)


def runs_only_with_accelerator(ctx: FileContext, chain: list[cst.CSTNode]) -> bool:
    """Whether the last node of `chain` runs only when an accelerator is available: in the body
    of `if <available>:`, of `... if <available> else ...`, or right of `<available> and`."""
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, (cst.If, cst.IfExp)) and child is parent.body and _checks_availability(ctx, parent.test):
            return True
        if (
            isinstance(parent, cst.BooleanOperation)
            and isinstance(parent.operator, cst.And)
            and child is parent.right
            and _checks_availability(ctx, parent.left)
        ):
            return True
    return False


def _checks_availability(ctx: FileContext, test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _checks_availability(ctx, test.left) or _checks_availability(ctx, test.right)
    if not isinstance(test, cst.Call) or test.args:
        return False
    return bool(ctx.qualified_names(test.func) & _availability_checks())


@cache
def _availability_checks() -> frozenset[str]:
    """`torch.accelerator.is_available` and the CUDA names it replaces."""
    check = _guard()[0]
    return frozenset({check, *(name for name, entry in api.table().items() if entry.rename == check)})


# --- arguments ----------------------------------------------------------------------------------


def pure(node: cst.BaseExpression) -> bool:
    """An expression whose evaluation has no effect, and cheap enough to write twice."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)):
        return True
    if isinstance(node, cst.Attribute):
        return pure(node.value)
    if isinstance(node, cst.UnaryOperation):
        return pure(node.expression)
    return False


# Calls that only read: `int(os.environ["LOCAL_RANK"])` loses nothing when its call is dropped.
_READING_CALLS = frozenset({"int", "str", "float", "len", "min", "max", "abs"})


def reads_only(node: cst.BaseExpression) -> bool:
    """An argument a dropped call may take with it: pure, or arithmetic, subscripts and
    conversions of pure values (`int(args.rank)`, `int(os.environ["LOCAL_RANK"])`,
    `os.environ.get("LOCAL_RANK", 0)`)."""
    if pure(node):
        return True
    if isinstance(node, cst.UnaryOperation):
        return reads_only(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return reads_only(node.left) and reads_only(node.right)
    if isinstance(node, cst.Subscript):
        return reads_only(node.value) and all(
            isinstance(element.slice, cst.Index) and reads_only(element.slice.value) for element in node.slice
        )
    if isinstance(node, cst.Call) and not any(arg.star for arg in node.args):
        func = node.func
        reads = (isinstance(func, cst.Name) and func.value in _READING_CALLS) or patterns.dotted(func).endswith(
            "environ.get"
        )
        return reads and all(reads_only(arg.value) for arg in node.args)
    return False


def _is_index(node: cst.BaseExpression) -> bool:
    """An argument a `device` parameter of torch.accelerator takes as CUDA's did: anything but
    a CUDA device string (which names another device type there) or a constant. An integer, a
    rank, or a device variable (its value is the port's device, rewritten where it is set)."""
    if patterns.is_cuda_device_literal(node):
        return False
    if isinstance(node, cst.Name):
        return node.value not in ("None", "True", "False")
    return not isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Float))


def arguments_for(call: cst.Call, wanted: api.Arguments) -> list[cst.Arg] | None:
    """The call's arguments as the replacement takes them, or None when they do not carry over
    one to one (unpacked `*args`/`**kwargs`, unknown or extra ones, a device that is not an
    index)."""
    if wanted == api.SAME_ARGUMENTS:
        return None if any(arg.star for arg in call.args) else list(call.args)
    if len(call.args) > len(wanted) or any(arg.star for arg in call.args):
        return None
    result = []
    for position, arg in enumerate(call.args):
        parameter = wanted[position]
        if arg.keyword is not None:
            if arg.keyword.value != parameter:
                return None  # out of order or unknown: not one to one
            arg = arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
        if parameter == _DEVICE_PARAMETER and not _is_index(arg.value):
            return None
        result.append(arg)
    return result


# --- edits --------------------------------------------------------------------------------------


def table_edit(ctx: FileContext, node: cst.Name | cst.Attribute, entry: api.ApiEntry) -> Edit | None:
    """The edit for one use of a name the table lists, on the fix target; None where the table
    gives nothing this use can take."""
    target = ctx.fix_target
    if target.keeps_cuda_api:
        return None
    use = Use.of(ctx, node)
    if use.stored:
        return None  # patching torch.cuda is not a use a rename can carry
    off_accelerator = entry.guard or entry.without_accelerator is not None
    never_accelerator = target.runs_without_accelerator and not target.accelerator_api
    if never_accelerator and off_accelerator and not use.guarded:
        return without_accelerator(use, entry)
    if entry.dropped_on(target.name) and use.bare and _pure_call(use.call):
        return drop(use, f"drop {entry.name}(): it does nothing a port needs on {target.name}")
    replacement = usable_replacement(ctx, entry)
    if replacement is None:
        return None
    written = replaced(ctx, use, replacement)
    if written is None:
        return None
    new, original, imports = written
    title = f"{entry.name} -> {replacement.text}"
    if not (entry.guard and target.runs_without_accelerator) or use.guarded:
        return Edit(original, new, replacement.safety, title, imports)
    return guarded(ctx, use, entry, new, original, imports, replacement.safety, title)


def usable_replacement(ctx: FileContext, entry: api.ApiEntry) -> api.Replacement | None:
    """The table's replacement for the fix target, if that target can run it with the torch in
    use: never a torch.accelerator call where the target has no torch.accelerator backend and
    still runs on accelerators (xla), never one newer than the torch in use."""
    target = ctx.fix_target
    replacement = entry.fix_on(target.name)
    if replacement is None or not has(ctx, replacement.since):
        return None
    needs_accelerator_api = ".accelerator." in replacement.text
    if needs_accelerator_api and not (target.accelerator_api or target.runs_without_accelerator):
        return None
    return replacement


def replaced(
    ctx: FileContext, use: Use, replacement: api.Replacement
) -> tuple[cst.CSTNode, cst.CSTNode, tuple[str, ...]] | None:
    """(the new node, the node it replaces, imports) for the replacement at this use."""
    if replacement.expression:
        if use.call is None or use.call.args:
            return None
        spelled = expression(ctx, replacement.expression)
        if spelled is None:
            return None
        return _fit(use.call, spelled.node, use.outer), use.call, spelled.imports
    spelled = spell(ctx, replacement.name)
    if spelled is None:
        return None
    name = with_parentheses_of(use.node, spelled.node)
    if use.call is None:  # a reference: only where any call of it carries over unchanged
        if replacement.arguments and replacement.arguments != api.SAME_ARGUMENTS:
            return None
        return name, use.node, spelled.imports
    args = arguments_for(use.call, replacement.arguments)
    if args is None:
        return None
    if all(new is old for new, old in zip(args, use.call.args)):
        return name, use.node, spelled.imports
    return use.call.with_changes(func=name, args=args), use.call, spelled.imports


def guarded(
    ctx: FileContext,
    use: Use,
    entry: api.ApiEntry,
    new: cst.CSTNode,
    original: cst.CSTNode,
    imports: tuple[str, ...],
    safety: FixSafety,
    title: str,
) -> Edit | None:
    """Where the code may run with or without an accelerator: the replacement behind
    `if torch.accelerator.is_available():` for a bare call, or as the true branch of a
    conditional expression whose other branch is the call's off-accelerator value."""
    check_name, since = _guard()
    check = spell(ctx, check_name) if has(ctx, since) else None
    if check is None or use.call is None:
        return None
    test = cst.Call(func=check.node)
    imports = (*imports, *(i for i in check.imports if i not in imports))
    call = new if original is use.call else use.call.deep_replace(original, new)  # the whole call's replacement
    assert isinstance(call, cst.BaseExpression)
    title += ", guarded by an accelerator check"
    if use.line is not None:
        inner = use.line.deep_replace(use.call, call)
        assert isinstance(inner, cst.SimpleStatementLine)
        statement = cst.If(
            test=test,
            body=cst.IndentedBlock(body=[inner.with_changes(leading_lines=())]),
            leading_lines=use.line.leading_lines,
        )
        return Edit(use.line, statement, safety, title, imports)
    if entry.without_accelerator is None:
        return None
    value = code(call) if isinstance(call, _ATOMS) or getattr(call, "lpar", ()) else f"({code(call)})"
    text = f"{value} if {code(test)} else {entry.without_accelerator}"
    conditional = cst.parse_expression(text if isinstance(use.outer, _LOOSE_PARENTS) else f"({text})")
    return Edit(use.call, with_parentheses_of(use.call, conditional), safety, title, imports)


def without_accelerator(use: Use, entry: api.ApiEntry) -> Edit | None:
    """Where no accelerator is ever present: a bare call goes, a value becomes what the call
    gives there. Either keeps exactly what the CUDA code did on such a host (or stops a
    call that raised there), so the fix is safe."""
    if not _pure_call(use.call):
        return None
    assert use.call is not None
    if use.bare:
        return drop(use, f"drop {entry.name}(): there is no accelerator")
    if entry.without_accelerator is None:
        return None
    value = cst.parse_expression(entry.without_accelerator)
    title = f"{entry.name}() -> {entry.without_accelerator}: there is no accelerator"
    return Edit(use.call, _fit(use.call, value, use.outer), FixSafety.SAFE, title)


def drop(use: Use, title: str) -> Edit:
    """Remove the statement line the call makes up; its comments stay, on a `pass`. A call
    that shares its line (`step(); torch.cuda.synchronize()`, `if a: torch.cuda.synchronize()`)
    becomes `pass`. The check whose whole body it is goes with it (see `_sole_guard`)."""
    assert use.bare
    if use.line is None:
        assert isinstance(use.outer, cst.Expr)
        return Edit(use.outer, cst.Pass(semicolon=use.outer.semicolon), FixSafety.SAFE, title)
    if any(line.comment is not None for line in use.line.leading_lines):
        return Edit(use.line, use.line.with_changes(body=[cst.Pass()]), FixSafety.SAFE, title)
    if use.check is not None:  # the check goes with it, not left as `if ...: pass`
        return Edit(use.check, cst.RemoveFromParent(), FixSafety.SAFE, f"{title}, and the check around it")
    # A removed statement leaves the block valid: libcst writes `pass` into a block left empty.
    return Edit(use.line, cst.RemoveFromParent(), FixSafety.SAFE, title)


def _pure_call(call: cst.Call | None) -> bool:
    return call is not None and all(not arg.star and reads_only(arg.value) for arg in call.args)


_ATOMS = (cst.Name, cst.SimpleString, cst.Call, cst.Attribute, cst.Dict, cst.List, cst.Subscript)
# Where an operand binds tighter than a comparison: `(a in b) + 1`, `(a in b).real`, `-(a in b)`.
_TIGHT_PARENTS = (cst.BinaryOperation, cst.Attribute, cst.Subscript, cst.Comparison, cst.Call, cst.Await)


def _fit(original: cst.BaseExpression, value: cst.BaseExpression, outer: cst.CSTNode | None) -> cst.BaseExpression:
    """`value` in place of `original`, parenthesised where it would not parse or bind as the
    call did: `(0).bit_length()`, `(a in b) + 1`."""
    value = with_parentheses_of(original, value)
    if getattr(value, "lpar", ()) or isinstance(value, _ATOMS):
        return value
    if isinstance(value, (cst.Integer, cst.Float)):
        needs = isinstance(outer, cst.Attribute)
    else:
        unary = isinstance(outer, cst.UnaryOperation) and not isinstance(outer.operator, cst.Not)
        needs = unary or isinstance(outer, _TIGHT_PARENTS)
    return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if needs else value
