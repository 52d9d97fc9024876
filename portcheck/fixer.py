"""Applies the rules' edits to one file: safety tiers, overlaps, imports, and a re-scan loop.

Each round scans the current source for the fix target, applies every allowed edit that does
not overlap another, adds the imports the edits need, checks that the result still parses,
and scans again until nothing changes (bounded). Any failure leaves the source as it was.
A notebook is fixed as the module its code cells make (portcheck.notebooks): the imports go
into the cell of its first imports, and the fixed module is written back cell by cell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from portcheck.coherence import coherent
from portcheck.config import Config
from portcheck.engine import TOO_MANY_FINDINGS, collected_once, examine
from portcheck.findings import Fact, Finding, FixSafety
from portcheck.notebooks import NotebookError
from portcheck.patterns import dotted
from portcheck.positions import positions
from portcheck.project import ModulePath, Project
from portcheck.results import UNKNOWN_PROJECT
from portcheck.rewrites.edits import Edit, replace_nodes
from portcheck.targets import Target

MAX_ROUNDS = 10

Block = tuple[int, int]  # tree.body[start:end]: the statements whose leading imports added ones join


@dataclass(frozen=True)
class FixOutcome:
    """What fixing one file did."""

    path: str
    source: bytes  # the fixed source (the original when nothing was applied or on error)
    applied: tuple[tuple[str, str], ...] = ()  # (rule code, what the edit did)
    skipped: tuple[tuple[str, str], ...] = ()  # (rule code, why it was not applied)
    remaining: tuple[Finding, ...] = ()  # findings still there afterwards, for the target
    error: str = ""  # why the file was left unchanged, when it was
    facts: tuple[Fact, ...] = ()  # what the fixed file tells about the project (portcheck.project)

    @property
    def changed(self) -> bool:
        return bool(self.applied) and not self.error


@collected_once
def fix_source(
    data: bytes,
    path: str,
    config: Config,
    target: Target,
    unsafe: bool = False,
    project: Project = UNKNOWN_PROJECT,
    module: ModulePath | None = None,
) -> FixOutcome:
    """Fix one file's contents for `target` (config.targets should be just that target)."""
    source = data
    applied: list[tuple[str, str]] = []
    held: list[tuple[Finding, str]] = []  # fixes kept back this round to keep guards whole, and why
    for _ in range(MAX_ROUNDS):
        examination = examine(source, path, config, project=project, module=module, fix_target=target)
        if examination.result.internal_error:
            return FixOutcome(path, data, error=f"internal error: {examination.result.internal_error}")
        if examination.stopped:  # what was found is partial: fixing it could split a check from its code
            why = "the file has more findings than max-findings-per-file: left unchanged"
            return FixOutcome(path, data, skipped=((TOO_MANY_FINDINGS, why),), remaining=examination.result.findings)
        chosen = [
            (finding, edit) for finding, edit in examination.fixes() if unsafe or edit.safety is not FixSafety.UNSAFE
        ]
        if not chosen or examination.tree is None:
            held = []
            break
        findings = examination.result.findings
        chosen, held = coherent(examination.checks, examination.placements, findings, chosen, target)
        if not chosen:
            break
        cells = examination.notebook
        try:
            tree, done = _apply(examination.tree, chosen, cells.import_block if cells else None)
        except RecursionError:  # the scan copes with deeper nesting than rebuilding the tree does
            return FixOutcome(path, data, error="too deeply nested to rewrite; file left unchanged")
        fixed = _with_final_line_ending(source, tree.bytes, tree.encoding) if cells is None else tree.code
        try:
            cst.parse_module(fixed)
        except (cst.ParserSyntaxError, SyntaxError) as error:
            return FixOutcome(
                path, data, error=f"a fix produced code that does not parse ({error}); file left unchanged"
            )
        if cells is not None:
            try:
                fixed = cells.rebuild(tree.code)
            except NotebookError as error:
                return FixOutcome(path, data, error=f"{error}; notebook left unchanged")
        if fixed == source:
            break
        applied += done
        source = fixed
    else:
        return FixOutcome(path, data, error=f"fixes did not settle after {MAX_ROUNDS} rounds; file left unchanged")
    # The round that ended the loop examined the final source: its findings are what is left.
    skipped = (
        tuple(
            (finding.code, "unsafe: needs --unsafe-fixes")
            for finding, edit in examination.fixes()
            if edit.safety is FixSafety.UNSAFE and not unsafe
        )
        + examination.held
        + tuple((finding.code, why) for finding, why in held)
    )
    result = examination.result
    return FixOutcome(path, source, tuple(applied), skipped, result.findings, facts=result.facts)


def _apply(
    tree: cst.Module, chosen: Sequence[tuple[Finding, Edit]], block: Callable[[cst.Module], Block] | None
) -> tuple[cst.Module, list[tuple[str, str]]]:
    """Replace the edits' nodes by identity, outermost first, skipping any that lies inside an
    edit already taken (the next round sees it again), then add the imports they need (where
    `block` says, or after the module's leading imports)."""
    spans = positions(tree, [edit.original for _, edit in chosen])
    order = sorted(chosen, key=lambda pair: _extent(spans[id(pair[1].original)]))
    taken: list[tuple[int, int, int, int]] = []
    replacements: dict[int, object] = {}
    applied: list[tuple[str, str]] = []
    imports: list[str] = []
    prelude: list[str] = []
    for finding, edit in order:
        if replacements.get(id(edit.original)) is edit.replacement:
            applied.append((finding.code, edit.title))  # one edit that fixes several findings together
            continue
        span = spans[id(edit.original)]
        if any(_overlaps(span, other) for other in taken) or id(edit.original) in replacements:
            continue  # inside another fix: the next round sees it again
        taken.append(span)
        replacements[id(edit.original)] = edit.replacement
        applied.append((finding.code, edit.title))
        imports.extend(module for module in edit.imports if module not in imports)
        prelude.extend(statement for statement in edit.prelude if statement not in prelude)
    fixed = replace_nodes(tree, replacements)
    for module in imports:
        fixed = add_import(fixed, module, block(fixed) if block else None)
    for statement in reversed(prelude):
        fixed = add_statement(fixed, statement, block(fixed) if block else None)
    return fixed, applied


def _with_final_line_ending(before: bytes, after: bytes, encoding: str) -> bytes:
    """libcst drops the line ending that ends a file in places (a lone carriage return, old Mac
    line endings; a last line that is a comment ending in a backslash): keep it."""
    endings = [f"a{ending}".encode(encoding)[len("a".encode(encoding)) :] for ending in ("\r\n", "\n", "\r")]
    if any(after.endswith(ending) for ending in endings):  # without the BOM utf-8-sig writes
        return after
    return after + next((ending for ending in endings if before.endswith(ending)), b"")


def _extent(span: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """Sort key that puts outer (earlier-starting, later-ending) spans first."""
    return (span[0], span[1], -span[2], -span[3])


def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return (a[0], a[1]) < (b[2], b[3]) and (b[0], b[1]) < (a[2], a[3])


def add_import(tree: cst.Module, module: str, block: Block | None = None) -> cst.Module:
    """`import <module>` after the file's leading imports (or after its docstring and
    `__future__` imports), unless the file already has exactly that import. `block` narrows
    the statements looked at (a notebook's cell)."""
    block = block or (0, len(tree.body))
    for statement in _leading_imports(tree, block):
        if isinstance(statement, cst.Import) and any(
            dotted(alias.name) == module and alias.asname is None for alias in statement.names
        ):
            return tree
    return _insert_after_imports(tree, f"import {module}", block)


def add_statement(tree: cst.Module, code: str, block: Block | None = None) -> cst.Module:
    """A module-level statement (a device binding) after the leading imports, unless the
    module already has it."""
    if any(tree.code_for_node(statement).strip() == code for statement in tree.body):
        return tree
    return _insert_after_imports(tree, code, block or (0, len(tree.body)), spaced=True)


def _leading_imports(tree: cst.Module, block: Block) -> list[cst.BaseSmallStatement]:
    """The docstring and import statements the block starts with."""
    found = []
    for index in range(*block):
        statement = tree.body[index]
        if not isinstance(statement, cst.SimpleStatementLine):
            break
        first = statement.body[0]
        if not (isinstance(first, (cst.Import, cst.ImportFrom)) or (index == 0 and _is_docstring(first))):
            break
        found.append(first)
    return found


def _insert_after_imports(tree: cst.Module, code: str, block: Block, spaced: bool = False) -> cst.Module:
    """Insert a statement after the block's leading imports; `spaced` gives it the blank lines
    that separate the imports from the code that follows, as a formatter would."""
    # Only the line break matters for one module-level line (the file's own indentation may be
    # one libcst cannot parse with, such as a form feed).
    config = cst.PartialParserConfig(default_newline=tree.default_newline)
    statement = cst.parse_statement(f"{code}{tree.default_newline}", config=config)
    body = list(tree.body)
    position = block[0] + len(_leading_imports(tree, block))
    if (
        spaced
        and position < block[1]
        and isinstance(body[position], cst.SimpleStatementLine | cst.BaseCompoundStatement)
    ):
        blank = [line for line in body[position].leading_lines if line.comment is None]  # type: ignore[union-attr]
        statement = statement.with_changes(leading_lines=blank)
    body.insert(position, statement)
    return tree.with_changes(body=body)


def _is_docstring(statement: cst.BaseSmallStatement) -> bool:
    return isinstance(statement, cst.Expr) and isinstance(statement.value, (cst.SimpleString, cst.ConcatenatedString))
