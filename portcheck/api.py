"""The importable entry points: scan a string or a tree and get findings back. No printing."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from portcheck import fixer
from portcheck import targets as target_data
from portcheck.cache import ResultCache, entry_key
from portcheck.config import Config
from portcheck.discovery import discover
from portcheck.engine import FileResult, Source, read_source, scan_bytes, scan_read
from portcheck.findings import Fact, Finding, with_fingerprints
from portcheck.fixer import FixOutcome
from portcheck.project import Project
from portcheck.sources import display_path, module_path

Progress = Callable[[int, int], None]  # (files done, files in all), after each file

# Below this many files a process pool costs more than it saves.
_PARALLEL_THRESHOLD = 24
# Reads of the skipped files at most, each following failing imports one module further.
_MAX_PASSES = 8


@dataclass(frozen=True)
class ScanReport:
    """Everything a reporter needs about one run."""

    config: Config
    findings: tuple[Finding, ...]
    files: int  # discovered
    skipped: int  # discovered but without any enabled rule's trigger word
    facts: tuple[Fact, ...] = ()  # what the files tell about the project (kernels, ops, calls)
    errors: tuple[str, ...] = ()  # paths that could not be used at all
    internal_errors: tuple[str, ...] = ()  # portcheck bugs, one per file
    baselined: int = 0  # findings hidden because the baseline holds them
    paths: tuple[str, ...] = field(default=())  # the paths as given


def scan_source(source: str | bytes, *, path: str = "<string>", config: Config | None = None) -> list[Finding]:
    """Findings for one piece of source code, sorted and fingerprinted."""
    data = _as_bytes(source)
    config = config or Config()
    results = [scan_bytes(data, path, config)]
    known = Project().with_facts(results[0].facts)
    if known.needs_second_pass:
        results.append(scan_bytes(data, path, config, project=known))
    for result in results:
        if result.internal_error:
            raise RuntimeError(result.internal_error)
    return with_fingerprints(f for result in results for f in result.findings)


def _as_bytes(source: str | bytes) -> bytes:
    """Text with lone surrogates (read with errors="surrogateescape") becomes bytes that are not
    UTF-8, which the scan reports as such, instead of an exception."""
    return source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source


def scan_paths(
    paths: Sequence[Path],
    config: Config,
    *,
    jobs: int | None = None,
    cache: Path | None = None,
    progress: Progress | None = None,
) -> ScanReport:
    """Discover and scan files under `paths`, in parallel over `jobs` processes, reusing and
    updating the results kept in the `cache` folder when one is given."""
    found = discover(paths, config)
    jobs = jobs or os.cpu_count() or 1
    store = ResultCache(cache, config) if cache else None
    layout = Project(local_packages=frozenset(local_packages(found.files)))
    results = list(_counted(_scan_all(found.files, config, jobs, layout, store), len(found.files), progress))
    second = _later_passes(found.files, config, jobs, layout, results, store)
    if store:
        store.save(r.path for r in results)
    facts = {fact for r in (*results, *second) for fact in r.facts}
    return ScanReport(
        config=config,
        findings=tuple(with_fingerprints(f for r in (*results, *second) for f in r.findings)),
        facts=tuple(sorted(facts, key=lambda f: (f.path, f.line, f.kind, f.name))),
        files=len(found.files),
        skipped=sum(r.skipped for r in results),
        errors=found.errors,
        internal_errors=tuple(
            f"{r.path}: internal error\n{r.internal_error}" for r in (*results, *second) if r.internal_error
        ),
        paths=tuple(str(p) for p in paths),
    )


def _later_passes(
    files: Sequence[Path],
    config: Config,
    jobs: int,
    layout: Project,
    first: list[FileResult],
    store: ResultCache | None,
) -> list[FileResult]:
    """The second pass, for the rules that need what other files tell. A module whose import
    fails makes its importers fail too; the first pass recorded the imports of every file it
    parsed, but not of those it skipped for want of a trigger word (an `__init__.py` of plain
    relative imports). Those that mention a failing module are read until no more fail, then
    the second pass runs once over every file, with all that is known."""
    facts = {fact for result in first for fact in result.facts}
    known = layout.with_facts(facts)
    shown = {display_path(path, config.root): path for path in files}
    skipped = [shown[result.path] for result in first if result.skipped and result.path in shown]
    for _ in range(_MAX_PASSES):
        if not known.import_failures or not skipped:
            break
        learning = replace(known, learning_imports=True)
        facts |= {fact for result in _scan_all(skipped, config, jobs, learning, store) for fact in result.facts}
        grown = layout.with_facts(facts)
        if grown.import_failures == known.import_failures:
            break
        known = grown
    return list(_scan_all(files, config, jobs, known, store)) if known.needs_second_pass else []


def local_packages(files: Sequence[Path]) -> set[str]:
    """The top-level packages of the scanned tree, so its own imports are not taken for
    third-party ones."""
    found = set()
    for path in files:
        if path.suffix == ".py":
            module = module_path(path)
            if module.package:
                found.add(module.package.split(".", 1)[0])
    return found


def _scan_all(
    files: Sequence[Path],
    config: Config,
    jobs: int,
    known: Project,
    store: ResultCache | None,
) -> Iterable[FileResult]:
    """Every file's result: the cached ones, then the rest scanned (in a pool when many)."""
    missing = []
    for path in files:
        hit = (
            store.get(_key(read_source(path, config, known), known, store.salt)) if store and not store.empty else None
        )
        if hit is None:
            missing.append(path)
            continue
        yield hit
    salt = store.salt if store else ""
    for key, result in _scan_missing(missing, config, jobs, known, salt):
        if store:
            store.put(key, result)
        yield result


def _counted(results: Iterable[FileResult], total: int, progress: Progress | None) -> Iterable[FileResult]:
    for done, result in enumerate(results, 1):
        yield result
        if progress:
            progress(done, total)


def _scan_missing(
    files: Sequence[Path], config: Config, jobs: int, known: Project, salt: str
) -> Iterable[tuple[str | None, FileResult]]:
    if jobs <= 1 or len(files) < _PARALLEL_THRESHOLD:
        yield from (_scan_one(path, config, known, salt) for path in files)
        return
    chunk = max(1, min(64, len(files) // (jobs * 8)))
    count = len(files)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_scan_one, files, [config] * count, [known] * count, [salt] * count, chunksize=chunk)


def _scan_one(path: Path, config: Config, known: Project, salt: str) -> tuple[str | None, FileResult]:
    """One file's result and the cache key of exactly the bytes that were scanned (a file
    edited meanwhile must not be cached under its old contents). Runs in the workers."""
    source = read_source(path, config, known)
    if isinstance(source, FileResult):
        return None, source
    return _key(source, known, salt), scan_read(source, config, known)


def _key(source: Source | FileResult, known: Project, salt: str) -> str | None:
    return entry_key(salt, source, known) if salt and isinstance(source, Source) else None


@dataclass(frozen=True)
class FixReport:
    """What `fix` did over a tree."""

    target: str
    outcomes: tuple[FixOutcome, ...]
    originals: dict[str, bytes]  # the source before fixing, by path, for diffs
    errors: tuple[str, ...] = ()
    written: bool = False


def fix_source(
    source: str | bytes, device: str, *, path: str = "<string>", config: Config | None = None, unsafe: bool = False
) -> FixOutcome:
    """One piece of source fixed for `device` (the same rewrites as `portcheck fix`)."""
    data = _as_bytes(source)
    config = replace(config or Config(), targets=(target_data.judged_as(device),))
    return fixer.fix_source(data, path, config, target_data.fix_target(device), unsafe=unsafe)


def fix_paths(
    paths: Sequence[Path],
    config: Config,
    device: str,
    *,
    unsafe: bool = False,
    write: bool = True,
    progress: Progress | None = None,
) -> FixReport:
    """Fix every file under `paths` for one target; write the changed ones atomically."""
    target = target_data.fix_target(device)
    config = replace(config, targets=(target_data.judged_as(device),))
    found = discover(paths, config)
    layout = Project(local_packages=frozenset(local_packages(found.files)))
    outcomes, originals, errors = [], {}, list(found.errors)
    for done, path in enumerate(found.files, 1):
        if progress:
            progress(done - 1, len(found.files))
        shown = display_path(path, config.root)
        try:
            data = path.read_bytes()
        except OSError as error:
            errors.append(f"{shown}: cannot read file: {error.strerror or error}")
            continue
        outcome = fixer.fix_source(data, shown, config, target, unsafe=unsafe, project=layout, module=module_path(path))
        if outcome.changed and write:
            problem = write_atomically(path, data, outcome.source)
            if problem:
                outcome = replace(outcome, error=problem, applied=())
        originals[outcome.path] = data
        outcomes.append(outcome)
    return FixReport(target.name, tuple(outcomes), originals, tuple(errors), write)


def write_atomically(path: Path, expected: bytes, content: bytes) -> str:
    """Replace a file's bytes in one step (temporary file + rename, permissions kept), unless it
    changed on disk since it was read. Returns why it was not written, or ''."""
    try:
        if path.read_bytes() != expected:
            return "changed on disk while portcheck was fixing it; not overwritten"
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".portcheck", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(content)
            shutil.copymode(path, temporary)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as error:
        return f"cannot write: {error.strerror or error}"
    return ""
