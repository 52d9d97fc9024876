"""The table of third-party APIs whose device defaults to CUDA (library_defaults.toml)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources

from portcheck.findings import Severity
from portcheck.targets import SCHEMA

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class CudaDefault:
    """A function or class of another package that puts its work on CUDA unless given a device."""

    qualified: str  # as imported: "mmseg.apis.init_segmentor"
    parameter: str
    position: int
    default: str
    what: str
    severity: Severity


@cache
def table() -> dict[str, CudaDefault]:
    raw = tomllib.loads(resources.files("portcheck.targets").joinpath("library_defaults.toml").read_text("utf-8"))
    if raw.get("schema") != SCHEMA:
        raise ValueError(f"library_defaults.toml: expected schema = {SCHEMA}")
    return {
        name: CudaDefault(
            qualified=name,
            parameter=row["parameter"],
            position=row["position"],
            default=row["default"],
            what=row["what"],
            severity=Severity.parse(row["severity"]),
        )
        for name, row in raw["api"].items()
    }
