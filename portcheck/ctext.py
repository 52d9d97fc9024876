"""Just enough C/C++/CUDA reading for kernel inventories: comments blanked out, braces matched,
offsets turned into lines. No preprocessor, no parser: a macro-heavy file can hide a kernel,
but nothing here can fail or execute anything."""

from __future__ import annotations

import bisect
import re

_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)


def without_comments(text: str) -> str:
    """The text with comments replaced by spaces (newlines kept, so offsets and lines hold)."""

    def blank(match: re.Match[str]) -> str:
        found = match.group(0)
        if found.startswith('"'):
            return found
        return re.sub(r"[^\n]", " ", found)

    return _COMMENT_OR_STRING.sub(blank, text)


class Lines:
    """Offset to 1-based line and column."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self._starts, offset) - 1
        return index + 1, offset - self._starts[index] + 1


def matching_brace(code: str, opening: int) -> int:
    """The offset just after the brace that closes the one at `opening` (or the end)."""
    depth = 0
    for index in range(opening, len(code)):
        char = code[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(code)


def code_lines(text: str) -> int:
    """Lines that hold something besides whitespace and comments."""
    return sum(1 for line in without_comments(text).splitlines() if line.strip())
