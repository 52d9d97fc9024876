"""How much work libcst's parser would do on a file's chains of operators, before it does it.

libcst's native parser is quadratic in chains that nest the tree to their length: binary
operators (`a + b + ... `, measured at 3,000 terms: 60 s for a 66 kB file), attribute access
(`a.b.c...`), calls and subscripts (`f()()`, `x[0][0]...`). Flat lists and statements are
linear. Measured, the time grows with the chain's length times the size of the code it spans,
so that product, summed over the file's long chains, is the estimate; CPython's own parser
(and Ruff's) are linear, so nothing else would warn about such a file.

The estimate reads the bytes once, without tokenizing: strings and comments are dropped, each
operator character becomes one link of its precedence class (`&|^<>~`, `+-`, `*/%@`, and `.`
with bracketed groups, which count as one link each), commas and `;:=` end a chain, and so does
a line break outside brackets. A chain is as long as its lowest-precedence class (`a*b + c*d`
nests as deep as its `+` chain). Chains of up to 32 links, which real code stays under (at most
24 in the 2,300 files of torch), are not counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FLOOR = 32
_SKIPPED = re.compile(  # comments, strings (unterminated ones to the end) and line continuations
    rb"#[^\r\n]*"
    rb"|'''(?:[^'\\]+|\\.?|'(?!''))*(?:'''|$)"
    rb'|"""(?:[^"\\]+|\\.?|"(?!""))*(?:"""|$)'
    rb"|'(?:[^'\\\r\n]+|\\.)*'?"
    rb'|"(?:[^"\\\r\n]+|\\.)*"?'
    rb"|\\\r?\n",
    re.S,
)
_CLASSES = (b"&|^<>~", b"+-", b"*/%@", b".")  # lowest precedence first; the last also counts groups
_KEPT = b"".join(_CLASSES) + b"([{)]},;:=\n\0"
_TABLE = bytes.maketrans(
    _KEPT, b"".join(bytes([index]) * len(chars) for index, chars in enumerate(_CLASSES)) + b"((()))" + b",,,," + b"nl"
)
_DROP = bytes(byte for byte in range(256) if byte not in _KEPT)
_OPEN, _CLOSE, _END, _NEWLINE, _LINE = b"(),nl"  # token bytes after translation
_GROUP = len(_CLASSES) - 1
_INNERMOST = re.compile(rb"\(([^()]*)\)")
_LONG_RUN = re.compile(rb"[\x00-\x%02x]{%d}" % (len(_CLASSES) - 1, FLOOR + 1))


@dataclass(frozen=True)
class ChainWork:
    work: int  # the sum of length x span over the chains longer than FLOOR
    longest: int  # links in the costliest chain
    line: int  # where the costliest chain starts (0 unless asked for)


def chain_work(data: bytes, locate: bool = False) -> ChainWork:
    """The estimate for a file's bytes; with `locate`, also the line of its costliest chain
    (slower: it keeps the line breaks of strings and comments)."""
    if b"\n" not in data:
        data = data.replace(b"\r", b"\n")  # old Mac line endings
    blanked = _SKIPPED.sub(_line_breaks if locate else b"", data)
    tokens = blanked.translate(_TABLE, _DROP)
    return _measure(tokens) if _has_long_run(tokens) else ChainWork(0, 0, 0)


def _has_long_run(tokens: bytes) -> bool:
    """Whether some chain may be longer than FLOOR: a cheap test that spares almost every file
    the exact count. Innermost groups are searched, then folded into one link of their chain,
    until none is left; then the statements."""
    while True:
        groups = _INNERMOST.findall(tokens)
        if not groups:
            return _LONG_RUN.search(tokens) is not None
        if _LONG_RUN.search(b",".join(groups).translate(None, b"nl")):
            return True
        tokens = _INNERMOST.sub(bytes([_GROUP]), tokens)


def _line_breaks(skipped: re.Match[bytes]) -> bytes:
    return b"\0" * skipped[0].count(b"\n")


def _measure(tokens: bytes) -> ChainWork:
    total = worst = longest = 0
    line = worst_line = start_line = 1
    counts = [0] * len(_CLASSES)
    start = 0
    stack: list[tuple[list[int], int, int]] = []
    for index, token in enumerate(tokens):
        if token < len(_CLASSES):
            counts[token] += 1
            continue
        if token == _LINE or (token == _NEWLINE and stack):
            line += 1
            continue
        if token == _OPEN:
            stack.append((counts, start, start_line))
            counts, start, start_line = [0] * len(_CLASSES), index, line
            continue
        length = next((count for count in counts if count), 0)
        if length > FLOOR:
            total += length * (index - start)
            if length * (index - start) > worst:
                worst, longest, worst_line = length * (index - start), length, start_line
        if token == _CLOSE and stack:
            counts, start, start_line = stack.pop()
            counts[_GROUP] += 1
        else:  # a comma, a line break outside brackets, or a stray closing bracket
            if token == _NEWLINE:
                line += 1
            counts, start, start_line = [0] * len(_CLASSES), index, line
    length = next((count for count in counts if count), 0)
    if length > FLOOR:
        total += length * (len(tokens) - start)
        if length * (len(tokens) - start) > worst:
            longest, worst_line = length, start_line
    return ChainWork(total, longest, worst_line)
