"""The CUDA API table (cuda_api.toml): each CUDA-only name, its replacement, and per-target facts."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from portcheck.findings import Severity
from portcheck.targets import SCHEMA, TARGET_ORDER

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_ROW_KEYS = {"aliases", "rule", "off-cuda", "severity", "replacement", "rename", "since", "guard", "note", "target"}
_TARGET_KEYS = {"severity", "replacement", "note"}


@dataclass(frozen=True)
class TargetFacts:
    severity: Severity | None = None
    replacement: str = ""
    note: str = ""


@dataclass(frozen=True)
class ApiEntry:
    """One CUDA-only name (or a family of aliases) and what to use instead."""

    name: str
    rule: str
    off_cuda: str
    severity: Severity
    replacement: str
    rename: str = ""
    since: tuple[int, ...] | None = None
    guard: bool = False
    note: str = ""
    per_target: Mapping[str, TargetFacts] = field(default_factory=dict)

    def severity_on(self, target: str) -> Severity:
        facts = self.per_target.get(target)
        if facts is not None and facts.severity is not None:
            return facts.severity
        return Severity.OFF if target == "rocm" else self.severity

    def severities(self) -> dict[str, Severity]:
        return {target: self.severity_on(target) for target in TARGET_ORDER}

    def replacement_on(self, target: str) -> str:
        facts = self.per_target.get(target)
        return facts.replacement if facts is not None and facts.replacement else self.replacement


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _entry(name: str, row: Mapping[str, object]) -> ApiEntry:
    unknown = set(row) - _ROW_KEYS
    if unknown:
        raise ValueError(f"cuda_api.toml [{name}]: unknown keys {sorted(unknown)}")
    per_target = {}
    for target, facts in dict(row.get("target", {})).items():
        if target not in TARGET_ORDER or set(facts) - _TARGET_KEYS:
            raise ValueError(f"cuda_api.toml [{name}]: bad target entry {target!r}")
        severity = Severity.parse(facts["severity"]) if "severity" in facts else None
        per_target[target] = TargetFacts(severity, facts.get("replacement", ""), facts.get("note", ""))
    return ApiEntry(
        name=name,
        rule=str(row["rule"]),
        off_cuda=str(row["off-cuda"]),
        severity=Severity.parse(str(row["severity"])),
        replacement=str(row["replacement"]),
        rename=str(row.get("rename", "")),
        since=_version(str(row["since"])) if "since" in row else None,
        guard=bool(row.get("guard", False)),
        note=str(row.get("note", "")),
        per_target=per_target,
    )


@cache
def _load() -> tuple[dict[str, ApiEntry], dict[str, ApiEntry]]:
    raw = tomllib.loads(resources.files("portcheck.targets").joinpath("cuda_api.toml").read_text("utf-8"))
    if raw.get("schema") != SCHEMA:
        raise ValueError(f"cuda_api.toml: expected schema = {SCHEMA}")
    rows: dict[str, ApiEntry] = {}
    for name, row in raw["api"].items():
        entry = _entry(name, row)
        for alias in (name, *row.get("aliases", ())):
            if alias in rows:
                raise ValueError(f"cuda_api.toml: {alias} is listed twice")
            rows[alias] = entry
    fallbacks = {prefix: _entry(prefix, row) for prefix, row in raw["fallback"].items()}
    return rows, fallbacks


def table() -> dict[str, ApiEntry]:
    """Every listed CUDA-only qualified name, aliases included, mapped to its entry."""
    return _load()[0]


def fallbacks() -> dict[str, ApiEntry]:
    """Entries for names under a prefix (`torch.cuda.<anything unlisted>`)."""
    return _load()[1]


def lookup(qualified_name: str) -> tuple[str, ApiEntry] | None:
    """The entry for a name: its own row, the row of its longest listed prefix
    (`torch.cuda.jiterator._create_jit_fn`), or the fallback of a prefix it lies under."""
    rows, under = _load()
    name = qualified_name
    while name:
        if name in rows:
            return name, rows[name]
        name = name.rpartition(".")[0]
    name = qualified_name.rpartition(".")[0]
    while name:
        if name in under:
            return qualified_name, under[name]
        name = name.rpartition(".")[0]
    return None
