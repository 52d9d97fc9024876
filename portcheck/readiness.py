"""A verdict per target: can this code move there, and what stands in the way.

Built from one scan: its findings (by severity on each target, fixable or not), the custom
kernel inventory and the dependency findings (PC7). A package used only through optional
imports (guarded by `try`/`except ImportError`, or inside an export function: see
cuda-only-package-import, PC701) blocks nothing: it is listed apart, with where it is guarded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from portcheck import inventory, project
from portcheck.api import ScanReport
from portcheck.findings import Fact, Finding, FixSafety, Severity, cell_prefix
from portcheck.targets import packages

BLOCKED = "blocked"
NEEDS_CHANGES = "needs changes"
RUNS_WITH_WARNINGS = "runs, with warnings"
READY = "ready"

_ENVIRONMENT = ("PC703", "PC704")  # package indexes and the torch version
Used = list[tuple[packages.Package, str, tuple[str, ...]]]  # a package, how the project writes it, where


@dataclass(frozen=True)
class Readiness:
    target: str
    verdict: str
    reason: str
    errors: int
    blockers: int  # errors without an automatic fix
    fixable: int  # findings an automatic fix can remove
    warnings: int
    info: int
    kernels: int  # custom kernels to rewrite for this target
    kernel_lines: int
    kernels_without_fallback: int
    dependencies: tuple[str, ...]  # packages to replace (at warning or worse)
    optional_dependencies: tuple[str, ...]  # packages only imported optionally: not blocking
    environment: tuple[str, ...]  # package indexes and torch versions to change (at warning or worse)
    top_rules: tuple[tuple[str, int], ...]  # the most frequent rules at warning or worse
    places: tuple[str, ...] = ()  # where the verdict comes from (`path:line`), sorted: what blocks, else the errors


def place_of(finding: Finding) -> str:
    return f"{finding.path}:{cell_prefix(finding.cell)}{finding.line}"


def assess(report: ScanReport, found: Sequence[inventory.Kernel]) -> list[Readiness]:
    used, optional = _packages(report.facts)
    return [_one(report.findings, found, used, optional, target) for target in report.config.targets]


def _packages(facts: Sequence[Fact]) -> tuple[Used, Used]:
    """The CUDA-bound packages the project needs (with how it writes them), and those it only
    imports optionally (with where each optional import is)."""
    written: dict[str, set[str]] = {}
    guarded: dict[str, set[str]] = {}
    required: dict[str, set[str]] = {}
    for fact in facts:
        if fact.kind == project.DEPENDENCY:
            written.setdefault(fact.name, set()).add(fact.detail("written"))
            if fact.detail("optional"):
                guarded.setdefault(fact.name, set()).add(f"{fact.detail('optional')} at {fact.place}")
            else:
                required.setdefault(fact.name, set()).add(fact.place)
    used = [
        (packages.by_key(key), ", ".join(sorted(written[key])), tuple(sorted(places)))
        for key, places in sorted(required.items())
    ]
    optional = [
        (packages.by_key(key), f"{', '.join(sorted(written[key]))}: optional: {'; '.join(sorted(places))}", ())
        for key, places in sorted(guarded.items())
        if key not in required
    ]
    return used, optional


def _one(
    findings: Sequence[Finding],
    found: Sequence[inventory.Kernel],
    used: Used,
    optional: Used,
    target: str,
) -> Readiness:
    here = [(f, dict(f.targets)[target]) for f in findings if target in dict(f.targets)]
    levels = Counter(level for _, level in here)
    errors = [f for f, level in here if level is Severity.ERROR]
    to_port = [k for k in found if k.to_port(target)]
    rules = Counter(f.code for f, level in here if level >= Severity.WARNING)
    blocking = [(p, names, places) for p, names, places in used if p.severities()[target] >= Severity.WARNING]
    failing_packages = [places for p, _, places in blocking if p.severities()[target] is Severity.ERROR]
    environment = [f for f in errors if f.code in _ENVIRONMENT]
    verdict, reason = _verdict(len(to_port), len(failing_packages), bool(environment), errors, levels)
    if verdict == BLOCKED:
        places = {k.place for k in to_port} | {p for ps in failing_packages for p in ps}
        places |= {place_of(f) for f in environment}
    else:
        places = {place_of(f) for f in errors}
    return Readiness(
        target=target,
        verdict=verdict,
        reason=reason,
        errors=levels[Severity.ERROR],
        blockers=sum(1 for f in errors if f.fix_safety is FixSafety.NONE),
        fixable=sum(1 for f, _ in here if f.fix_safety is not FixSafety.NONE),
        warnings=levels[Severity.WARNING],
        info=levels[Severity.INFO],
        kernels=len(to_port),
        kernel_lines=sum(k.lines_of_code for k in to_port),
        kernels_without_fallback=sum(1 for k in to_port if not k.fallback),
        dependencies=tuple(f"{names}: {p.what}; instead: {p.instead}" for p, names, _ in blocking),
        optional_dependencies=tuple(where for p, where, _ in optional if p.severities()[target] >= Severity.WARNING),
        environment=_messages(here, _ENVIRONMENT),
        top_rules=tuple(sorted(rules.items(), key=lambda item: (-item[1], item[0]))[:5]),
        places=tuple(sorted(places)),
    )


def _messages(here: Sequence[tuple[Finding, Severity]], codes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted({f.message for f, level in here if f.code in codes and level >= Severity.WARNING}))


def _verdict(
    kernels_to_port: int, packages: int, environment: bool, errors: list[Finding], levels: Counter
) -> tuple[str, str]:
    if kernels_to_port or packages or environment:
        parts = []
        if kernels_to_port:
            parts.append(f"{kernels_to_port} custom kernel{'s' if kernels_to_port != 1 else ''} to rewrite")
        if packages:
            parts.append(f"{packages} CUDA-only dependenc{'ies' if packages != 1 else 'y'}")
        if environment:
            parts.append("a torch version its backend does not support")
        return BLOCKED, ", ".join(parts)
    if errors:
        return NEEDS_CHANGES, f"{len(errors)} place{'s' if len(errors) != 1 else ''} that fail or misbehave there"
    if levels[Severity.WARNING]:
        return RUNS_WITH_WARNINGS, f"{levels[Severity.WARNING]} warning{'s' if levels[Severity.WARNING] != 1 else ''}"
    return READY, "nothing found that ties the code to CUDA"
