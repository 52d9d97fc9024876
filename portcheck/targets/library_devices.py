"""The table of third-party APIs that take only some device types (library_devices.toml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from portcheck.targets import api_table


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
    return {
        name: DeviceList(
            qualified=name,
            parameter=row["parameter"],
            position=row["position"],
            accepts=frozenset(row["accepts"]),
            raises=row["raises"],
        )
        for name, row in api_table("library_devices.toml").items()
    }
