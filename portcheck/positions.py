"""Line and column of a few nodes, without libcst's PositionProvider.

PositionProvider records a range for every node of the module, which costs nearly twice the
parse. Findings need positions for a handful of nodes in the few files that have any, so this
runs the same code generation but records only the nodes asked for. The ranges are the same as
PositionProvider's: syntactic start and end, lines from 1, columns from 0.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager

import libcst as cst
from libcst._nodes.internal import CodegenState

Range = tuple[int, int, int, int]  # start line, start column, end line, end column
_NEWLINE = re.compile(r"\r\n?|\n")


class _AllFound(Exception):
    """Raised to stop code generation once every asked-for node has its range."""


class _TargetedPositions(CodegenState):
    def __init__(self, module: cst.Module, targets: Collection[cst.CSTNode]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.targets = {id(node) for node in targets}
        self.wanted = set(self.targets)
        self.ranges: dict[int, Range] = {}
        self._starts: dict[int, tuple[int, int]] = {}
        self.line = 1
        self.column = 0

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.targets:
            self._starts[id(node)] = (self.line, self.column)

    def after_codegen(self, node: cst.CSTNode) -> None:
        """Nodes without a syntactic range (punctuation, whitespace) span all they own."""
        key = id(node)
        if key in self.targets and key not in self.ranges:
            self.ranges[key] = (*self._starts[key], self.line, self.column)
            self._stop_when_done(key)

    def _stop_when_done(self, key: int) -> None:
        self.wanted.discard(key)
        if not self.wanted:
            raise _AllFound

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\r" in value:
            segments = _NEWLINE.split(value)
            if len(segments) > 1:
                self.line += len(segments) - 1
                self.column = len(segments[-1])
            else:
                self.column += len(value)
            return
        newlines = value.count("\n")
        if newlines:
            self.line += newlines
            self.column = len(value) - value.rfind("\n") - 1
        else:
            self.column += len(value)

    @contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> Iterator[None]:
        if id(node) not in self.targets:
            yield
            return
        for hoisted in (start_node, end_node):
            if hoisted is not None:  # statements take their range from their body
                self.targets.add(id(hoisted))
        start = (self.line, self.column)
        yield
        end = (self.line, self.column)
        if start_node is not None and id(start_node) in self.ranges:
            start = self.ranges[id(start_node)][:2]
        if end_node is not None and id(end_node) in self.ranges:
            end = self.ranges[id(end_node)][2:]
        self.ranges[id(node)] = (*start, *end)
        self._stop_when_done(id(node))


def positions(module: cst.Module, nodes: Collection[cst.CSTNode]) -> dict[int, Range]:
    """Map `id(node)` to its syntactic range for each of `nodes` found in `module`."""
    if not nodes:
        return {}
    state = _TargetedPositions(module, nodes)
    try:
        module._codegen(state)
    except _AllFound:
        pass
    return state.ranges
