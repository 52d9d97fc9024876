"""Jupyter notebooks, read as one Python module and written back one cell source at a time.

A notebook runs its code cells top to bottom in one namespace: an `import torch` in cell 1 is
the binding of `torch.cuda.synchronize()` in cell 5. So the rules see one module made of the
code cells in order, IPython escapes masked (portcheck.magics), each cell after the first
behind a marker statement (`...  # portcheck-cell:N`) that keeps it apart: a suppression on a
cell's last line cannot reach into the next one, a fix cannot move code across it, and the
fixed module splits back into cells on it. Positions map back to (cell, line in the cell).
Cells are numbered from 1 among all the notebook's cells, markdown included, as Ruff does.
"""

from __future__ import annotations

import bisect
import codecs
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

import libcst as cst

from portcheck import magics, nbjson
from portcheck.findings import Fact, Finding

_MARKER = "portcheck-cell:"
_MARKER_LINE = re.compile(rf"^\.\.\.  # {_MARKER}(\d+)\n", re.MULTILINE)


class NotebookError(ValueError):
    """The file is not a notebook portcheck can read, or a fix cannot be written back into it."""


@dataclass(frozen=True)
class Cell:
    """One code cell: its number among all the notebook's cells, its source, and its source
    as libcst sees it."""

    number: int
    source: str
    masked: magics.Masked

    def line(self, number: int) -> str:
        """The text of one of the cell's lines (from 1), without its line break."""
        rows = magics.lines(self.source)
        return rows[number - 1].rstrip("\r\n") if 0 < number <= len(rows) else ""


@dataclass(frozen=True)
class Notebook:
    """A notebook's code cells, and the bytes they were read from."""

    data: bytes
    cells: tuple[Cell, ...]
    python: bool  # False for another kernel's notebook (R, Julia...): nothing to analyse

    def module(self, left_out: Iterable[int] = ()) -> Module:
        """The code cells as one module, without the cells numbered in `left_out` (those that
        do not parse) and those whose cell magic is not Python."""
        skipped = frozenset(left_out) | {cell.number for cell in self.cells if not cell.masked.python}
        parts: list[str] = []
        starts: list[int] = []
        line = 1
        for position, cell in enumerate(self.cells):
            if position:
                parts.append(f"...  # {_MARKER}{cell.number}\n")
                line += 1
            starts.append(line)
            if cell.number not in skipped:
                text = cell.masked.text
                text += "\n" if text and not text.endswith(("\n", "\r")) else ""
                parts.append(text)
                line += len(magics.lines(text))
        return Module(self, skipped, "".join(parts), tuple(starts))


def read(data: bytes) -> Notebook:
    """The notebook's code cells; NotebookError when it is not a notebook of format 4."""
    import nbformat  # a notebook's reader: most trees have none, so it is imported only for them

    text = _decoded(data)
    try:
        notebook = nbformat.reader.reads(text)
    except Exception as error:  # nbformat raises several kinds at malformed input; all mean the same
        raise NotebookError(f"not a readable Jupyter notebook: {_why(error)}") from None
    version = notebook.get("nbformat")
    if version is None:
        raise NotebookError("not a readable Jupyter notebook: it names no nbformat version")
    if version != 4:
        raise NotebookError(
            f"notebook format {version} is not read, only format 4 (Jupyter's since 2015): "
            "convert it with `jupyter nbconvert --to notebook --nbformat 4`"
        )
    cells = notebook.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("source"), str) for c in cells):
        raise NotebookError("not a readable Jupyter notebook: its cells have no source")
    code = tuple(
        Cell(number, cell["source"], magics.mask(cell["source"], number))
        for number, cell in enumerate(cells, 1)
        if cell.get("cell_type") == "code"
    )
    return Notebook(data, code, _is_python(notebook.get("metadata")))


def _why(error: Exception) -> str:
    if isinstance(error, ValueError) and "does not appear to be JSON" in str(error):
        return "not JSON"
    if isinstance(error, (AttributeError, TypeError)):
        return "its JSON is not a notebook"
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise NotebookError(f"not valid UTF-8 at byte {error.start} ({error.reason}), as a notebook must be") from None


def _is_python(metadata: object) -> bool:
    """Whether the notebook's kernel runs Python (a notebook that does not say is taken to)."""
    if not isinstance(metadata, dict):
        return True
    kernel, info = metadata.get("kernelspec"), metadata.get("language_info")
    language = (kernel.get("language") if isinstance(kernel, dict) else None) or (
        info.get("name") if isinstance(info, dict) else None
    )
    return not isinstance(language, str) or "python" in language.lower()


@dataclass(frozen=True)
class Module:
    """The module the rules see for one notebook, and the way back to its cells."""

    notebook: Notebook
    left_out: frozenset[int]  # cells not in the module: not Python, or not parsing
    code: str
    starts: tuple[int, ...]  # the module line where each code cell's text starts

    def without(self, numbers: Iterable[int]) -> Module:
        return self.notebook.module(self.left_out | set(numbers))

    def locate(self, line: int) -> tuple[Cell, int]:
        """The cell that holds a module line, and the line's number in that cell."""
        position = max(0, bisect.bisect_right(self.starts, line) - 1)
        return self.notebook.cells[position], line - self.starts[position] + 1

    def place(self, finding: Finding) -> Finding:
        """A finding with its position in the module turned into one in its cell."""
        cell, line = self.locate(finding.line)
        end_cell, end_line = self.locate(finding.end_line)
        text = cell.line(line)
        end_column = finding.end_column
        if end_cell is not cell:  # a span no node has: keep it to the first line
            end_line, end_column = line, len(text) + 1
        return replace(finding, cell=cell.number, line=line, end_line=end_line, end_column=end_column, source_line=text)

    def place_fact(self, fact: Fact) -> Fact:
        cell, line = self.locate(fact.line)
        end_cell, end_line = self.locate(fact.end_line)
        return replace(fact, cell=cell.number, line=line, end_line=end_line if end_cell is cell else line)

    def import_block(self, tree: cst.Module) -> tuple[int, int]:
        """The statements `tree.body[start:end]` of the cell that takes the imports a fix adds:
        the cell of the notebook's first import, else the first cell with code."""
        blocks: list[tuple[int, int]] = []
        start = 0
        for index, statement in enumerate(tree.body):
            if _is_marker(statement):
                blocks.append((start, index))
                start = index + 1
        blocks.append((start, len(tree.body)))
        filled = [(start, end) for start, end in blocks if end > start]
        importing = [(s, e) for s, e in filled if any(_is_import(statement) for statement in tree.body[s:e])]
        return (importing or filled or [(0, 0)])[0]

    def rebuild(self, code: str) -> bytes:
        """The notebook's bytes with each cell's source taken from the fixed module `code`;
        NotebookError when the module no longer splits into the same cells."""
        parts = _MARKER_LINE.split(code)
        numbers = [cell.number for cell in self.notebook.cells]
        if [int(number) for number in parts[1::2]] != numbers[1:]:
            raise NotebookError("a fix moved code across cells")
        changed = {}
        for cell, text in zip(self.notebook.cells, [parts[0], *parts[2::2]]):
            if cell.number in self.left_out:
                if text:
                    raise NotebookError(f"a fix wrote into cell {cell.number}, which is not analysed")
                continue
            if cell.masked.text and not cell.masked.text.endswith(("\n", "\r")) and text.endswith("\n"):
                text = text[:-1]  # the line break the module added
            try:
                source = magics.restore(text, cell.masked)
            except ValueError as error:
                raise NotebookError(str(error)) from None
            if source != cell.source:
                changed[cell.number - 1] = source
        if not changed:
            return self.notebook.data
        bom = codecs.BOM_UTF8 if self.notebook.data.startswith(codecs.BOM_UTF8) else b""
        try:
            data = bom + nbjson.replace_sources(_decoded(self.notebook.data), changed).encode()
        except (ValueError, KeyError, IndexError) as error:
            raise NotebookError(f"cannot write the fixed cells back: {error}") from None
        if read(data).module(self.left_out).code != code:
            raise NotebookError("the fixed cells do not read back as they were written")
        return data


def _is_marker(statement: cst.BaseStatement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    comment = statement.trailing_whitespace.comment
    expression = statement.body[0]
    return (
        isinstance(expression, cst.Expr)
        and isinstance(expression.value, cst.Ellipsis)
        and comment is not None
        and comment.value.startswith(f"# {_MARKER}")
    )


def _is_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )
