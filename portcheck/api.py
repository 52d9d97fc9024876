"""The importable entry points: scan a string or a tree and get findings back. No printing.

The engine and the fixer (and with them libcst and the rules) are imported where a file is
really scanned or fixed: a scan that the result cache answers never loads them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, TypeVar

from portcheck import targets as target_data
from portcheck.anchor import CWD, Anchor, anchor_of, import_root
from portcheck.cache import ResultCache, entry_key
from portcheck.config import Config
from portcheck.discovery import discover, is_excluded
from portcheck.findings import Fact, Finding, with_fingerprints
from portcheck.project import Project
from portcheck.results import FileResult, Source, one_line, read_source
from portcheck.sources import display_path, module_path, regular_file
from portcheck.targets import packages
from portcheck.writeback import write_back

if TYPE_CHECKING:
    from portcheck.fixer import FixOutcome

Progress = Callable[[int, int], None]  # (files done, files in all), after each file
Done = TypeVar("Done")

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
    internal_errors: tuple[str, ...] = ()  # portcheck bugs, one line per file
    baselined: int = 0  # findings hidden because the baseline holds them
    paths: tuple[str, ...] = field(default=())  # the paths as given
    tracebacks: tuple[str, ...] = ()  # the internal errors in full, for --verbose
    anchor: Anchor = field(default_factory=lambda: Anchor(Path.cwd(), CWD))
    locations: Mapping[str, str] = field(default_factory=dict)  # finding path -> path from the anchor

    def location(self, finding: Finding | Fact) -> str:
        """Where the file is, from the anchor: what stays the same wherever portcheck runs."""
        return self.locations.get(finding.path, finding.path)


def scan_source(source: str | bytes, *, path: str = "<string>", config: Config | None = None) -> list[Finding]:
    """Findings for one piece of source code, sorted and fingerprinted."""
    from portcheck.engine import scan_bytes

    data = _as_bytes(source)
    config = config or Config()
    first = scan_bytes(data, path, config)
    known = Project().with_facts(first.facts)
    second = [scan_bytes(data, path, config, project=known)] if known.needs_second_pass else []
    for result in (first, *second):
        if result.internal_error:
            raise RuntimeError(result.internal_error)
    return with_fingerprints(_findings([first], second))


def _findings(first: Sequence[FileResult], second: Sequence[FileResult]) -> list[Finding]:
    """Both passes' findings, less the unused-suppression reports the second pass retracted.
    Where both report one rule at one place, the second's stands: it knows the whole project
    (a step loop in another file makes an info of the first pass's an error)."""
    retracted = {_place(finding) for result in second for finding in result.retracted}
    restated = {_place(finding) for result in second for finding in result.findings}
    kept = [f for result in first for f in result.findings if _place(f) not in retracted | restated]
    return kept + [f for result in second for f in result.findings if _place(f) not in retracted]


def _place(finding: Finding) -> tuple[str, str, int | None, int, int]:
    return (finding.path, finding.code, finding.cell, finding.line, finding.column)


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
    anchor = anchor_of(paths, config)
    locations = {display_path(path, config.root): anchor.locate(path) for path in found.files}
    jobs = jobs or os.cpu_count() or 1
    store = ResultCache(cache, config) if cache else None
    layout = _layout(found.files, import_root(anchor, paths))
    results = list(_counted(_scan_all(found.files, config, jobs, layout, store), len(found.files), progress))
    second = _later_passes(found.files, config, jobs, layout, results, store)
    if store:
        store.save(r.path for r in results)
    return _summary(config, results, second, found.errors, tuple(str(p) for p in paths), anchor, locations)


def scan_input(data: bytes, path: Path, config: Config) -> ScanReport:
    """Contents that come from no file (standard input), scanned as the file `path` would be:
    its kind, its per-file ignores and the name its findings are reported under; nothing at all
    when the excludes name it under force-exclude (an editor passes every file it opens)."""
    if is_excluded(path, config):
        return ScanReport(config=config, findings=(), files=0, skipped=0, paths=(str(path),))
    from portcheck.engine import scan_read

    source = Source(display_path(path, config.root), data, len(data), module_path(path))
    first = scan_read(source, config)
    known = Project().with_facts(first.facts)
    second = [scan_read(source, config, known)] if known.needs_second_pass else []
    anchor = anchor_of([path], config)
    return _summary(config, [first], second, (), (str(path),), anchor, {source.path: anchor.locate(path)})


def _summary(
    config: Config,
    results: list[FileResult],
    second: list[FileResult],
    errors: tuple[str, ...],
    paths: tuple[str, ...],
    anchor: Anchor,
    locations: Mapping[str, str],
) -> ScanReport:
    """One report from both passes' results (`second` adds what needed the whole project)."""
    every = (*results, *second)
    facts = {fact for r in every for fact in r.facts}
    broken = [r for r in every if r.internal_error]
    return ScanReport(
        config=config,
        findings=tuple(with_fingerprints(_findings(results, second), locations)),
        facts=tuple(sorted(facts, key=lambda f: (f.path, f.line, f.kind, f.name))),
        files=len(results),
        skipped=sum(r.skipped for r in results),
        errors=errors,
        internal_errors=tuple(f"{r.path}: internal error: {one_line(r.internal_error or '')}" for r in broken),
        paths=paths,
        tracebacks=tuple(f"{r.path}:\n{r.internal_error}" for r in broken),
        anchor=anchor,
        locations=locations,
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


def _layout(files: Sequence[Path], root: str) -> Project:
    """What is known before any file is read: where imports start, and the top-level packages
    and modules of the scanned tree (`pkg`, a script's `utils`), so that its own imports are
    not taken for third-party ones."""
    found, shadowing = set(), set()
    third_party = packages.import_roots()
    for path in files:
        if path.suffix == ".py":
            module = module_path(path, root)
            for name in filter(None, module.import_names):  # `model.pytorch_msssim` too
                found.add(name.split(".", 1)[0])
            shadowing.update(shadowing_names(PurePosixPath(display_path(path, root)), third_party))
    return Project(local_packages=frozenset(found), shadowing_modules=frozenset(shadowing), import_root=root)


def shadowing_names(path: PurePosixPath, third_party: frozenset[str]) -> Iterator[str]:
    """The names a module has from the parent of each folder of its path named like a
    third-party package, and those of the packages between (`triton.deployment_toolkit` and
    `triton.deployment_toolkit.core` for `TFT/triton/deployment_toolkit/core.py`); not the
    folder's own name, which stays the package's (a vendored copy of Triton is Triton)."""
    parts = path.with_suffix("").parts
    parts = parts[:-1] if parts and parts[-1] == "__init__" else parts
    for start, folder in enumerate(parts[:-1]):
        if folder in third_party:
            for end in range(start + 2, len(parts) + 1):
                yield ".".join(parts[start:end])


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


def _counted(results: Iterable[Done], total: int, progress: Progress | None) -> Iterable[Done]:
    for done, result in enumerate(results, 1):
        yield result
        if progress:
            progress(done, total)


def _mapped(work: Callable[[Path], Done], files: Sequence[Path], jobs: int) -> Iterable[Done]:
    """`work` on every file, in order; in a process pool when there are enough files to pay for
    one (`work` is then pickled: a module-level function, or a partial of one)."""
    if jobs <= 1 or len(files) < _PARALLEL_THRESHOLD:
        yield from map(work, files)
        return
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing: only for a pool

    chunk = max(1, min(64, len(files) // (jobs * 8)))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(work, files, chunksize=chunk)


def _scan_missing(
    files: Sequence[Path], config: Config, jobs: int, known: Project, salt: str
) -> Iterable[tuple[str | None, FileResult]]:
    return _mapped(partial(_scan_one, config=config, known=known, salt=salt), files, jobs)


def _scan_one(path: Path, config: Config, known: Project, salt: str) -> tuple[str | None, FileResult]:
    """One file's result and the cache key of exactly the bytes that were scanned (a file
    edited meanwhile must not be cached under its old contents). Runs in the workers."""
    from portcheck.engine import scan_read

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
    from portcheck import fixer

    data = _as_bytes(source)
    config = replace(config or Config(), targets=(target_data.judged_as(device),))
    return fixer.fix_source(data, path, config, target_data.fix_target(device), unsafe=unsafe)


def fix_input(
    data: bytes, path: Path, config: Config, device: str, *, unsafe: bool = False, write: bool = True
) -> FixReport:
    """Contents that come from no file (standard input) fixed as the file `path` would be, and left
    as they are when the excludes name it under force-exclude. Nothing is written here: `write`
    says whether the caller outputs the fixed source (or only a diff)."""
    from portcheck import fixer

    target = target_data.fix_target(device)
    config = replace(config, targets=(target_data.judged_as(device),))
    shown = display_path(path, config.root)
    if is_excluded(path, config):
        return FixReport(target.name, (fixer.FixOutcome(shown, data),), {}, (), write)
    outcome = fixer.fix_source(data, shown, config, target, unsafe=unsafe, module=module_path(path))
    outcomes = _judged_with_project([(path, outcome)], config, Project())
    return FixReport(target.name, outcomes, {shown: data} if outcome.changed else {}, (), write)


def fix_paths(
    paths: Sequence[Path],
    config: Config,
    device: str,
    *,
    unsafe: bool = False,
    write: bool = True,
    jobs: int | None = None,
    progress: Progress | None = None,
) -> FixReport:
    """Fix every file under `paths` for one target, in parallel over `jobs` processes, and write
    the changed ones back (portcheck.writeback); a file reached through several links is fixed
    once.

    Files are fixed independently: what links them is the tree's layout (its own packages),
    known before any file is fixed, and the project's facts (CUDA-only ops, extensions, Triton
    kernels), gathered from the fixed files afterwards to judge what is left, as `scan` would.
    """
    target = target_data.fix_target(device)
    config = replace(config, targets=(target_data.judged_as(device),))
    found = discover(paths, config)
    layout = _layout(found.files, import_root(anchor_of(paths, config), paths))
    files = _distinct_files(found.files)
    work = partial(_fix_one, config=config, target=target, unsafe=unsafe, project=layout, write=write)
    results = list(_counted(_mapped(work, files, jobs or os.cpu_count() or 1), len(files), progress))
    fixed = [(path, result) for path, result in zip(files, results) if isinstance(result, _Fixed)]
    outcomes = _judged_with_project([(path, result.outcome) for path, result in fixed], config, layout)
    originals = {result.outcome.path: result.original for _, result in fixed if result.original is not None}
    errors = (*found.errors, *(result for result in results if isinstance(result, str)))
    return FixReport(target.name, outcomes, originals, errors, write)


@dataclass(frozen=True)
class _Fixed:
    """One file's outcome, and its bytes before the fix when it changed (for --diff)."""

    outcome: FixOutcome
    original: bytes | None = None


def _distinct_files(paths: Sequence[Path]) -> list[Path]:
    """Each file once, by its own name where the tree has it: links to one file fix it once."""
    seen: set[tuple[int, int]] = set()  # (device, inode)
    distinct = []
    for path in sorted(paths, key=lambda path: path.is_symlink()):
        try:
            info = path.stat()
        except OSError:
            distinct.append(path)  # its worker says why it cannot be read
            continue
        if not stat.S_ISREG(info.st_mode):
            distinct.append(path)  # a FIFO or device: its worker says it is skipped, under each name
        elif (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            distinct.append(path)
    return distinct


def _fix_one(
    path: Path, config: Config, target: target_data.Target, unsafe: bool, project: Project, write: bool
) -> _Fixed | str:
    """One file fixed (and written), or why it could not be read. Runs in the workers."""
    from portcheck import fixer

    shown = display_path(path, config.root)
    try:
        regular_file(path)
        data = path.read_bytes()
    except OSError as error:
        return f"{shown}: cannot read file: {error.strerror or error}"
    outcome = fixer.fix_source(
        data, shown, config, target, unsafe=unsafe, project=project, module=module_path(path, project.import_root)
    )
    if outcome.changed and write:
        problem = write_back(path, data, outcome.source)
        if problem:
            return _Fixed(replace(outcome, source=data, error=problem, applied=()))
    return _Fixed(outcome, data if outcome.changed else None)


def _judged_with_project(
    done: Sequence[tuple[Path, FixOutcome]], config: Config, layout: Project
) -> tuple[FixOutcome, ...]:
    """The outcomes with what only the whole project tells (a call of an op that some other
    file registers for CUDA alone) added to what is left, judged on the fixed sources."""
    known = layout.with_facts(fact for _, outcome in done for fact in outcome.facts)
    if not known.needs_second_pass:
        return tuple(outcome for _, outcome in done)
    return tuple(_with_second_pass(path, outcome, config, known) for path, outcome in done)


def _with_second_pass(path: Path, outcome: FixOutcome, config: Config, known: Project) -> FixOutcome:
    from portcheck.engine import scan_bytes

    found = scan_bytes(
        outcome.source, outcome.path, config, project=known, module=module_path(path, known.import_root)
    ).findings
    if not found:
        return outcome
    restated = {_place(finding) for finding in found}
    remaining = [finding for finding in outcome.remaining if _place(finding) not in restated]
    return replace(outcome, remaining=tuple(sorted((*remaining, *found), key=lambda f: f.sort_key)))
