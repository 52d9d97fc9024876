"""Value types shared by the engine, the reporters and the fixer.

Findings are frozen and made only of strings, ints and tuples so that worker processes can
return them by pickling and reporters can serialise them without knowing about libcst.
"""

from __future__ import annotations

import enum
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace


class Severity(enum.IntEnum):
    """How much a finding matters on one target; ordered so that `max()` picks the worst."""

    OFF = 0
    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            valid = ", ".join(s.label for s in cls if s is not cls.OFF)
            raise ValueError(f"unknown severity {text!r} (expected one of: {valid})") from None

    @property
    def label(self) -> str:
        return self.name.lower()


class FixSafety(enum.Enum):
    """Ruff's applicability tiers: safe fixes keep behaviour on the target, unsafe may not."""

    NONE = "none"
    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem at one place, with the targets it matters on and how much."""

    path: str  # relative to the project root, POSIX separators
    code: str
    name: str
    message: str
    hint: str  # what to do instead; may be empty
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, exclusive (SARIF convention)
    severity: Severity  # the worst over `targets`
    targets: tuple[tuple[str, Severity], ...]  # selected targets where it is not off
    fix_safety: FixSafety = FixSafety.NONE
    source_line: str = ""  # the text of `line`, for reporters and fingerprints
    fingerprint: str = ""
    cell: int | None = None  # in a notebook: the cell (from 1, among all cells); lines count within it

    @property
    def sort_key(self) -> tuple[str, int, int, int, str, str]:
        return (self.path, self.cell or 0, self.line, self.column, self.code, self.message)

    @property
    def position(self) -> str:
        """`line:column`, or `cell 3:line:column` in a notebook (Ruff's form)."""
        return f"{cell_prefix(self.cell)}{self.line}:{self.column}"

    @property
    def target_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.targets)


def with_fingerprints(findings: Iterable[Finding], locations: Mapping[str, str] | None = None) -> list[Finding]:
    """Sort findings and give each a fingerprint that survives unrelated edits.

    The fingerprint hashes the rule, the path (its location from the repository root, by
    `locations`, so that it does not depend on where portcheck runs), the stripped text of the
    finding's line and the occurrence count of that triple, not the line number: inserting
    lines above a finding keeps its fingerprint, which is what baselines and SARIF's
    partialFingerprints need. Nor the cell of a notebook: inserting a cell above keeps it too.
    """
    ordered = sorted(findings, key=lambda f: f.sort_key)
    located = locations or {}
    seen: Counter[tuple[str, str, str]] = Counter()
    result = []
    for finding in ordered:
        key = (finding.code, located.get(finding.path, finding.path), finding.source_line.strip())
        seen[key] += 1
        digest = hashlib.sha256("\0".join((*key, str(seen[key]))).encode()).hexdigest()[:20]
        result.append(replace(finding, fingerprint=digest))
    return result


@dataclass(frozen=True, slots=True)
class Fact:
    """Something one file tells about the whole project (a kernel it defines, an op it
    registers for CUDA, a call it makes), combined across files after the scan."""

    kind: str
    name: str
    path: str
    line: int
    end_line: int
    details: tuple[tuple[str, str], ...] = ()
    cell: int | None = None  # in a notebook: the cell, within which the lines count

    @property
    def place(self) -> str:
        """`path:line`, or `path:cell 3:line` in a notebook."""
        return f"{self.path}:{cell_prefix(self.cell)}{self.line}"

    def detail(self, key: str, default: str = "") -> str:
        return dict(self.details).get(key, default)


def cell_prefix(cell: int | None) -> str:
    """What goes between a path and a line number: `cell 3:` in a notebook, else nothing."""
    return "" if cell is None else f"cell {cell}:"
