"""libcst parsing that cannot take the process down.

libcst's native parser recurses on the C stack: about 1,200 nested brackets or a 10,000-term
expression overflow an 8 MB thread stack and kill the process with a segmentation fault, not
an exception (and in a worker, the whole process pool with it). Two defences:

* brackets nested deeper than CPython's own limit (200) are not valid Python: such files are
  checked with `ast.parse`, which fails cleanly, and reported without calling libcst;
* parsing runs on one long-lived thread with a 1 GiB stack (address space, touched only as
  needed), so long flat expressions that CPython accepts parse too.

And one bound on time: libcst is quadratic in long operator chains, which are estimated first
(portcheck.chains) and refused over `max-expression-chain`.
"""

from __future__ import annotations

import ast
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import accumulate
from math import isqrt

import libcst as cst

from portcheck.chains import chain_work

PARSER_STACK_BYTES = 1 << 30
PYTHON_MAX_NESTING = 200  # CPython's tokenizer refuses deeper bracket nesting
_BRACKET_DEPTH = bytes.maketrans(b"([{)]}", b"\x01\x01\x01\x02\x02\x02")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"([{)]}")


class ParseFailure(Exception):
    """Why a file could not be parsed, and where."""

    def __init__(self, line: int, column: int, detail: str) -> None:
        super().__init__(detail)
        self.line, self.column, self.detail = line, column, detail


_executor: tuple[int, ThreadPoolExecutor] | None = None


def _parser_thread() -> ThreadPoolExecutor:
    """The big-stack thread of this process (a forked worker makes its own)."""
    global _executor
    if _executor is None or _executor[0] != os.getpid():
        previous = threading.stack_size(PARSER_STACK_BYTES)
        try:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="portcheck-parser")
            pool.submit(int).result()  # start the thread while the large stack size is set
        finally:
            threading.stack_size(previous)
        _executor = (os.getpid(), pool)
    return _executor[1]


def bracket_depth(data: bytes) -> int:
    """The deepest bracket nesting, counting brackets in strings and comments too (an upper
    bound of the real nesting, cheap enough for every parsed file)."""
    brackets = data.translate(_BRACKET_DEPTH, _NOT_BRACKETS)
    return max(accumulate(1 if b == 1 else -1 for b in brackets), default=0)


class TooLong(Exception):
    """The file's operator chains would take libcst too long to parse (portcheck.chains)."""

    def __init__(self, line: int, detail: str) -> None:
        super().__init__(detail)
        self.line, self.detail = line, detail


def parse(data: bytes, text: str, max_chain: int) -> cst.Module:
    """Parse a file, or raise ParseFailure, or TooLong when its operator chains weigh more
    than a chain of `max_chain` names."""
    if chain_work(data).work > max_chain**2:
        raise _too_long(data, max_chain)
    if bracket_depth(data) > PYTHON_MAX_NESTING:
        try:
            ast.parse(text)
        except (SyntaxError, RecursionError, MemoryError, ValueError) as error:
            raise describe(text, error) from None
    try:
        return _parser_thread().submit(cst.parse_module, data).result()
    except (cst.ParserSyntaxError, SyntaxError, RecursionError, MemoryError) as error:
        raise describe(text, error) from None


def _too_long(data: bytes, max_chain: int) -> TooLong:
    found = chain_work(data, locate=True)
    return TooLong(
        found.line,
        f"an expression on line {found.line} is too long to parse in reasonable time: it chains "
        f"{found.longest:,} operations, as costly as a chain of {isqrt(found.work):,} names "
        f"(max-expression-chain is {max_chain:,})",
    )


def describe(text: str, error: Exception) -> ParseFailure:
    """Prefer CPython's message (clearer, e.g. for Python 2 print) over libcst's token list."""
    if isinstance(error, SyntaxError) and not isinstance(error, cst.ParserSyntaxError):
        return ParseFailure(error.lineno or 1, error.offset or 1, f"syntax error: {error.msg}")
    try:
        ast.parse(text)
    except SyntaxError as python_error:
        return ParseFailure(python_error.lineno or 1, python_error.offset or 1, f"syntax error: {python_error.msg}")
    except (RecursionError, MemoryError, ValueError):
        return ParseFailure(1, 1, "too deeply nested: CPython cannot compile it either")
    if isinstance(error, (RecursionError, MemoryError)):
        return ParseFailure(1, 1, "too deeply nested to parse")
    message = str(getattr(error, "message", error)).splitlines()[0]
    found = re.search(r"error at (\d+):(\d+)", message)
    line, column = (int(found[1]), int(found[2]) + 1) if found else (1, 1)
    return ParseFailure(line, column, f"libcst cannot parse this file: {message}")
