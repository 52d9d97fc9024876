"""The table of third-party APIs that read tensor values back each time they run (library_step_hazards.toml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from portcheck.targets import api_table


@dataclass(frozen=True)
class StepHazard:
    """A function, a class whose instances are called, or a method (`Class.method`) of another
    package that syncs with the host whenever it runs."""

    qualified: str  # as imported: "basicsr.utils.DiffJPEG"
    what: str
    subclasses: tuple[str, ...]  # for a method: the classes that inherit it
    made_by: tuple[str, ...] = ()  # for a method: the package's functions that make its objects
    given_tensors: bool = False  # it reads back only the tensors a call gives it (none given: no sync)


@cache
def table() -> dict[str, StepHazard]:
    return {
        name: StepHazard(
            qualified=name,
            what=row["what"],
            subclasses=tuple(row.get("subclasses", ())),
            made_by=tuple(row.get("made_by", ())),
            given_tensors=bool(row.get("given_tensors", False)),
        )
        for name, row in api_table("library_step_hazards.toml").items()
    }


@cache
def made_methods() -> dict[str, dict[str, StepHazard]]:
    """The methods whose objects a function of their package makes, by method name, then by
    that function: `add_batch` on `metric = evaluate.load(...)`."""
    found: dict[str, dict[str, StepHazard]] = {}
    for hazard in table().values():
        for factory in hazard.made_by:
            found.setdefault(hazard.qualified.rpartition(".")[2], {})[factory] = hazard
    return found


@cache
def packages() -> frozenset[str]:
    """The top-level packages the table knows (`basicsr`)."""
    return frozenset(name.split(".")[0] for name in table())


@cache
def methods() -> dict[str, StepHazard]:
    """The methods by `<class>.<method>` for the class that defines them and each subclass."""
    found: dict[str, StepHazard] = {}
    for hazard in table().values():
        owner, _, method = hazard.qualified.rpartition(".")
        if hazard.subclasses:
            for each in (owner, *hazard.subclasses):
                found[f"{each}.{method}"] = hazard
    return found
