"""Benchmark portcheck against its peers on real PyTorch code, in one run.

    make bench                      # or: python bench/run.py --corpus diffusers==0.31.0 --runs 3

The corpus is the source of a pinned PyPI release (a wheel is downloaded and unpacked under
the system's temporary directory, never into the repository). Each tool runs as its own
process, `--runs` times; the table shows medians: wall time, CPU time (user + system of that
process and its children), peak RSS, files and lines per second, and CPU as a multiple of a
bare `libcst.parse_module` of the same files (the floor for any libcst tool). Nothing here
asserts a speed: it measures and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Outside the checkout: portcheck skips what the repository's .gitignore ignores.
CACHE = Path(tempfile.gettempdir()) / "portcheck-bench"
BARE_PARSE = """
import sys, libcst
from pathlib import Path
for path in sorted(Path(sys.argv[1]).rglob("*.py")):
    try:
        libcst.parse_module(path.read_bytes())
    except Exception:
        pass
"""
RUFF_BANNED_CUDA = 'lint.flake8-tidy-imports.banned-api."torch.cuda".msg = "CUDA-only"'


@dataclass(frozen=True)
class Measure:
    wall: float
    cpu: float
    peak_rss_mib: float


def corpus(requirement: str) -> Path:
    """The unpacked .py files of a pinned release, downloaded once."""
    name = requirement.replace("==", "-")
    target = CACHE / name
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                download,
                requirement,
            ],
            check=True,
        )
        wheel = next(Path(download).glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.endswith(".py"):
                    archive.extract(member, target)
    return target


def measure(command: list[str], cwd: Path) -> Measure:
    """One run of a command: wall time, and CPU and peak memory of exactly that process tree."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    return Measure(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def median_of(command: list[str], cwd: Path, runs: int) -> Measure:
    samples = [measure(command, cwd) for _ in range(runs)]
    return Measure(
        *(statistics.median(getattr(s, field) for s in samples) for field in ("wall", "cpu", "peak_rss_mib"))
    )


def prefilter_share(root: Path) -> tuple[int, int]:
    """(files portcheck looked at, files its text prefilter skipped without parsing)."""
    done = subprocess.run(
        [sys.executable, "-m", "portcheck", "scan", str(root), "--format", "json", "--exit-zero"],
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(done.stdout)["summary"]
    return summary["files"], summary["skipped_by_prefilter"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="diffusers==0.31.0", help="a pinned PyPI release to scan")
    parser.add_argument("--runs", type=int, default=3, help="runs per tool; the table shows medians")
    options = parser.parse_args()
    root = corpus(options.corpus)
    files = sorted(root.rglob("*.py"))
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    cores = os.cpu_count() or 1
    bin_dir = Path(sys.executable).parent
    tools = {
        "libcst parse (floor)": [sys.executable, "-c", BARE_PARSE, str(root)],
        "portcheck scan --jobs 1": [sys.executable, "-m", "portcheck", "scan", str(root), "--exit-zero", "--jobs", "1"],
        f"portcheck scan --jobs {cores}": [
            sys.executable,
            "-m",
            "portcheck",
            "scan",
            str(root),
            "--exit-zero",
            "--jobs",
            str(cores),
        ],
    }
    if shutil.which("torchfix", path=str(bin_dir)):
        tools["torchfix -j 1"] = [str(bin_dir / "torchfix"), "-j", "1", str(root)]
        tools[f"torchfix -j {cores}"] = [str(bin_dir / "torchfix"), "-j", str(cores), str(root)]
    if shutil.which("ruff", path=str(bin_dir)):
        tools["ruff (banned torch.cuda)"] = [
            str(bin_dir / "ruff"),
            "check",
            "--isolated",
            "--select",
            "TID251",
            "--config",
            RUFF_BANNED_CUDA,
            "--no-cache",
            "--exit-zero",
            str(root),
        ]
    results = {name: median_of(command, HERE, options.runs) for name, command in tools.items()}
    looked, skipped = prefilter_share(root)
    floor = results["libcst parse (floor)"].cpu
    torchfix = results.get("torchfix -j 1")
    print(f"Corpus: {options.corpus}, {len(files)} files, {lines:,} lines; {cores} cores; medians of {options.runs}.")
    print(f"portcheck's prefilter skipped {skipped} of {looked} files without parsing them.\n")
    print("| tool | wall s | CPU s | peak RSS MiB | files/s | lines/s | CPU / parse | TorchFix CPU / tool CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, result in results.items():
        versus = f"{torchfix.cpu / result.cpu:.1f}x" if torchfix else "-"
        print(
            f"| {name} | {result.wall:.2f} | {result.cpu:.2f} | {result.peak_rss_mib:.0f} | "
            f"{len(files) / result.wall:,.0f} | {lines / result.wall:,.0f} | {result.cpu / floor:.2f} | {versus} |"
        )


if __name__ == "__main__":
    main()
