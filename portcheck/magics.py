"""IPython escapes in notebook cells: masked so that libcst can parse the cell, restored exactly.

`%matplotlib inline`, `!pip install ...`, `files = !ls`, `?obj`, `obj??`, `/f x` and the
first line of a `%%time` cell are not Python. Each such line (with the lines a trailing
backslash continues it onto) becomes a placeholder on the same line, so line numbers hold: a
comment, or `pass` where the escape is indented (it may be a block's only statement). The
placeholder names the escape, so the original line comes back byte for byte after a fix,
wherever the fix moved it. Escapes are recognised where a statement starts, as IPython does:
never inside a string or brackets. A cell magic whose body is not Python (`%%bash`,
`%%writefile`) leaves the whole cell out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Cell magics whose body is Python (the list Ruff uses); any other `%%` cell is not analysed.
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})

_TOKEN = "portcheck-escape:"
_PLACEHOLDER = re.compile(rf"[ \t]*(?:pass  )?# {_TOKEN}(\d+)\.(\d+)")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")  # Python's line breaks only (not str.splitlines')
_HELP = re.compile(r"\?{0,2}[\w.\[\]*]+\?{0,2}")  # ?obj, obj?, obj.attr??, np.*load*?
_ASSIGNED = re.compile(r"[\w.,\[\]() \t*]+=[ \t]*[%!]")  # files = !ls, t = %timeit -o f()


@dataclass(frozen=True)
class Masked:
    """One cell as libcst sees it, and the escape lines its placeholders stand for."""

    cell: int  # the cell's number, part of each placeholder
    text: str  # the source with each escape line replaced on the same line
    escapes: tuple[str, ...]  # the original lines, without their line breaks, by placeholder number
    python: bool = True  # False for a cell magic whose body is not Python: the cell is left out


def lines(text: str) -> list[str]:
    """`text` split after each line break Python recognises (\\n, \\r\\n, \\r), breaks kept."""
    return [line for line in _LINE.findall(text) if line]


def mask(source: str, cell: int) -> Masked:
    """The cell with its IPython escapes replaced by placeholders."""
    rows = lines(source)
    magic = _cell_magic(rows[0]) if rows else None
    if magic is not None and magic not in PYTHON_CELL_MAGICS:
        return Masked(cell, source, (), python=False)
    out: list[str] = []
    escapes: list[str] = []
    state = _Lexer()
    continued = False
    for index, row in enumerate(rows):
        body = row.rstrip("\r\n")
        ending = row[len(body) :]
        if continued or (index == 0 and magic is not None) or (state.at_statement_start and _is_escape(body)):
            out.append(_placeholder(body, cell, len(escapes), continued) + ending)
            escapes.append(body)
            continued = body.endswith("\\")
            continue
        state.feed(row)
        out.append(row)
    return Masked(cell, "".join(out), tuple(escapes))


def restore(text: str, masked: Masked) -> str:
    """The cell's text (fixed, perhaps) with each placeholder back as its original line.
    Raises ValueError unless every placeholder of the cell is there once, in order."""
    out = []
    found = 0
    for row in lines(text):
        body = row.rstrip("\r\n")
        match = _PLACEHOLDER.fullmatch(body)
        if match is None:
            out.append(row)
            continue
        if (int(match[1]), int(match[2])) != (masked.cell, found):
            raise ValueError(f"an IPython escape of cell {match[1]} moved")
        out.append(masked.escapes[found] + row[len(body) :])
        found += 1
    if found != len(masked.escapes):
        raise ValueError(f"an IPython escape of cell {masked.cell} was lost")
    return "".join(out)


def _cell_magic(first_line: str) -> str | None:
    """The name of the cell magic on a cell's first line (`time` for `%%time -n 3`), or None."""
    if not first_line.startswith("%%"):
        return None
    words = first_line[2:].split(maxsplit=1)
    return words[0] if words else ""


def _is_escape(line: str) -> bool:
    stripped = line.strip()
    if not stripped:
        return False
    if stripped[0] in "%!?/,;":
        return True
    return (stripped.endswith("?") and _HELP.fullmatch(stripped) is not None) or _ASSIGNED.match(stripped) is not None


def _placeholder(line: str, cell: int, number: int, continuation: bool) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    statement = "pass  " if indent and not continuation else ""  # an indented escape may be a block's body
    return f"{indent}{statement}# {_TOKEN}{cell}.{number}"


class _Lexer:
    """Just enough of Python's tokenizer to tell whether a line starts a statement: open
    brackets, strings that go on to the next line, and backslash continuations."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""  # the quote of a string still open at the end of the last line
        self.backslash = False

    @property
    def at_statement_start(self) -> bool:
        return not (self.depth or self.quote or self.backslash)

    def feed(self, line: str) -> None:
        text = line.rstrip("\r\n")
        i = 0
        self.backslash = False
        while i < len(text):
            if self.quote:
                i = self._string(text, i)
                continue
            char = text[i]
            if char == "#":
                break
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char in "'\"":
                self.quote = text[i : i + 3] if text[i : i + 3] in ("'''", '"""') else char
                i += len(self.quote)
                continue
            elif char == "\\" and i == len(text) - 1:
                self.backslash = True
            i += 1
        if len(self.quote) == 1 and not text.endswith("\\"):
            self.quote = ""  # a one-line string left open: a syntax error the parser reports

    def _string(self, text: str, i: int) -> int:
        """Past the closing quote of the open string, or to the end of the line."""
        while i < len(text):
            if text[i] == "\\":
                i += 2
            elif text.startswith(self.quote, i):
                i += len(self.quote)
                self.quote = ""
                return i
            else:
                i += 1
        return i
