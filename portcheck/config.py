"""`[tool.portcheck]` in the nearest pyproject.toml, merged with command-line overrides.

The result is one frozen, picklable `Config` that worker processes receive as is.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path

from pathspec import GitIgnoreSpec

from portcheck import catalog
from portcheck import targets as target_data
from portcheck.findings import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".bzr/", ".direnv/", ".eggs/", ".git/", ".hg/", ".mypy_cache/", ".nox/", ".pants.d/",
    ".portcheck_cache/", ".pytest_cache/", ".pytype/", ".ruff_cache/", ".svn/", ".tox/",
    ".venv/", "__pycache__/", "__pypackages__/", "_build/", "buck-out/", "build/", "dist/",
    "node_modules/", "site-packages/", "venv/",
)  # fmt: skip


class ConfigError(ValueError):
    """Invalid configuration: reported to the user, exit code 2."""


@dataclass(frozen=True)
class Config:
    """Everything a scan needs to know, already validated."""

    root: Path = field(default_factory=Path.cwd)
    config_path: Path | None = None
    targets: tuple[str, ...] = target_data.DEFAULT_TARGETS
    rules: tuple[str, ...] = field(default_factory=lambda: catalog.select(None))
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    force_exclude: bool = False
    fail_on: Severity = Severity.ERROR
    torch_version: tuple[int, ...] | None = None
    max_file_size: int = 2_000_000
    # Bounds on one file's cost (portcheck.chains, portcheck.engine): the operator chains the
    # parser would take too long over, and the findings after which the analysis stops.
    max_expression_chain: int = 3000
    max_findings_per_file: int = 2000

    def with_overrides(self, **overrides: object) -> Config:
        """Apply settings given as in pyproject (kebab or snake case keys) over this config."""
        return _apply(self, {key.replace("_", "-"): value for key, value in overrides.items()})


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has a [tool.portcheck] table."""
    start = start.resolve()
    for directory in (start, *start.parents) if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and "portcheck" in _read_toml(candidate).get("tool", {}):
            return candidate
    return None


def load(start: Path, explicit: Path | None = None) -> Config:
    """The config for paths under `start`, or from `explicit` (a pyproject.toml)."""
    path = explicit or find_pyproject(start)
    if path is None:
        return Config(root=Path.cwd())
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    table = _read_toml(path).get("tool", {}).get("portcheck", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.portcheck] must be a table")
    table = {k: v for k, v in table.items() if not isinstance(v, dict) or k not in _NESTED_TABLES}
    try:
        return _apply(Config(root=path.parent.resolve(), config_path=path), table)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


SMOKE_KEYS = {"cases", "device", "reference", "train", "steps", "rtol", "atol", "timeout", "emulate"}


def smoke_settings(start: Path, explicit: Path | None = None) -> tuple[Path, dict]:
    """`[tool.portcheck.smoke]` and the folder its case specs are relative to (the
    pyproject's); empty when there is none."""
    path = explicit or find_pyproject(start)
    if path is None:
        return Path.cwd(), {}
    table = _read_toml(path).get("tool", {}).get("portcheck", {}).get("smoke", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.portcheck.smoke] must be a table")
    unknown = set(table) - SMOKE_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown smoke setting(s) {', '.join(sorted(unknown))}")
    if "cases" in table:
        table["cases"] = list(_strings("cases", table["cases"]))
    return path.parent.resolve(), table


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None


def _strings(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings")
    return tuple(v.strip() for v in value)


def _targets(key: str, value: object) -> tuple[str, ...]:
    names = _strings(key, value)
    if "all" in names:
        return target_data.TARGET_ORDER
    try:
        chosen = {target_data.get(name).name for name in names}
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if not chosen:
        raise ConfigError(f"{key} must name at least one target")
    return tuple(t for t in target_data.TARGET_ORDER if t in chosen)


def _version(key: str, value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    parts = str(value).strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ConfigError(f"{key} must look like 2.13, got {value!r}")
    return tuple(int(p) for p in parts)


def _bool(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false")
    return value


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def _size(key: str, value: object) -> int:
    """Bytes, as a number or as "10MB", "512KB", "1.5MiB" (kB, MB, GB are powers of 1000, KiB, MiB,
    GiB of 1024), so that a limit reads as it is meant."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
        size = int(float(match[1]) * _UNITS[(match[2] or "b").lower()]) if match else 0
    if size <= 0:
        raise ConfigError(f"{key} must be a positive number of bytes or a size such as 512KB or 10MB, got {value!r}")
    return size


def _count(key: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{key} must be a positive number")
    return value


def _severity(key: str, value: object) -> Severity:
    try:
        return Severity.parse(str(value))
    except ValueError as error:
        raise ConfigError(f"{key}: {error}") from None


def _per_file_ignores(key: str, value: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a table of glob = [codes]")
    try:
        return tuple(
            (pattern, tuple(sorted(catalog.expand(_strings(f"{key}.{pattern}", codes)))))
            for pattern, codes in value.items()
        )
    except ValueError as error:
        raise ConfigError(f"{key}: {error}") from None


_FIELDS: dict[str, tuple[str, Callable[[str, object], object]]] = {
    "targets": ("targets", _targets),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores),
    "exclude": ("exclude", _strings),
    "extend-exclude": ("extend_exclude", _strings),
    "respect-gitignore": ("respect_gitignore", _bool),
    "force-exclude": ("force_exclude", _bool),
    "fail-on": ("fail_on", _severity),
    "torch-version": ("torch_version", _version),
    "max-file-size": ("max_file_size", _size),
    "max-expression-chain": ("max_expression_chain", _count),
    "max-findings-per-file": ("max_findings_per_file", _count),
}
_SELECTION = ("select", "extend-select", "ignore")
_NESTED_TABLES = ("smoke",)  # sub-tables owned by other commands


def _apply(config: Config, settings: Mapping[str, object]) -> Config:
    unknown = set(settings) - set(_FIELDS) - set(_SELECTION)
    if unknown:
        known = ", ".join(sorted((*_FIELDS, *_SELECTION)))
        raise ConfigError(f"unknown setting(s) {', '.join(sorted(unknown))}; known settings: {known}")
    changes = {}
    for key, value in settings.items():
        if key in _FIELDS and value is not None:
            name, convert = _FIELDS[key]
            changes[name] = convert(key, value)
    if any(settings.get(key) is not None for key in _SELECTION):
        changes["rules"] = _select(config, settings)
    assert set(changes) <= {f.name for f in fields(Config)}
    return replace(config, **changes)


def _select(config: Config, settings: Mapping[str, object]) -> tuple[str, ...]:
    """Ruff's resolution over what the config had; a selection that leaves no rule at all is a
    mistake (`select = []`, `ignore = ["PC"]`), not a clean run."""
    base = config.rules if settings.get("select") is None else _selectors("select", settings)
    rules = tuple(sorted((set(base) | _selectors("extend-select", settings)) - _selectors("ignore", settings)))
    if not rules:
        chosen = ", ".join(f"{key} = {settings[key]!r}" for key in _SELECTION if settings.get(key) is not None)
        raise ConfigError(f"the rule selection enables no rule ({chosen})")
    return rules


def _selectors(key: str, settings: Mapping[str, object]) -> set[str]:
    try:
        return catalog.expand(_strings(key, settings.get(key) or []))
    except ValueError as error:
        raise ConfigError(f"{key}: {error}") from None


def enabled_codes(path: str, config: Config) -> tuple[str, ...]:
    """The selected rules that apply to the file at `path` (root-relative), after per-file-ignores."""
    ignored: set[str] = set()
    for pattern, codes in config.per_file_ignores:
        if _glob(pattern).match_file(path):
            ignored.update(codes)
    return tuple(code for code in config.rules if code not in ignored)


@cache
def _glob(pattern: str) -> GitIgnoreSpec:
    return GitIgnoreSpec.from_lines([pattern])
