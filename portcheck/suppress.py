"""`# portcheck: ignore[...]` comments, applied to findings in one place for every command.

    x.cuda()  # portcheck: ignore[PC102]          this line, this rule
    # portcheck: ignore[PC1, PC203@tpu]           the next line; PC203 only for the tpu target
    # portcheck: ignore-file[PC2]                 the whole file

A code may be any prefix (`PC2`), optionally scoped to one target with `@target`. Entries that
suppress nothing are reported (PC004) so stale comments do not pile up.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from portcheck import filekinds, registry
from portcheck.findings import Finding
from portcheck.targets import TARGET_ORDER

MARKER = "portcheck:"
_DIRECTIVE = re.compile(r"#\s*portcheck:\s*(?P<kind>ignore-file|ignore)\[(?P<entries>[^\]]*)\]")


@dataclass(frozen=True, slots=True)
class Entry:
    text: str
    code_prefix: str
    target: str | None


@dataclass(frozen=True, slots=True)
class Directive:
    line: int  # where the comment is
    column: int  # 1-based
    applies_to: int | None  # the line it covers; None for ignore-file
    entries: tuple[Entry, ...]


def parse(text: str, kind: str = filekinds.PYTHON) -> list[Directive]:
    """The directives in a file's comments: found by the tokenizer in Python (so never in
    strings), by line in the `#`- or `//`-commented text files portcheck reads."""
    if MARKER not in text:
        return []
    lines = text.splitlines()
    directives = []
    comments = _comments(text) if kind == filekinds.PYTHON else _line_comments(lines)
    for line, column, comment in comments:
        match = _DIRECTIVE.search(comment)
        if match is None:
            continue
        own_line = not lines[line - 1][:column].strip()
        entries = tuple(_entry(part) for part in match["entries"].split(",") if part.strip())
        applies_to = None if match["kind"] == "ignore-file" else (line + 1 if own_line else line)
        directives.append(Directive(line, column + 1, applies_to, entries))
    return directives


def _comments(text: str) -> Iterable[tuple[int, int, str]]:
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and MARKER in token.string:
                yield token.start[0], token.start[1], token.string
    except (tokenize.TokenError, SyntaxError):
        return  # the file does not tokenize; its parse error is reported elsewhere


def _line_comments(lines: Sequence[str]) -> Iterable[tuple[int, int, str]]:
    for number, line in enumerate(lines, start=1):
        if MARKER in line:
            column = min((i for i in (line.find("#"), line.find("//")) if i >= 0), default=-1)
            if column >= 0:
                yield number, column, "#" + line[column:].lstrip("#/")


def _entry(raw: str) -> Entry:
    text = raw.strip()
    code, _, target = text.partition("@")
    return Entry(text, code.strip().upper(), target.strip().lower() or None)


UnusedReporter = Callable[[Directive, Entry, str], Finding]


def apply(
    findings: Sequence[Finding],
    directives: Sequence[Directive],
    enabled_codes: Iterable[str],
    selected_targets: Sequence[str],
    report_unused: UnusedReporter,
) -> tuple[list[Finding | None], list[Finding]]:
    """Each finding kept, narrowed to its unsuppressed targets, or dropped (None), in the input
    order; and a report for each directive entry that matched nothing."""
    used: set[tuple[int, Entry]] = set()
    kept: list[Finding | None] = []
    for finding in findings:
        targets = dict(finding.targets)
        for index, directive in enumerate(directives):
            if directive.applies_to not in (None, finding.line):
                continue
            for entry in directive.entries:
                if not entry.code_prefix or not finding.code.startswith(entry.code_prefix):
                    continue
                if entry.target is None:
                    hit = bool(targets)
                    targets.clear()
                else:
                    hit = targets.pop(entry.target, None) is not None
                if hit:
                    used.add((index, entry))
        if len(targets) == len(finding.targets):
            kept.append(finding)
        elif targets:
            narrowed = tuple(item for item in finding.targets if item[0] in targets)
            kept.append(replace(finding, targets=narrowed, severity=max(s for _, s in narrowed)))
        else:
            kept.append(None)
    enabled = set(enabled_codes)
    unused = []
    for index, directive in enumerate(directives):
        for entry in directive.entries:
            if (index, entry) not in used:
                problem = _why_unused(entry, enabled, selected_targets)
                if problem:
                    unused.append(report_unused(directive, entry, problem))
    return kept, unused


def _why_unused(entry: Entry, enabled: set[str], selected_targets: Sequence[str]) -> str:
    """Why an entry that matched nothing deserves a report; empty when we cannot tell."""
    known = [code for code in registry.all_rules() if entry.code_prefix and code.startswith(entry.code_prefix)]
    if not known:
        return f"`{entry.text}` names no portcheck rule"
    if entry.target is not None and entry.target not in TARGET_ORDER:
        return f"`{entry.text}` names no portcheck target"
    if entry.target is not None and entry.target not in selected_targets:
        return ""  # that target is not being checked in this run
    if not enabled.intersection(known):
        return ""  # the rule is not enabled here, so we cannot know whether it would fire
    return f"`{entry.text}` suppresses nothing here"
