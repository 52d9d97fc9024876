"""Where a cold `portcheck scan` spends its time, phase by phase, on the benchmark corpus.

    python bench/phases.py                      # or: --corpus diffusers==0.31.0

One process, no cache. Each phase's entry point is wrapped in a wall-clock timer (outermost
call only, so recursion is counted once); unlike a profiler, this adds no cost per call to the
millions of calls inside the walk, so the shares are those of a normal run. Process start-up
(importing the command line) is timed in fresh interpreters. Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import functools
import io
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable

from run import corpus

from portcheck import api, engine, parsing, suppress
from portcheck.config import Config
from portcheck.discovery import Prefilter
from portcheck.report import formats
from portcheck.resolve import Resolver
from portcheck.walk import Walker

SPENT: Counter[str] = Counter()

# (phase, where the callable is looked up when it is called, its attribute name)
PHASES: tuple[tuple[str, object, str], ...] = (
    ("discovery (walk, excludes, .gitignore)", api, "discover"),
    ("reading files", api, "read_source"),
    ("text prefilter", Prefilter, "wants"),
    ("decoding", engine, "decode_python"),
    ("libcst parse", parsing, "parse"),
    ("scopes (the resolver's first look)", Resolver, "__init__"),
    ("one walk: every rule's visits", Walker, "walk"),
    ("  of which name resolution", Resolver, "qualified_names"),
    ("findings from reports", engine, "_results"),
    ("  of which positions of the findings", engine, "positions"),
    ("suppression comments", suppress, "parse"),
    ("sorting and fingerprints", api, "with_fingerprints"),
)


def timed(label: str, function: Callable[..., object]) -> Callable[..., object]:
    depth = 0

    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        nonlocal depth
        if depth:
            return function(*args, **kwargs)
        depth += 1
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[label] += time.perf_counter() - started
            depth -= 1

    return wrapper


def start_up(runs: int = 5) -> float:
    """Median wall time of a fresh interpreter importing the command line."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import portcheck.cli"], check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="diffusers==0.31.0", help="a pinned PyPI release to scan")
    root = corpus(parser.parse_args().corpus)
    for label, owner, name in PHASES:
        setattr(owner, name, timed(label, getattr(owner, name)))
    started = time.perf_counter()
    report = api.scan_paths([root], Config(root=root), jobs=1)
    scanned = time.perf_counter()
    formats()["json"](report, io.StringIO(), False)
    SPENT["JSON report"] = time.perf_counter() - scanned
    boot = start_up()
    whole = boot + time.perf_counter() - started
    print(f"{report.files} files, {report.skipped} skipped by the prefilter, {len(report.findings)} findings.\n")
    print("| phase | seconds | share of the run |\n| --- | ---: | ---: |")
    print(f"| process start-up (import portcheck.cli) | {boot:.2f} | {boot / whole:.1%} |")
    for label in [label for label, _, _ in PHASES] + ["JSON report"]:
        print(f"| {label} | {SPENT[label]:.2f} | {SPENT[label] / whole:.1%} |")
    print(f"| whole run | {whole:.2f} | 100% |")


if __name__ == "__main__":
    main()
