"""The folder that stable paths start from: the repository's root.

Baseline fingerprints, SARIF URIs, GitHub annotations and JSON paths name a file relative to a
folder that does not depend on where portcheck runs: the git repository's root (the nearest
folder holding `.git`, walking up from the scanned paths), else the folder of the
pyproject.toml with [tool.portcheck], else the current folder. Scanning a repository from its
parent or from a subfolder then gives the same paths, and code scanning resolves them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from portcheck.config import Config

GIT, CONFIG, CWD = "git", "config", "cwd"
DESCRIPTIONS = {GIT: "the git repository root", CONFIG: "the folder of [tool.portcheck]", CWD: "the current folder"}


@dataclass(frozen=True)
class Anchor:
    root: Path  # absolute
    kind: str  # GIT, CONFIG or CWD

    def locate(self, path: Path) -> str:
        """The path relative to the root (POSIX), or absolute when it lies outside."""
        absolute = Path(os.path.abspath(path))
        return absolute.relative_to(self.root).as_posix() if absolute.is_relative_to(self.root) else absolute.as_posix()


def anchor_of(paths: Sequence[Path], config: Config) -> Anchor:
    """The anchor of a run over `paths` with `config`."""
    start = _common_folder(paths)
    for folder in (start, *start.parents):
        if (folder / ".git").exists():  # a folder, or a file in worktrees and submodules
            return Anchor(folder, GIT)
    if config.config_path is not None:
        return Anchor(Path(os.path.abspath(config.root)), CONFIG)
    return Anchor(Path.cwd(), CWD)


def _common_folder(paths: Sequence[Path]) -> Path:
    existing = [os.path.abspath(path) for path in paths if path.exists()]
    if not existing:
        return Path.cwd()
    common = Path(os.path.commonpath(existing))
    return common if common.is_dir() else common.parent


def import_root(anchor: Anchor, paths: Sequence[Path]) -> str:
    """The folder the scanned code's imports start from, as its scripts run there: the
    repository's root, or, outside one and without a config, the scanned folder."""
    return str(anchor.root if anchor.kind != CWD else _common_folder(paths))
