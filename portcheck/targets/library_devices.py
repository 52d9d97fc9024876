"""The table of third-party APIs that take only some device types (library_devices.toml)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources

from portcheck.targets import SCHEMA

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class DeviceList:
    """A function of another package whose device parameter takes only the device types listed."""

    qualified: str  # as imported: "safetensors.torch.load_file"
    parameter: str
    position: int
    accepts: frozenset[str]
    raises: str


@cache
def table() -> dict[str, DeviceList]:
    raw = tomllib.loads(resources.files("portcheck.targets").joinpath("library_devices.toml").read_text("utf-8"))
    if raw.get("schema") != SCHEMA:
        raise ValueError(f"library_devices.toml: expected schema = {SCHEMA}")
    return {
        name: DeviceList(
            qualified=name,
            parameter=row["parameter"],
            position=row["position"],
            accepts=frozenset(row["accepts"]),
            raises=row["raises"],
        )
        for name, row in raw["api"].items()
    }
