"""Every rule as data: code, name, family, worst severity and documentation, generated from the
rule classes into catalog.json by `python -m portcheck.rule_docs` (`make docs`; a test fails
while the committed file differs from what the rules say).

Choosing rules (the default selection, selectors, per-file-ignores) and describing them
(SARIF) read this file instead of importing the rules, which import libcst: a run that the
cache answers imports neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from portcheck import __version__
from portcheck.findings import Severity

FILE = Path(__file__).with_name("catalog.json")
HELP_URL = "https://github.com/portcheck/portcheck/blob/v{version}/docs/rules/{code}.md"


@dataclass(frozen=True)
class Entry:
    """One rule, as its class describes it."""

    code: str
    name: str
    family: str  # its folder under portcheck/rules/
    headline: str  # the summary's first sentence (portcheck.rule.headline)
    worst: Severity  # its highest severity on any target
    sections: tuple[tuple[str, str], ...]  # the docstring's `## Section`s: (title, body)


@cache
def entries() -> dict[str, Entry]:
    """Every rule by code, sorted by code."""
    document = json.loads(FILE.read_text(encoding="utf-8"))
    return {
        code: Entry(
            code,
            fields["name"],
            fields["family"],
            fields["headline"],
            Severity.parse(fields["worst"]),
            tuple((title, body) for title, body in fields["sections"]),
        )
        for code, fields in sorted(document.items())
    }


def help_uri(code: str) -> str:
    """The rule's page (docs/rules/, portcheck.rule_docs) at the release that is running."""
    return HELP_URL.format(version=__version__, code=code)


def expand(selectors: Iterable[str]) -> set[str]:
    """Codes matching each selector: `ALL`, a prefix such as `PC` or `PC2`, or a full code. An
    empty selector (`--select ""`, `"PC2,"`) is refused: it would select nothing, silently."""
    codes = entries()
    result: set[str] = set()
    for selector in selectors:
        wanted = selector.strip().upper()
        if not wanted:
            raise ValueError(
                f"empty rule selector {selector!r}; give a code such as PC203, a prefix such as PC2, or ALL"
            )
        matched = set(codes) if wanted == "ALL" else {c for c in codes if c.startswith(wanted)}
        if not matched:
            raise ValueError(
                f"unknown rule selector {selector!r}; valid codes: {', '.join(codes)} "
                "(or a prefix of them such as PC2, or ALL)"
            )
        result |= matched
    return result


def select(
    select: Iterable[str] | None,
    extend_select: Iterable[str] = (),
    ignore: Iterable[str] = (),
) -> tuple[str, ...]:
    """Ruff's resolution: `select` (default ALL), plus `extend-select`, minus `ignore`."""
    chosen = expand(["ALL"] if select is None else select) | expand(extend_select)
    return tuple(sorted(chosen - expand(ignore)))
