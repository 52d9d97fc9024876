"""The importable entry points: scan a string or a tree and get findings back. No printing."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from portcheck.config import Config
from portcheck.discovery import discover
from portcheck.engine import FileResult, scan_bytes, scan_file
from portcheck import project
from portcheck.findings import Fact, Finding, with_fingerprints

# Below this many files a process pool costs more than it saves.
_PARALLEL_THRESHOLD = 24


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
    data = source.encode("utf-8") if isinstance(source, str) else source
    result = scan_bytes(data, path, config or Config())
    if result.internal_error:
        raise RuntimeError(result.internal_error)
    return with_fingerprints([*result.findings, *project.confirmed(result.conditionals, result.facts)])


def scan_paths(
    paths: Sequence[Path],
    config: Config,
    *,
    jobs: int | None = None,
    on_file_done: Callable[[], None] | None = None,
) -> ScanReport:
    """Discover and scan files under `paths`, in parallel over `jobs` processes."""
    found = discover(paths, config)
    results = list(_scan_all(found.files, config, jobs or os.cpu_count() or 1, on_file_done))
    facts = tuple(sorted((fact for r in results for fact in r.facts), key=lambda f: (f.path, f.line, f.kind, f.name)))
    conditionals = [c for r in results for c in r.conditionals]
    return ScanReport(
        config=config,
        findings=tuple(
            with_fingerprints([*(f for r in results for f in r.findings), *project.confirmed(conditionals, facts)])
        ),
        facts=facts,
        files=len(found.files),
        skipped=sum(r.skipped for r in results),
        errors=found.errors,
        internal_errors=tuple(f"{r.path}: internal error\n{r.internal_error}" for r in results if r.internal_error),
        paths=tuple(str(p) for p in paths),
    )


def _scan_all(
    files: Sequence[Path], config: Config, jobs: int, on_file_done: Callable[[], None] | None
) -> Iterable[FileResult]:
    if jobs <= 1 or len(files) < _PARALLEL_THRESHOLD:
        for path in files:
            yield scan_file(path, config)
            if on_file_done:
                on_file_done()
        return
    chunk = max(1, min(64, len(files) // (jobs * 8)))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(scan_file, files, [config] * len(files), chunksize=chunk):
            yield result
            if on_file_done:
                on_file_done()
