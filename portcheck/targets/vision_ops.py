"""torchvision's compiled ops per target (vision_ops.toml): which have a kernel, which run on
the CPU, which raise, and which return data-dependent shapes."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from portcheck.findings import Severity
from portcheck.targets import SCHEMA, TARGET_ORDER

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SUPPORTED, CPU_FALLBACK, FAILS = "supported", "cpu-fallback", "fails"
STATUS_SEVERITY = {SUPPORTED: Severity.OFF, CPU_FALLBACK: Severity.WARNING, FAILS: Severity.ERROR}


@dataclass(frozen=True)
class Support:
    """What one target does with one op, and the source that says so."""

    status: str
    note: str


@dataclass(frozen=True)
class VisionOp:
    name: str  # "nms": torchvision::nms
    calls: tuple[str, ...]  # functions and modules that run it, and detection models whose forward does
    data_dependent: bool
    instead: str
    support: Mapping[str, Support]  # by target

    def severity_on(self, target: str) -> Severity:
        return STATUS_SEVERITY[self.support[target].status]


def _support(where: str, row: Mapping[str, object]) -> Support:
    status = str(row.get("status"))
    if status not in STATUS_SEVERITY or not row.get("note"):
        raise ValueError(f"vision_ops.toml [{where}]: a status ({', '.join(STATUS_SEVERITY)}) and a note")
    return Support(status, str(row["note"]))


def _support_by_target(name: str, targets: Mapping[str, Mapping[str, object]]) -> dict[str, Support]:
    if set(targets) != set(TARGET_ORDER):
        raise ValueError(f"vision_ops.toml: every target needs an entry, and only known ones: {sorted(targets)}")
    result = {}
    for target, row in targets.items():
        own = dict(row.get("op", {})).get(name)  # type: ignore[call-overload]
        result[target] = _support(f"target.{target}.op.{name}" if own else f"target.{target}", own or row)
    return result


@cache
def ops() -> tuple[VisionOp, ...]:
    raw = tomllib.loads(resources.files("portcheck.targets").joinpath("vision_ops.toml").read_text("utf-8"))
    if raw.get("schema") != SCHEMA:
        raise ValueError(f"vision_ops.toml: expected schema = {SCHEMA}")
    unknown = {op for row in raw["target"].values() for op in row.get("op", {})} - set(raw["op"])
    if unknown:
        raise ValueError(f"vision_ops.toml: per-target entries for unknown ops {sorted(unknown)}")
    return tuple(
        VisionOp(
            name=name,
            calls=(*row["calls"], *row.get("models", ())),
            data_dependent=row.get("output") == "data-dependent",
            instead=row["instead"],
            support=_support_by_target(name, raw["target"]),
        )
        for name, row in raw["op"].items()
    )


@cache
def _by_call() -> dict[str, tuple[VisionOp, ...]]:
    found: dict[str, tuple[VisionOp, ...]] = {}
    for op in ops():
        for call in op.calls:
            found[call] = (*found.get(call, ()), op)
    return found


def by_call(qualified_name: str) -> tuple[str, tuple[VisionOp, ...]] | None:
    """The ops a qualified name runs, with the listed name it was found under: the name itself,
    or for an overload of an op (`torch.ops.torchvision.nms.default`) the op's name."""
    for name in (qualified_name, qualified_name.rpartition(".")[0]):
        found = _by_call().get(name)
        if found and (name == qualified_name or name.startswith("torch.ops.")):
            return name, found
    return None
