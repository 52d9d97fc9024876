"""What reading and scanning one file yields, apart from how a file is scanned (the engine).

The result cache (portcheck.cache) keys on a `Source` and answers with a `FileResult`, so a run
that it answers entirely reads files and builds reports without importing the engine, and
with it libcst and the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from portcheck.config import Config
from portcheck.findings import Fact, Finding
from portcheck.project import ModulePath, Project
from portcheck.sources import display_path, module_path, read_file

UNKNOWN_PROJECT = Project()  # a lone file: nothing known about the repository around it
READ_LIMIT = 64 * 2**20  # larger files are reported without being read, trigger words or not


@dataclass(frozen=True)
class FileResult:
    """What scanning one file produced."""

    path: str  # root-relative POSIX path when under the root, else as given
    findings: tuple[Finding, ...] = ()
    facts: tuple[Fact, ...] = ()  # what this file tells about the project
    skipped: bool = False  # no trigger word of any enabled rule: not parsed
    internal_error: str | None = None
    # Second pass: the first pass's reports of bare suppressions that the findings only a
    # complete project reveals did use (portcheck.suppress.Applied.used_bare).
    retracted: tuple[Finding, ...] = ()


def one_line(error: str) -> str:
    """An error as one line of output: a traceback (a bug in portcheck) by its last line, the
    exception, after whatever preceded it (`internal error: ValueError: ...`)."""
    lines = error.strip().splitlines()
    if len(lines) <= 1:
        return error
    return lines[0].split("Traceback (most recent call last):", 1)[0] + lines[-1]


@dataclass(frozen=True)
class Source:
    """One file as read: what scanning it needs, and what a cached result is keyed on."""

    path: str  # as reported
    data: bytes | None  # None when the file is too large to be worth reading
    size: int
    module: ModulePath


def read_source(path: Path, config: Config, project: Project = UNKNOWN_PROJECT) -> Source | FileResult:
    """The file's bytes, or the result of not being able to read them."""
    shown = display_path(path, config.root)
    try:
        data, size = read_file(path, max(READ_LIMIT, config.max_file_size))
    except OSError as error:
        if project.complete:
            return FileResult(shown)  # reported in the first pass
        from portcheck.engine import unreadable  # the finding's wording and severities are the engine's

        return unreadable(shown, config, f"cannot read file: {error.strerror or error}")
    return Source(shown, data, size, module_path(path, project.import_root))
