"""The CUDA API table (cuda_api.toml): each CUDA-only name, its replacement, and per-target facts."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from portcheck.findings import FixSafety, Severity
from portcheck.targets import SCHEMA, TARGET_ORDER
from portcheck.targets import get as target_facts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_FIX_KEYS = {"rename", "expression", "arguments", "fix"}
_ROW_KEYS = {"aliases", "rule", "off-cuda", "severity", "replacement", "since", "guard", "note", "target"}
_ROW_KEYS |= _FIX_KEYS | {"without-accelerator"}
_TARGET_KEYS = {"severity", "replacement", "note", "drop"} | _FIX_KEYS
_FIX_TIERS = {"safe": FixSafety.SAFE, "unsafe": FixSafety.UNSAFE}

# What a call may be given: the parameter names, in order, that the replacement takes
# positionally (keywords are moved into place), or SAME_ARGUMENTS when it accepts whatever
# the CUDA name did (an alias of the same object, or the same signature).
Arguments = tuple[str, ...] | str
SAME_ARGUMENTS = "same"


@dataclass(frozen=True)
class TargetFacts:
    severity: Severity | None = None
    replacement: str = ""
    note: str = ""
    rename: str = ""
    expression: str = ""
    arguments: Arguments | None = None  # None: the row's
    fix: FixSafety | None = None  # None: the row's
    drop: bool = False  # a bare call does nothing a port needs there: fixes remove it


@dataclass(frozen=True)
class Replacement:
    """What a fix writes for one name on one target: a drop-in `name` that keeps the call's
    arguments, or an `expression` (with `{module}` placeholders) that stands for the whole call."""

    name: str
    expression: str
    arguments: Arguments
    since: tuple[int, ...] | None  # the first torch with it; None where torch does not decide
    safety: FixSafety

    @property
    def text(self) -> str:
        return self.name or self.expression


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
    expression: str = ""  # a whole-call replacement for fixes, `{torch}` standing for the module
    arguments: Arguments = ()  # what a fixable call may be given (see Arguments)
    fix: FixSafety = FixSafety.SAFE  # how safe the rename or expression is where it applies
    without_accelerator: str | None = None  # the call's value on a host with no accelerator

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

    def replacement_text(self, target: str) -> str:
        """The replacement as shown to users of `target`, its placeholders filled in."""
        facts = target_facts(target)
        return self.replacement_on(target).format(device=facts.device_type, amp_dtype=facts.amp_dtype)

    def fix_on(self, target: str) -> Replacement | None:
        """The code a fix writes on `target`: the target's own rename or expression if the
        table gives one, else the row's; None where there is neither."""
        facts = self.per_target.get(target) or TargetFacts()
        own = bool(facts.rename or facts.expression)
        name, expression = (facts.rename, facts.expression) if own else (self.rename, self.expression)
        if not (name or expression):
            return None
        arguments = facts.arguments if facts.arguments is not None else self.arguments
        safety = facts.fix or self.fix
        return Replacement(name, expression, arguments, None if own else self.since, safety)

    def dropped_on(self, target: str) -> bool:
        facts = self.per_target.get(target)
        return facts is not None and facts.drop


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _arguments(name: str, value: object) -> Arguments:
    if value == SAME_ARGUMENTS:
        return SAME_ARGUMENTS
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ValueError(f"cuda_api.toml [{name}]: arguments must be a list of names or {SAME_ARGUMENTS!r}")


def _fix(name: str, value: object) -> FixSafety:
    if value not in _FIX_TIERS:
        raise ValueError(f"cuda_api.toml [{name}]: fix must be one of {sorted(_FIX_TIERS)}")
    return _FIX_TIERS[str(value)]


def _entry(name: str, row: Mapping[str, object]) -> ApiEntry:
    unknown = set(row) - _ROW_KEYS
    if unknown:
        raise ValueError(f"cuda_api.toml [{name}]: unknown keys {sorted(unknown)}")
    if row.get("rename") and row.get("expression"):
        raise ValueError(f"cuda_api.toml [{name}]: a row has a rename or an expression, not both")
    per_target = {}
    for target, facts in dict(row.get("target", {})).items():
        if target not in TARGET_ORDER or set(facts) - _TARGET_KEYS:
            raise ValueError(f"cuda_api.toml [{name}]: bad target entry {target!r}")
        severity = Severity.parse(facts["severity"]) if "severity" in facts else None
        per_target[target] = TargetFacts(
            severity,
            facts.get("replacement", ""),
            facts.get("note", ""),
            rename=facts.get("rename", ""),
            expression=facts.get("expression", ""),
            arguments=_arguments(name, facts["arguments"]) if "arguments" in facts else None,
            fix=_fix(name, facts["fix"]) if "fix" in facts else None,
            drop=bool(facts.get("drop", False)),
        )
    without = row.get("without-accelerator")
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
        expression=str(row.get("expression", "")),
        arguments=_arguments(name, row["arguments"]) if "arguments" in row else (),
        fix=_fix(name, row["fix"]) if "fix" in row else FixSafety.SAFE,
        without_accelerator=None if without is None else str(without),
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
