"""Fuzzing scan and fix: no input may crash portcheck, and every fix must parse and settle.

Three sources of input: programs hypothesmith generates from Python's grammar, the same with
real CUDA-bound snippets (the rules' examples, the shipped programs) spliced in, and the shipped
programs and examples mangled the way real files get mangled (truncated, re-encoded, CRLF, BOM,
tabs, deep nesting, NUL bytes, very long lines). For each input `scan_source` must not raise,
and `fix_source` for tpu, cpu and auto, with and without unsafe fixes, must not report a bug;
what it changes must parse and keep the file's encoding, BOM and line endings, and fixing the
result again must change nothing.

The number of cases comes from the hypothesis profile (tests/conftest.py): `fuzz-ci` by default,
bounded and deterministic; the long run (at least 10,000 cases in all) is
`pytest tests/test_fuzz.py --hypothesis-profile=fuzz-long` (or HYPOTHESIS_PROFILE=fuzz-long).
"""

from __future__ import annotations

import codecs
import re
import textwrap
import tokenize
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from portcheck import registry
from portcheck.api import fix_source, scan_source
from portcheck.config import Config
from portcheck.targets import TARGET_ORDER

ROOT = Path(__file__).resolve().parents[1]
DEVICES = ("tpu", "cpu", "auto")
SCAN_CONFIG = Config(targets=TARGET_ORDER)  # every target, so every rule's per-target branch runs
BUG_MARKERS = ("internal error", "does not parse", "did not settle")  # fix errors that are portcheck bugs
BOM = codecs.BOM_UTF8
# Compiling generated and mangled code makes CPython warn (about `1()`, about invalid escapes).
pytestmark = [
    pytest.mark.filterwarnings("ignore::SyntaxWarning"),
    pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning"),
]


def _rule_examples() -> tuple[tuple[str, bytes], ...]:
    return tuple(
        (example.path, example.code if isinstance(example.code, bytes) else example.code.encode())
        for rule in registry.all_rules().values()
        for example in (*rule.VALID, *rule.INVALID)
    )


def _shipped_programs() -> tuple[tuple[str, bytes], ...]:
    found = [path for path in (ROOT / "examples").rglob("*") if path.is_file() and path.suffix != ".md"]
    found += (ROOT / "tests" / "fixtures" / "e2e").rglob("*.py")
    return tuple((path.relative_to(ROOT).as_posix(), path.read_bytes()) for path in sorted(found))


def _parses(source: str | bytes) -> bool:
    try:
        cst.parse_module(source)
    except (cst.ParserSyntaxError, SyntaxError):
        return False
    return True


def _snippets(files: tuple[tuple[str, bytes], ...]) -> list[str]:
    """The Python programs among `files` that parse, as text."""
    return sorted({code.decode() for path, code in files if path.endswith(".py") and code.isascii() and _parses(code)})


# Files as (path, contents); the path decides the kind (Python, requirements, CUDA source...).
# Half the draws take one of the few whole shipped programs, half one of the ~800 rule examples.
EXAMPLES, SHIPPED = _rule_examples(), _shipped_programs()
FILES = st.sampled_from(EXAMPLES) | st.sampled_from(SHIPPED)
SNIPPETS = st.sampled_from(_snippets(EXAMPLES)) | st.sampled_from(_snippets(SHIPPED))


# --- the invariants --------------------------------------------------------------------------


def check(source: str | bytes, path: str = "fuzzed.py") -> None:
    """Scan, then fix for every device with and without unsafe fixes, and check the results."""
    findings = scan_source(source, path=path, config=SCAN_CONFIG)  # RuntimeError on an internal error
    event(f"tool findings: {sorted({f.code for f in findings if f.code < 'PC100'})}")  # --hypothesis-show-statistics
    data = source.encode() if isinstance(source, str) else source
    for device in DEVICES:
        for unsafe in (False, True):
            check_fix(data, path, device, unsafe)


def check_fix(data: bytes, path: str, device: str, unsafe: bool) -> None:
    outcome = fix_source(data, device, path=path, unsafe=unsafe)
    assert not any(marker in outcome.error for marker in BUG_MARKERS), outcome.error
    if not outcome.changed:
        assert outcome.source == data, "an unchanged file must come back as it was"
        return
    fixed = outcome.source
    event(f"fixed for {device}")
    assert _parses(fixed), "the fixed file does not parse"
    assert _decodes(fixed), "the fixed file no longer decodes in its own encoding"
    assert fixed.startswith(BOM) == data.startswith(BOM), "the fix added or dropped the BOM"
    assert _line_endings(fixed) <= _line_endings_allowed(data), "the fix added another kind of line ending"
    if data.endswith((b"\n", b"\r")):
        assert fixed.endswith((b"\n", b"\r")), "the fix dropped the file's final line ending"
    scan_source(fixed, path=path, config=SCAN_CONFIG)
    again = fix_source(fixed, device, path=path, unsafe=unsafe)
    assert (again.error, again.applied) == ("", ()), f"a second fix is not a no-op: {again.error or again.applied}"
    assert again.source == fixed


def _decodes(data: bytes) -> bool:
    try:
        encoding, _ = tokenize.detect_encoding(BytesIO(data).readline)
        data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError):
        return False
    return True


def _line_endings(data: bytes) -> set[bytes]:
    return set(re.findall(rb"\r\n|\r|\n", data))


def _line_endings_allowed(data: bytes) -> set[bytes]:
    """The line endings a fix may write into `data`: those it has (LF if none), and CRLF where a
    removed line brings a CR and an LF together."""
    found = _line_endings(data) or {b"\n"}
    return found | {b"\r\n"} if {b"\r", b"\n"} <= found else found


# --- generated programs ----------------------------------------------------------------------

GENERATED = hypothesmith.from_grammar() | hypothesmith.from_node()
# Block headers to nest code in, each with what closes it (at the header's indentation).
BLOCKS = (
    ("def _fuzzed(x, *args, **kwargs):", ""),
    ("async def _fuzzed(x):", ""),
    ("class _Fuzzed:", ""),
    ("if __name__ == '__main__':", ""),
    ("for step in range(3):", ""),
    ("while True:", ""),
    ("with open(__file__) as handle:", ""),
    ("try:", "except Exception:\n    pass"),
    ("try:", "finally:\n    pass"),
)


def nest(body: str, blocks: list[tuple[str, str]], indent: str = "    ") -> str:
    """`body` inside `blocks`, outermost first."""
    for header, closer in reversed(blocks):
        inner = textwrap.indent(body, indent, lambda line: True) if body.strip() else f"{indent}pass\n"
        body = f"{header}\n{inner}{closer}\n" if closer else f"{header}\n{inner}"
    return body


@st.composite
def spliced(draw: st.DrawFn) -> str:
    """A generated program with a CUDA-bound snippet before, inside or after it, the whole
    nested in up to two blocks."""
    lines = draw(GENERATED).splitlines(keepends=True)
    snippet = nest(draw(SNIPPETS), draw(st.lists(st.sampled_from(BLOCKS), max_size=1)))
    at = draw(st.integers(0, len(lines)))
    body = "".join(lines[:at]) + ("\n" if at and not lines[at - 1].endswith("\n") else "") + snippet
    body += "".join(lines[at:])
    return nest(body, draw(st.lists(st.sampled_from(BLOCKS), max_size=2)))


# --- mutated files ---------------------------------------------------------------------------

Mutation = Callable[[st.DrawFn, bytes], bytes]


def _offset(draw: st.DrawFn, data: bytes) -> int:
    return draw(st.integers(0, len(data)))


def _line_start(draw: st.DrawFn, data: bytes) -> int:
    starts = [0] + [match.end() for match in re.finditer(rb"\n", data)]
    return draw(st.sampled_from(starts))


def _insert_line(draw: st.DrawFn, data: bytes, line: bytes) -> bytes:
    at = _line_start(draw, data)
    return data[:at] + line + b"\n" + data[at:]


def truncated(draw: st.DrawFn, data: bytes) -> bytes:
    return data[: _offset(draw, data)]


def latin1_with_cookie(draw: st.DrawFn, data: bytes) -> bytes:
    text = data.decode("utf-8", errors="replace") + "\nname = 'café'\n"
    cookie = draw(st.sampled_from(["# -*- coding: latin-1 -*-\n", "#!/usr/bin/env python\n# coding=iso-8859-1\n"]))
    return (cookie + text).encode("latin-1", errors="replace")


def utf16(draw: st.DrawFn, data: bytes) -> bytes:
    return data.decode("utf-8", errors="replace").encode(draw(st.sampled_from(["utf-16", "utf-16-le", "utf-16-be"])))


def invalid_utf8(draw: st.DrawFn, data: bytes) -> bytes:
    at = _offset(draw, data)
    bad = draw(st.sampled_from([b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xe9", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]))
    return data[:at] + bad + data[at:]


def line_endings(draw: st.DrawFn, data: bytes) -> bytes:
    """CRLF or CR everywhere, or on every n-th line only."""
    ending = draw(st.sampled_from([b"\r\n", b"\r"]))
    every = draw(st.integers(1, 3))
    lines = data.replace(b"\r\n", b"\n").split(b"\n")
    return b"".join(line + (ending if i % every == 0 else b"\n") for i, line in enumerate(lines[:-1])) + lines[-1]


def with_bom(draw: st.DrawFn, data: bytes) -> bytes:
    return data if data.startswith(BOM) else BOM + data


def tabs(draw: st.DrawFn, data: bytes) -> bytes:
    """Indentation in tabs, on every line or every n-th line only (mixed tabs and spaces)."""
    width = draw(st.sampled_from([4, 8]))
    every = draw(st.integers(1, 3))
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if i % every == 0:
            indent = len(line) - len(line.lstrip(b" "))
            lines[i] = b"\t" * (indent // width) + line[indent - indent % width :]
    return b"\n".join(lines)


def deep_blocks(draw: st.DrawFn, data: bytes) -> bytes:
    """The whole file nested in 50..1000 blocks (CPython stops at 100 indentation levels)."""
    depth = draw(st.integers(50, 1000) | st.integers(95, 105))
    text = data.decode("utf-8", errors="replace")
    return nest(text, [draw(st.sampled_from(BLOCKS))] * depth, indent=" ").encode()


def deep_brackets(draw: st.DrawFn, data: bytes) -> bytes:
    """A line with brackets or calls nested 50..1000 deep (CPython stops at 200)."""
    depth = draw(st.integers(50, 1000) | st.integers(190, 210))
    opener, closer = draw(st.sampled_from([(b"(", b")"), (b"[", b"]"), (b"{", b"}"), (b"f(", b")"), (b"x[", b"]")]))
    atom = draw(st.sampled_from([b"torch.cuda.current_device()", b"x.cuda()", b"'cuda'", b"1"]))
    return _insert_line(draw, data, b"_deep = " + opener * depth + atom + closer * depth)


def nul_byte(draw: st.DrawFn, data: bytes) -> bytes:
    at = _offset(draw, data)
    return data[:at] + b"\0" + data[at:]


def long_line(draw: st.DrawFn, data: bytes) -> bytes:
    """A very long string, comment, expression, or line of CUDA calls. Expressions stop at 1,500
    terms: libcst's parser is superlinear in them (4,000 terms take 15 s, 12,000 three minutes)."""
    line = draw(
        st.sampled_from([b"_long = '%s'", b"# %s"]).map(lambda form: form % (b"cuda " * 20_000))
        | st.integers(100, 1_500).map(lambda n: b"_sum = " + b" + ".join([b"x.cuda()"] * n))
        | st.integers(10, 300).map(lambda n: b"; ".join([b"torch.cuda.synchronize()", b"y = x.cuda()"] * n))
    )
    return _insert_line(draw, data, line)


def stray_character(draw: st.DrawFn, data: bytes) -> bytes:
    """One character that breaks the syntax (or the tokenizer) somewhere."""
    at = _offset(draw, data)
    return data[:at] + draw(st.sampled_from(list(b"\t\x0c\\'\"([{)]}:#@\r"))).to_bytes(1, "big") + data[at:]


MUTATIONS: tuple[Mutation, ...] = (
    truncated,
    latin1_with_cookie,
    utf16,
    invalid_utf8,
    line_endings,
    with_bom,
    tabs,
    deep_blocks,
    deep_brackets,
    nul_byte,
    long_line,
    stray_character,
)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    """A file (path, contents) after one to three mutations."""
    path, data = draw(FILES)
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3)):
        data = mutation(draw, data)
    return path, data


# --- the tests -------------------------------------------------------------------------------


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(GENERATED, st.booleans())
def test_generated_program(program: str, with_trigger: bool) -> None:
    """Random Python; a trigger word makes the rules walk it rather than skip it."""
    check(program + "\n# torch cuda\n" if with_trigger else program)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(spliced())
def test_spliced_program(source: str) -> None:
    check(source)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_file(file: tuple[str, bytes]) -> None:
    path, data = file
    check(data, path)


# --- what the fuzzing found, fixed: regressions ----------------------------------------------


def test_fix_of_deeply_nested_code() -> None:
    # The scan copes with it; rebuilding the tree would overflow Python's stack.
    source = b"x.cuda()\n_ = " + b"[" * 150 + b"1" + b"]" * 150 + b"\n"
    outcome = fix_source(source, "cpu")
    assert (outcome.source, outcome.error) == (source, "too deeply nested to rewrite; file left unchanged")


def test_fix_with_form_feed_indentation() -> None:
    # libcst's default_indent becomes "\x0c ", which it refuses to parse an inserted line with.
    outcome = fix_source(b"import torch\nx = torch.zeros(2).cuda()\nif x:\n\x0c pass\n", "auto")
    assert outcome.changed and _parses(outcome.source), outcome.error


def test_fix_keeps_final_carriage_return_after_bom() -> None:
    outcome = fix_source(BOM + b"import torch\rx = torch.zeros(1).cuda()\r", "cpu")
    assert outcome.source == BOM + b"import torch\rx = torch.zeros(1).cpu()\r"


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
@pytest.mark.parametrize("indent", ["", "    "])
def test_fix_keeps_the_final_line_ending_after_a_comment_ending_in_a_backslash(indent: str, ending: str) -> None:
    """libcst drops it (found by test_spliced_program, in CI: `#\\` ending a module)."""
    source = f"import torch\nwhile True:\n    torch.cuda.synchronize()\n{indent}# cache \\{ending}".encode()
    outcome = fix_source(source, "tpu")
    assert outcome.source == source.replace(b"torch.cuda.synchronize", b"torch.accelerator.synchronize")


def test_str_with_lone_surrogate_is_reported_not_raised() -> None:
    source = "import torch\nname = 'caf\udce9'\ntorch.cuda.synchronize()\n"
    assert [finding.code for finding in scan_source(source)] == ["PC002"]
    assert not fix_source(source, "cpu").changed
