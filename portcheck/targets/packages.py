"""The table of CUDA-bound third-party packages (packages.toml) and lookups into it."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from portcheck.findings import Severity
from portcheck.targets import SCHEMA, TARGET_ORDER

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# CUDA's own packages: NVIDIA's wheels, CUDA builds by suffix, and the nvidia conda channel's
# toolkit pieces (`cuda-cudart`, `libcublas`, `libnvjpeg-dev`...)
_CUDA_WHEEL = re.compile(
    r"^(nvidia-.+|cupy-cuda.+|.+-cu1\d\d?|cuda-.+|libcu(blas|fft|rand|solver|sparse|file|pti)(-.+)?"
    r"|libnv(jpeg|jitlink|vm)(-.+)?|libnpp(-.+)?)$"
)


@dataclass(frozen=True)
class Package:
    key: str
    imports: tuple[str, ...]
    pip: tuple[str, ...]
    what: str
    instead: str
    severity: Severity
    per_target: dict[str, Severity] = field(default_factory=dict)
    # The only targets with a build of the package, where one is known to fail elsewhere.
    installs_on: frozenset[str] | None = None

    def severities(self) -> dict[str, Severity]:
        return {target: self.per_target.get(target, self.severity) for target in TARGET_ORDER}

    def fails_to_import(self) -> bool:
        """Whether importing the package fails on some target: no build there."""
        return self.installs_on is not None and bool(set(TARGET_ORDER) - self.installs_on)


def normalize(distribution: str) -> str:
    """PEP 503 normalisation: `Flash_Attn` and `flash-attn` are the same project."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


@cache
def packages() -> tuple[Package, ...]:
    raw = tomllib.loads(resources.files("portcheck.targets").joinpath("packages.toml").read_text("utf-8"))
    if raw.get("schema") != SCHEMA:
        raise ValueError(f"packages.toml: expected schema = {SCHEMA}")
    result = []
    for key, row in raw["package"].items():
        per_target = {t: Severity.parse(v["severity"]) for t, v in row.get("target", {}).items()}
        installs_on = frozenset(row["installs_on"]) if "installs_on" in row else None
        if (set(per_target) | (installs_on or set())) - set(TARGET_ORDER):
            raise ValueError(f"packages.toml [{key}]: unknown target")
        result.append(
            Package(
                key=key,
                imports=tuple(row["imports"]),
                pip=tuple(normalize(name) for name in row["pip"]),
                what=row["what"],
                instead=row["instead"],
                severity=Severity.parse(row["severity"]),
                per_target=per_target,
                installs_on=installs_on,
            )
        )
    return tuple(result)


@cache
def import_roots() -> frozenset[str]:
    """The top-level names of Triton and the listed packages (`flash_attn`, `deepspeed`)."""
    return frozenset({"triton", *(name.split(".", 1)[0] for package in packages() for name in package.imports)})


def by_key(key: str) -> Package:
    return next(package for package in packages() if package.key == key)


@cache
def by_import(module: str) -> Package | None:
    """The package an import belongs to (`flash_attn.flash_attn_interface` is flash_attn);
    asked of every import and call name, so kept."""
    for package in packages():
        if any(module == name or module.startswith(name + ".") for name in package.imports):
            return package
    return None


def by_distribution(distribution: str) -> Package | None:
    """The package a declared requirement names (also as a CUDA build, `cuml-cu11`); unlisted
    `nvidia-*` and CUDA-suffixed wheels count as CUDA runtime libraries."""
    name = normalize(distribution)
    # RAPIDS' `cuml-cu11` is cuml built for CUDA 11; `tensorrt-cu12-libs` a part of TensorRT's
    base = re.sub(r"-cu1\d\d?(-[a-z]+)*$", "", name)
    for package in packages():
        if name in package.pip or base in package.pip:
            return package
    if _CUDA_WHEEL.match(name):
        return next(p for p in packages() if p.key == "cuda_runtime_wheels")
    return None
