"""Line and column of a few nodes, without libcst's PositionProvider.

PositionProvider records a range for every node of the module, which costs nearly twice the
parse. Findings need positions for a handful of nodes in the few files that have any, so this
runs the same code generation but records only the nodes asked for. The ranges are the same as
PositionProvider's: syntactic start and end, lines from 1, columns from 0.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
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

    def __init__(self, module: cst.Module, targets: Collection[cst.CSTNode]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.targets = {id(node) for node in targets}
        self.wanted = set(self.targets)
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
