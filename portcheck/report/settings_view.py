"""`scan --show-settings`: the settings a scan uses for one path, after the pyproject and the
command line are merged, and the rules left for that file after its per-file-ignores, as the
`[tool.portcheck]` table that would say the same (Ruff's `--show-settings`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from portcheck import filekinds
from portcheck.config import Config, enabled_codes
from portcheck.sources import display_path


def render(config: Config, path: Path, out: TextIO) -> None:
    shown = display_path(path, config.root)
    folder = path.is_dir()
    kind = "folder" if folder else filekinds.kind_of(shown) or filekinds.given_kind(shown)
    out.write(f"Settings for: {path}\n")
    out.write(f"Config file: {config.config_path or 'none (the defaults)'}\n")
    out.write(f"Project root: {config.root}\n")
    out.write(f"Kind: {kind}\n\n[tool.portcheck]\n")
    for key, value in _table(config, config.rules if folder else enabled_codes(shown, config)):
        out.write(f"{key} = {value}\n")


def _table(config: Config, rules: tuple[str, ...]) -> list[tuple[str, str]]:
    ignores = ", ".join(
        f"{json.dumps(pattern)} = {json.dumps(list(codes))}" for pattern, codes in config.per_file_ignores
    )
    version = ".".join(map(str, config.torch_version)) if config.torch_version else "any"
    return [
        ("targets", json.dumps(list(config.targets))),
        ("select", json.dumps(list(rules))),
        ("per-file-ignores", f"{{ {ignores} }}" if ignores else "{}"),
        ("exclude", json.dumps(list(config.exclude))),
        ("extend-exclude", json.dumps(list(config.extend_exclude))),
        ("respect-gitignore", json.dumps(config.respect_gitignore)),
        ("force-exclude", json.dumps(config.force_exclude)),
        ("fail-on", json.dumps(config.fail_on.label)),
        ("torch-version", json.dumps(version)),
        ("max-file-size", str(config.max_file_size)),
    ]
