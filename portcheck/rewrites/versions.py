"""Which torch the fixed code will run on, so that a fix never writes an API it lacks.

Every API a fix inserts has a release that introduced it: the table's `since` for the CUDA API
replacements, and the constants below for what the fixes write of their own.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

if TYPE_CHECKING:
    from portcheck.rule import FileContext

_RELEASES = tuple(Version(f"{major}.{minor}") for major, minors in ((1, 14), (2, 40)) for minor in range(minors))
# `torch.accelerator.current_accelerator(check_available=True)`: the device-agnostic binding.
CHECKED_ACCELERATOR = (2, 7)
# `torch.distributed.get_default_backend_for_device(device)`.
DEFAULT_BACKEND = (2, 6)


def torch_version(ctx: FileContext) -> tuple[int, ...] | None:
    """The torch the fixed code will run on: the configured one, else the oldest the target's
    backend supports, else None (a current torch)."""
    if ctx.torch_version is not None:
        return ctx.torch_version
    return lowest_release(ctx.fix_target.torch_versions)


@cache
def lowest_release(specifier: str) -> tuple[int, ...] | None:
    if not specifier:
        return None
    try:
        allowed = SpecifierSet(specifier)
    except InvalidSpecifier:
        return None
    lowest = next((release for release in _RELEASES if release in allowed), None)
    return lowest.release if lowest is not None else None


def has(ctx: FileContext, since: tuple[int, ...] | None) -> bool:
    version = torch_version(ctx)
    return since is None or version is None or version >= since
