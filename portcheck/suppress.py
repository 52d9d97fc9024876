"""Suppression comments, applied to findings in one place for every command.

    x.cuda()  # portcheck: ignore[PC102]          this line, this rule
    # portcheck: ignore[PC1, PC203@tpu]           the next statement; PC203 only for the tpu target
    x.cuda()  # portcheck: ignore                 this line, every rule
    # portcheck: ignore-file[PC2]                 the whole file (bare: every rule)
    x.cuda()  # noqa: PC102                       this line: the PC codes of a Ruff-style noqa

Where a comment applies follows Ruff (`# ruff: ignore[...]` and `# noqa`): on its own line, it
covers the whole next statement (every line of a multi-line call, or a compound statement's
header), through any comment lines in between; at the end of a line, that line, and every line
of a multi-line string or backslash continuation that ends there. A finding counts where it
starts. A `noqa` covers only the line it ends, never the next one, and a bare `# noqa` is left
to the linters it was written for: it never hides a portability finding.

A code may be any prefix (`PC2`), optionally scoped to one target with `@target`. Entries that
suppress nothing are reported (PC004) so stale comments do not pile up.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from portcheck import catalog, filekinds
from portcheck.findings import Finding
from portcheck.targets import TARGET_ORDER

MARKER = "portcheck:"
_DIRECTIVE = re.compile(
    r"#\s*portcheck:\s*(?P<form>ignore-file|ignore)(?:\s*\[(?P<entries>[^\]]*)\]|(?!\s*\[)(?![\w-]))"
)
_NOQA = re.compile(r"#\s*(?i:noqa)\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)")
_PORTCHECK_CODE = re.compile(r"PC\d+")
Span = tuple[int, int]  # first and last line


@dataclass(frozen=True, slots=True)
class Entry:
    text: str  # as written, for messages
    code_prefix: str  # empty in a bare directive: every rule
    target: str | None

    def matches(self, code: str) -> bool:
        return code.startswith(self.code_prefix)


@dataclass(frozen=True, slots=True)
class Directive:
    line: int  # where the comment is
    column: int  # 1-based
    lines: Span | None  # the lines it covers; None for the whole file
    entries: tuple[Entry, ...]
    statement: Span | None = None  # the multi-line statement a trailing comment ends, for hints

    def covers(self, line: int) -> bool:
        return self.lines is None or self.lines[0] <= line <= self.lines[1]


@dataclass
class _Layout:
    """What placing directives needs from a file's tokens."""

    comments: list[tuple[int, int, str]] = field(default_factory=list)  # line, column (0-based), text
    comment_lines: set[int] = field(default_factory=set)  # lines holding nothing but a comment
    statements: dict[int, int] = field(default_factory=dict)  # first line -> last line, multi-line ones
    joined: dict[int, int] = field(default_factory=dict)  # last line of a string or continuation -> its first


def mentioned(text: str) -> bool:
    """Whether the text may hold a directive (a cheap test before tokenizing)."""
    return MARKER in text or any(_codes(match) for match in _NOQA.finditer(text))


def parse(text: str, kind: str = filekinds.PYTHON) -> list[Directive]:
    """The directives in a file's comments: found by the tokenizer in Python (so never in
    strings), by line in the `#`- or `//`-commented text files portcheck reads."""
    if not mentioned(text):
        return []
    lines = text.splitlines()
    layout = _python_layout(text) if kind == filekinds.PYTHON else _text_layout(lines)
    directives = []
    for line, column, comment in layout.comments:
        own_line = not lines[line - 1][:column].strip()
        for form, entries in _directives_in(comment):
            covered = _covered(form, own_line, line, layout)
            statement = None if own_line else _statement_around(line, layout)
            directives.append(Directive(line, column + 1, covered, entries, statement))
    return directives


def _directives_in(comment: str) -> Iterator[tuple[str, tuple[Entry, ...]]]:
    """("ignore" | "ignore-file" | "noqa", entries) for each directive in one comment."""
    for match in _DIRECTIVE.finditer(comment):
        listed = match["entries"]
        if listed is None:
            yield match["form"], (Entry(f"# portcheck: {match['form']}", "", None),)
        else:
            yield match["form"], tuple(_entry(part) for part in listed.split(",") if part.strip())
    for match in _NOQA.finditer(comment):
        codes = _codes(match)
        if codes:
            yield "noqa", tuple(Entry(code, code, None) for code in codes)


def _codes(noqa: re.Match[str]) -> list[str]:
    """The portcheck codes of a `# noqa: ...` list; the other tools' codes are theirs."""
    return [code for code in re.split(r"[\s,]+", noqa["codes"]) if _PORTCHECK_CODE.fullmatch(code)]


def _entry(raw: str) -> Entry:
    text = raw.strip()
    code, _, target = text.partition("@")
    return Entry(text, code.strip().upper(), target.strip().lower() or None)


def _covered(form: str, own_line: bool, line: int, layout: _Layout) -> Span | None:
    if form == "ignore-file":
        return None
    if not own_line:
        return layout.joined.get(line, line), line
    if form == "noqa":
        return line, line  # a noqa covers the line it is on, which holds nothing else
    following = line + 1
    while following in layout.comment_lines:
        following += 1
    return following, layout.statements.get(following, following)


def _statement_around(line: int, layout: _Layout) -> Span | None:
    return next(((first, last) for first, last in layout.statements.items() if first < line <= last), None)


def _python_layout(text: str) -> _Layout:
    """Comments, statements, and lines joined by strings and continuations, from the tokens.
    A file that does not tokenize keeps what was read before the error (its parse error is
    reported elsewhere)."""
    layout = _Layout()
    first = None  # the first line of the statement being read
    previous: tokenize.TokenInfo | None = None
    strings: list[int] = []  # f-strings being read (3.12 tokenizes their parts), by first line
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, (start, column) = token.type, token.start
            if kind == tokenize.COMMENT:
                layout.comments.append((start, column, token.string))
                if previous is None or previous.type in (
                    tokenize.NL,
                    tokenize.NEWLINE,
                    tokenize.DEDENT,
                    tokenize.INDENT,
                ):
                    layout.comment_lines.add(start)
            elif kind == tokenize.NEWLINE and first is not None:
                if start > first:
                    layout.statements[first] = start
                first = None
            elif kind not in _LAYOUT_ONLY and first is None:
                first = start
            _join(layout, previous, token, strings)
            previous = token
    except (tokenize.TokenError, SyntaxError):
        pass
    return layout


_LAYOUT_ONLY = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER})
_FSTRING_START, _FSTRING_END = getattr(tokenize, "FSTRING_START", -1), getattr(tokenize, "FSTRING_END", -1)


def _join(layout: _Layout, previous: tokenize.TokenInfo | None, token: tokenize.TokenInfo, strings: list[int]) -> None:
    """Record the lines a trailing comment on `token`'s line also covers: a multi-line string
    ending there, or the backslash-continued lines before it."""
    start, end = token.start[0], token.end[0]
    if token.type == _FSTRING_START:
        strings.append(start)
    elif token.type == _FSTRING_END and strings:
        _link(layout, strings.pop(), end)
    elif token.type == tokenize.STRING and end > start:
        _link(layout, start, end)
    if previous is not None and previous.type not in (tokenize.NL, tokenize.NEWLINE) and start > previous.end[0]:
        _link(layout, previous.end[0], start)  # nothing but a backslash ended the previous line


def _link(layout: _Layout, first: int, last: int) -> None:
    layout.joined[last] = min(layout.joined.get(last, last), layout.joined.get(first, first))


def _text_layout(lines: Sequence[str]) -> _Layout:
    """Requirements, manifests and C++ sources: `#` or `//` comments, one line each."""
    layout = _Layout()
    for number, line in enumerate(lines, start=1):
        column = min((i for i in (line.find("#"), line.find("//")) if i >= 0), default=-1)
        if column < 0:
            continue
        if not line[:column].strip():
            layout.comment_lines.add(number)
        if MARKER in line or "noqa" in line.lower():
            layout.comments.append((number, column, "#" + line[column:].lstrip("#/")))
    return layout


UnusedReporter = Callable[[Directive, Entry, str], Finding]


@dataclass(frozen=True)
class Applied:
    """What the directives did to one file's findings."""

    kept: tuple[Finding | None, ...]  # each finding, narrowed to its unsuppressed targets, or None
    unused: tuple[Finding, ...]  # a report for each entry that matched nothing
    # What `unused` would say of the bare entries that did suppress something: a later pass
    # (findings that need the whole project) retracts those reports of the first.
    used_bare: tuple[Finding, ...] = ()


def apply(
    findings: Sequence[Finding],
    directives: Sequence[Directive],
    enabled_codes: Iterable[str],
    selected_targets: Sequence[str],
    report_unused: UnusedReporter,
    elsewhere: Collection[tuple[str, int]] = (),
) -> Applied:
    """Suppress findings; report the entries that matched nothing. `elsewhere` holds the
    (code, line) of what rules reported for targets not selected in this run: an entry that
    matches one of those is needed there, so it is not reported."""
    used: set[tuple[int, Entry]] = set()
    kept = tuple(_suppressed(finding, directives, used) for finding in findings)
    enabled = set(enabled_codes)
    unused = []
    used_bare = []
    for index, directive in enumerate(directives):
        for entry in directive.entries:
            if (index, entry) in used or any(
                directive.covers(line) and entry.matches(code) for code, line in elsewhere
            ):
                if not entry.code_prefix:
                    used_bare.append(report_unused(directive, entry, _why_unused(entry, enabled, selected_targets)))
                continue
            problem = _why_unused(entry, enabled, selected_targets)
            if problem:
                unused.append(report_unused(directive, entry, problem + _hint(directive, entry, findings)))
    return Applied(kept, tuple(unused), tuple(used_bare))


def _suppressed(finding: Finding, directives: Sequence[Directive], used: set[tuple[int, Entry]]) -> Finding | None:
    """The finding narrowed to the targets no directive suppresses, or None."""
    targets = dict(finding.targets)
    for index, directive in enumerate(directives):
        if not directive.covers(finding.line):
            continue
        for entry in directive.entries:
            if not entry.matches(finding.code):
                continue
            if entry.target is None:
                hit = bool(targets)
                targets.clear()
            else:
                hit = targets.pop(entry.target, None) is not None
            if hit:
                used.add((index, entry))
    if len(targets) == len(finding.targets):
        return finding
    if not targets:
        return None
    narrowed = tuple(item for item in finding.targets if item[0] in targets)
    return replace(finding, targets=narrowed, severity=max(s for _, s in narrowed))


def _why_unused(entry: Entry, enabled: set[str], selected_targets: Sequence[str]) -> str:
    """Why an entry that matched nothing deserves a report; empty when we cannot tell."""
    known = [code for code in catalog.entries() if entry.matches(code)]
    if not known:
        return f"`{entry.text}` names no portcheck rule"
    if entry.target is not None and entry.target not in TARGET_ORDER:
        return f"`{entry.text}` names no portcheck target"
    if entry.target is not None and entry.target not in selected_targets:
        return ""  # that target is not being checked in this run
    if not enabled.intersection(known):
        return ""  # the rule is not enabled here, so we cannot know whether it would fire
    return f"`{entry.text}` suppresses nothing here"


def _hint(directive: Directive, entry: Entry, findings: Sequence[Finding]) -> str:
    """Where to move a comment that ends a multi-line statement whose finding starts above it."""
    if directive.statement is None:
        return ""
    first, last = directive.statement
    starts = sorted({f.line for f in findings if first <= f.line <= last and entry.matches(f.code)})
    if not starts:
        return ""
    return (
        f": the finding starts on line {starts[0]}; put the comment at the end of that line,"
        " or on its own line above the statement"
    )
