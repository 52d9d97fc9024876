"""The table of third-party APIs whose device defaults to CUDA (library_defaults.toml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from portcheck.findings import Severity
from portcheck.targets import api_table


@dataclass(frozen=True)
class CudaDefault:
    """A function or class of another package that puts its work on CUDA unless given a device
    (or whatever it is given, where `parameter` is empty)."""

    qualified: str  # as imported: "mmseg.apis.init_segmentor"
    parameter: str
    position: int
    default: str
    what: str
    severity: Severity
    unless: str = ""  # a keyword whose False turns the CUDA work off (timm's `use_prefetcher`)


@cache
def table() -> dict[str, CudaDefault]:
    return {
        name: CudaDefault(
            qualified=name,
            parameter=row["parameter"],
            position=row["position"],
            default=row["default"],
            what=row["what"],
            severity=Severity.parse(row["severity"]),
            unless=row.get("unless", ""),
        )
        for name, row in api_table("library_defaults.toml").items()
    }
