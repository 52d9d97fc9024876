"""Line and column of a few nodes, without libcst's PositionProvider.

PositionProvider records a range for every node of the module, which costs nearly twice the
parse. Findings need positions for a handful of nodes, so this runs the same code generation but
records only the nodes asked for, and where it knows the statements around a node, generates
only the smallest of them whose code occurs once in the module's text: that is where it sits.
The ranges are the same as PositionProvider's: syntactic start and end, lines from 1, columns
from 0.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext

import libcst as cst
from libcst._nodes.internal import CodegenState

Range = tuple[int, int, int, int]  # start line, start column, end line, end column
_NEWLINE = re.compile(r"\r\n?|\n")


class _AllFound(Exception):
    """Raised to stop code generation once every asked-for node has its range."""


class _TargetedPositions(CodegenState):
    """Counts lines only where an asked-for node starts or ends, over the tokens written since
    the last count, and skips the recording context of every other node: per token and per
    node, that bookkeeping cost as much as the code generation itself."""

    def __init__(self, module: cst.Module, targets: set[int], stop_early: bool = True) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.targets = targets
        self.wanted = set(targets) if stop_early else None
        self.ranges: dict[int, Range] = {}
        self._starts: dict[int, tuple[int, int]] = {}
        self._counted = 0  # tokens already counted into line and column
        self.line = 1
        self.column = 0

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.targets:
            self._starts[id(node)] = self._here()

    def after_codegen(self, node: cst.CSTNode) -> None:
        """Nodes without a syntactic range (punctuation, whitespace) span all they own."""
        key = id(node)
        if key in self.targets and key not in self.ranges:
            self.ranges[key] = (*self._starts[key], *self._here())
            self._stop_when_done(key)

    def _stop_when_done(self, key: int) -> None:
        if self.wanted is not None:
            self.wanted.discard(key)
            if not self.wanted:
                raise _AllFound

    def _here(self) -> tuple[int, int]:
        """The line and column after every token written so far."""
        if self._counted < len(self.tokens):
            text = "".join(self.tokens[self._counted :])
            self._counted = len(self.tokens)
            segments = _NEWLINE.split(text)
            if len(segments) > 1:
                self.line += len(segments) - 1
                self.column = len(segments[-1])
            else:
                self.column += len(text)
        return self.line, self.column

    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> AbstractContextManager[None]:
        if id(node) not in self.targets:
            return _UNRECORDED
        return self._recorded(node, start_node, end_node)

    @contextmanager
    def _recorded(
        self, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None
    ) -> Iterator[None]:
        for hoisted in (start_node, end_node):
            if hoisted is not None:  # statements take their range from their body
                self.targets.add(id(hoisted))
        start = self._here()
        yield
        end = self._here()
        if start_node is not None and id(start_node) in self.ranges:
            start = self.ranges[id(start_node)][:2]
        if end_node is not None and id(end_node) in self.ranges:
            end = self.ranges[id(end_node)][2:]
        self.ranges[id(node)] = (*start, *end)
        self._stop_when_done(id(node))


_UNRECORDED = nullcontext()


def positions(
    module: cst.Module,
    nodes: Collection[cst.CSTNode],
    *,
    text: str | None = None,
    chains: Mapping[int, Sequence[cst.CSTNode]] | None = None,
) -> dict[int, Range]:
    """Map `id(node)` to its syntactic range for each of `nodes` found in `module`. Given the
    module's `text` and, by `id`, the nodes from the module down to some of the nodes (their
    chains), those are placed by the statements around them; the rest by generating the module
    up to the last of them."""
    if not nodes:
        return {}
    ranges: dict[int, Range] = {}
    rest = list(nodes)
    if text is not None and chains and module.has_trailing_newline:
        anchors = _Anchors(module, text, {id(node) for node in nodes})
        rest = []
        for node in nodes:
            placed = anchors.place(node, chains.get(id(node), ()))
            if placed is None:
                rest.append(node)
            else:
                ranges[id(node)] = placed
    if rest:
        state = _TargetedPositions(module, {id(node) for node in rest})
        try:
            module._codegen(state)
        except _AllFound:
            pass
        ranges.update(state.ranges)
    return ranges


class _Anchors:
    """A statement's code, generated alone with the indentation of the blocks it is in, sits
    where it occurs in the module's text when it occurs there once; so do the nodes in it.
    (Not in a module without a newline at its end: there the last statement's code ends with
    one its text lacks, and the same code elsewhere would look unique.)"""

    def __init__(self, module: cst.Module, text: str, targets: set[int]) -> None:
        self.module = module
        self.text = text
        self.targets = targets
        self._placed: dict[int, tuple[int, dict[int, Range]] | None] = {}  # by statement: first line, ranges in it
        self._carriage_returns = "\r" in text

    def place(self, node: cst.CSTNode, chain: Sequence[cst.CSTNode]) -> Range | None:
        """The node's range, from the innermost statement around it whose code is unique."""
        indents: list[str] = []
        statements: list[tuple[cst.CSTNode, tuple[str, ...]]] = []
        for parent, child in zip(chain, (*chain[1:], node)):
            if type(parent) is cst.IndentedBlock:
                indents.append(self.module.default_indent if parent.indent is None else parent.indent)
            if type(parent) is cst.Module or type(parent) is cst.IndentedBlock:
                statements.append((child, tuple(indents)))
        for statement, statement_indents in reversed(statements):
            placed = self._statement(statement, statement_indents)
            if placed is not None and id(node) in placed[1]:
                first, ranges = placed
                start_line, start_column, end_line, end_column = ranges[id(node)]
                return (first + start_line - 1, start_column, first + end_line - 1, end_column)
        return None

    def _statement(self, statement: cst.CSTNode, indents: tuple[str, ...]) -> tuple[int, dict[int, Range]] | None:
        """The statement's first line and the ranges of the asked-for nodes in it, counted from
        its own first line (it starts a line, so columns need no shift); None if its code does
        not occur exactly once in the text."""
        key = id(statement)
        if key not in self._placed:
            state = _TargetedPositions(self.module, self.targets, stop_early=False)
            state.indent_tokens = list(indents)
            statement._codegen(state)
            code = "".join(state.tokens)
            offset = self.text.find(code)
            unique = offset >= 0 and self.text.find(code, offset + 1) < 0
            self._placed[key] = (self._line_at(offset), state.ranges) if unique else None
        return self._placed[key]

    def _line_at(self, offset: int) -> int:
        if self._carriage_returns:
            return len(_NEWLINE.findall(self.text, 0, offset)) + 1
        return self.text.count("\n", 0, offset) + 1
