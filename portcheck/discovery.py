"""Which files to scan: paths, default and configured excludes, .gitignore, and the prefilter."""

from __future__ import annotations

import errno
import os
import re
import stat
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath

from pathspec import GitIgnoreSpec

from portcheck.config import Config
from portcheck.filekinds import kind_of


@dataclass(frozen=True)
class Discovery:
    """The files to scan, sorted, and one message per path that could not be used."""

    files: tuple[Path, ...]
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Tracked:
    """What git tracks in the repository at `top`: .gitignore hides only untracked files (git's
    own rule), so VAR's `requirements.txt`, tracked beside a `*.txt` pattern, is the project's.
    Asked of git once, and only once a pattern would hide something; nothing where git cannot
    tell (not installed, not a real repository)."""

    top: Path

    @cached_property
    def _paths(self) -> tuple[frozenset[str], frozenset[str]]:
        """The tracked files, and the directories that hold them, relative to `top`."""
        try:
            listed = subprocess.run(
                ["git", "-C", str(self.top), "ls-files", "-z"], capture_output=True, check=True, timeout=60
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return frozenset(), frozenset()
        files = frozenset(name for name in os.fsdecode(listed).split("\0") if name)
        folders = frozenset(str(parent) for name in files for parent in PurePosixPath(name).parents)
        return files, folders

    def holds(self, path: Path, is_dir: bool) -> bool:
        try:
            relative = path.relative_to(self.top).as_posix()
        except ValueError:
            return False
        files, folders = self._paths
        return relative in (folders if is_dir else files)


@dataclass
class _IgnoreRules:
    """The .gitignore files that apply at one depth of the walk, deepest last, and what the
    repository tracks all the same."""

    specs: list[tuple[Path, GitIgnoreSpec]] = field(default_factory=list)
    tracked: _Tracked | None = None

    def with_file(self, directory: Path) -> _IgnoreRules:
        spec = _read_spec(directory / ".gitignore")
        return _IgnoreRules([*self.specs, (directory, spec)], self.tracked) if spec else self

    def ignores(self, path: Path, is_dir: bool) -> bool:
        for base, spec in reversed(self.specs):
            try:
                relative = path.relative_to(base).as_posix()
            except ValueError:
                continue
            result = spec.check_file(relative + "/" if is_dir else relative)
            if result.include is not None:
                return result.include and not (self.tracked is not None and self.tracked.holds(path, is_dir))
        return False


def _read_spec(path: Path) -> GitIgnoreSpec | None:
    if not path.is_file():  # absent, or a FIFO or device that reading would hang on
        return None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return GitIgnoreSpec.from_lines(lines) if lines else None


def _ancestor_ignores(directory: Path) -> _IgnoreRules:
    """.gitignore files above the walk's start, up to the repository that holds it."""
    chain = [directory, *directory.parents]
    top = next((i for i, d in enumerate(chain) if (d / ".git").exists()), None)
    if top is None:
        return _IgnoreRules()
    rules = _IgnoreRules(tracked=_Tracked(chain[top]))
    exclude = _read_spec(chain[top] / ".git" / "info" / "exclude")
    if exclude:
        rules.specs.append((chain[top], exclude))
    for ancestor in reversed(chain[1 : top + 1]):
        rules = rules.with_file(ancestor)
    return rules


def discover(paths: Sequence[Path], config: Config) -> Discovery:
    """Expand files and directories into the sorted, de-duplicated list of files to scan."""
    excluded = GitIgnoreSpec.from_lines((*config.exclude, *config.extend_exclude))
    files: dict[Path, None] = {}
    errors: list[str] = []
    for given in paths:
        try:
            is_dir = stat.S_ISDIR(given.stat().st_mode)
        except OSError as error:
            errors.append(f"{given}: {_why_unusable(given, error)}")
            continue
        real = given.resolve()
        base = config.root if real.is_relative_to(config.root) else (real if is_dir else real.parent)
        if _is_excluded(real, base, excluded, is_dir):
            if config.force_exclude:
                continue
            base = real  # asked for by name: its contents count from here, as if it were a root
        if not is_dir:
            if kind_of(given.name) is None and given.suffix not in ("", ".txt", ".yaml", ".yml"):
                errors.append(f"{given}: not a kind of file portcheck reads ({_READ_KINDS})")
            else:
                files[given] = None
            continue
        ignores = _ancestor_ignores(real) if config.respect_gitignore else _IgnoreRules()
        for path in _walk(given, real, base, config, excluded, ignores, errors):
            files[path] = None
    return Discovery(tuple(sorted(files)), tuple(errors))


_READ_KINDS = "Python, Jupyter notebooks, CUDA/C++ sources, requirements, pyproject.toml, setup.cfg, conda environment files, Dockerfiles, cog.yaml, YAML configs"


def _why_unusable(path: Path, error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "symbolic link loop"
    if error.errno == errno.ENOENT:
        return "broken symbolic link" if path.is_symlink() else "path does not exist"
    return f"cannot access: {error.strerror or error}"


def _is_excluded(path: Path, base: Path, excluded: GitIgnoreSpec, is_dir: bool) -> bool:
    relative = path.relative_to(base).as_posix()
    if relative == ".":
        return False
    return excluded.match_file(relative + "/" if is_dir else relative)


def _walk(
    shown: Path,
    real: Path,
    base: Path,
    config: Config,
    excluded: GitIgnoreSpec,
    ignores: _IgnoreRules,
    errors: list[str],
) -> Iterator[Path]:
    """Files under a directory; symlinked directories are not followed (no loops)."""
    if config.respect_gitignore:
        ignores = ignores.with_file(real)
    try:
        entries = sorted(os.scandir(real), key=lambda e: e.name)
    except OSError as error:
        errors.append(f"{shown}: cannot list directory: {error.strerror or error}")
        return
    for entry in entries:
        path_real = real / entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if _is_excluded(path_real, base, excluded, is_dir) or ignores.ignores(path_real, is_dir):
            continue
        if is_dir:
            yield from _walk(shown / entry.name, path_real, base, config, excluded, ignores, errors)
        elif kind_of(f"{shown.as_posix()}/{entry.name}") is not None:
            yield shown / entry.name


_IDENTIFIER = re.compile(rb"[A-Za-z0-9_]+")


class Prefilter:
    """Says cheaply whether a file can matter to any enabled rule, from its raw bytes."""

    def __init__(self, triggers: Iterable[bytes] | None) -> None:
        words = sorted(set(triggers)) if triggers is not None else None
        self._pattern = re.compile(b"|".join(map(re.escape, words))) if words else None
        self.skips_nothing = words is None
        # for `present`: words of identifier characters lie within one identifier of the file
        self._in_identifiers = tuple(w for w in words or () if _IDENTIFIER.fullmatch(w))
        self._elsewhere = tuple(w for w in words or () if not _IDENTIFIER.fullmatch(w))

    def wants(self, data: bytes) -> bool:
        if self.skips_nothing:
            return True
        return self._pattern is not None and self._pattern.search(data) is not None

    def present(self, data: bytes) -> frozenset[bytes]:
        """The trigger words the file holds. A word of identifier characters is sought in the
        file's distinct identifiers only (a fraction of its bytes); the others in all of it."""
        identifiers = b" ".join(set(_IDENTIFIER.findall(data)))
        found = [w for w in self._in_identifiers if w in identifiers]
        return frozenset(found + [w for w in self._elsewhere if w in data])


def is_excluded(path: Path, config: Config) -> bool:
    """Whether the excludes name `path`, which need not exist (what standard input is scanned
    as); like any file named on the command line, only with force-exclude."""
    if not config.force_exclude:
        return False
    real = Path(os.path.abspath(path))
    base = config.root if real.is_relative_to(config.root) else real.parent
    return _is_excluded(real, base, GitIgnoreSpec.from_lines((*config.exclude, *config.extend_exclude)), False)
