"""Rewrites the `source` of some cells in a notebook's JSON text and leaves every other byte.

Serialising the whole notebook again would reformat what its writer chose (nbformat's
indent=1 and sorted keys, VS Code's, Colab's, escapes, number spellings). Instead, the span of
each cell's `source` value is found in the text, and only the changed ones are replaced, in
the layout they had: a list of lines with the same whitespace around its items (as nbformat
writes them), or a single string; non-ASCII escaped only where the file is pure ASCII.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from json.decoder import scanstring

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")

Span = tuple[int, int]  # [start, end) in the text


def replace_sources(text: str, sources: Mapping[int, str]) -> str:
    """`text` with the source of the cell at each index (0-based, among all cells) replaced."""
    spans = source_spans(text)
    ascii_only = text.isascii()
    out = []
    last = 0
    for index in sorted(sources):
        start, end = spans[index]
        out += [text[last:start], _encoded(text[start:end], sources[index], ascii_only)]
        last = end
    return "".join([*out, text[last:]])


def source_spans(text: str) -> list[Span]:
    """Where each cell's `source` value lies in the notebook's JSON text, in cell order."""
    top, _ = _object(text, _skip(text, 0))
    cells, _ = _array(text, top["cells"][0])
    return [_object(text, start)[0]["source"] for start, _ in cells]


def _encoded(original: str, source: str, ascii_only: bool) -> str:
    """The new source as JSON, laid out like the value it replaces."""
    if original.startswith('"'):
        return json.dumps(source, ensure_ascii=ascii_only)
    items, _ = _array(original, 0)
    if not items:
        raise ValueError("the cell had no source to take the layout from")
    opening = original[1 : items[0][0]]  # the whitespace before the first line
    closing = original[items[-1][1] : -1]  # and after the last
    rows = [json.dumps(row, ensure_ascii=ascii_only) for row in source.splitlines(keepends=True)]  # nbformat's split
    return f"[{opening}{(',' + opening).join(rows)}{closing}]" if rows else "[]"


def _skip(text: str, index: int) -> int:
    return _SPACE.match(text, index).end()  # type: ignore[union-attr]


def _object(text: str, index: int) -> tuple[dict[str, Span], int]:
    """The span of each member's value of the object at `index`, and the index past it."""
    if text[index] != "{":
        raise ValueError(f"expected an object at character {index}")
    members: dict[str, Span] = {}
    index = _skip(text, index + 1)
    if text[index] == "}":
        return members, index + 1
    while True:
        key, index = scanstring(text, _skip(text, index) + 1)
        index = _skip(text, index)
        start = _skip(text, index + 1)  # past the colon
        _, end = _DECODER.raw_decode(text, start)
        members[key] = (start, end)
        index = _skip(text, end)
        if text[index] == "}":
            return members, index + 1
        index += 1  # the comma


def _array(text: str, index: int) -> tuple[list[Span], int]:
    """The span of each item of the array at `index`, and the index past it."""
    if text[index] != "[":
        raise ValueError(f"expected an array at character {index}")
    items: list[Span] = []
    index = _skip(text, index + 1)
    if text[index] == "]":
        return items, index + 1
    while True:
        start = _skip(text, index)
        _, end = _DECODER.raw_decode(text, start)
        items.append((start, end))
        index = _skip(text, end)
        if text[index] == "]":
            return items, index + 1
        index += 1
