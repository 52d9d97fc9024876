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
import compileall
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Outside the checkout: portcheck skips what the repository's .gitignore ignores.
CACHE = Path(tempfile.gettempdir()) / "portcheck-bench"
# The floor: parse the files named in a list, nothing else.
BARE_PARSE = """
import sys, libcst
from pathlib import Path
for name in Path(sys.argv[1]).read_text().splitlines():
    try:
        libcst.parse_module(Path(name).read_bytes())
    except Exception:
        pass
"""
LIST_PARSED = """
import sys
from pathlib import Path
from portcheck.config import Config
from portcheck.engine import scan_bytes
root = Path(sys.argv[1])
for path in sorted(root.rglob("*.py")):
    if not scan_bytes(path.read_bytes(), path.relative_to(root).as_posix(), Config(root=root)).skipped:
        print(path)
"""
RUFF_BANNED_CUDA = 'lint.flake8-tidy-imports.banned-api."torch.cuda".msg = "CUDA-only"'


@dataclass(frozen=True)
class Tool:
    """One command to time. Before each run `fresh` is emptied (a cold cache) or, with
    `copy_of`, made a new copy of that tree (for fixes, which write)."""

    name: str
    command: list[str]
    fresh: Path | None = None
    copy_of: Path | None = None


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


def median_of(tool: Tool, cwd: Path, runs: int) -> Measure:
    samples = []
    for _ in range(runs):
        if tool.fresh:
            shutil.rmtree(tool.fresh, ignore_errors=True)
        if tool.fresh and tool.copy_of:
            shutil.copytree(tool.copy_of, tool.fresh)
        samples.append(measure(tool.command, cwd))
    return Measure(
        *(statistics.median(getattr(s, field) for s in samples) for field in ("wall", "cpu", "peak_rss_mib"))
    )


def parsed_files(root: Path) -> list[Path]:
    """The files portcheck parses: the others have no trigger word of any enabled rule. Asked
    in a child process, so that this one stays small (a forked child starts with the memory of
    its parent, which would show in every tool's peak RSS)."""
    done = subprocess.run([sys.executable, "-c", LIST_PARSED, str(root)], capture_output=True, text=True, check=True)
    return [Path(line) for line in done.stdout.splitlines()]


def file_list(files: list[Path], name: str) -> Path:
    listing = CACHE / f"{name}.txt"
    listing.write_text("".join(f"{path}\n" for path in files))
    return listing


def portcheck(root: Path, jobs: int, cache: Path | None) -> list[str]:
    caching = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    command = [sys.executable, "-m", "portcheck", "scan", str(root), "--jobs", str(jobs), *caching]
    return [*command, "--exit-zero", "--format", "json", "-o", os.devnull]


def tools(root: Path, files: list[Path], parsed: list[Path], cores: int) -> dict[str, Tool]:
    """What to time, by role; the peers where installed (`pip install -r bench/requirements.txt`)."""
    bin_dir = Path(sys.executable).parent
    cold, warm, work = CACHE / "cold-cache", CACHE / "warm-cache", CACHE / "fix-work"
    fix = [sys.executable, "-m", "portcheck", "fix", str(work), "--device", "tpu"]
    parse = [sys.executable, "-c", BARE_PARSE]
    found = {
        "parse all": Tool("libcst parse of every file", [*parse, str(file_list(files, "all"))]),
        "floor": Tool("libcst parse of the files portcheck parses (floor)", [*parse, str(file_list(parsed, "parsed"))]),
        "cold 1": Tool("portcheck --jobs 1, cold", portcheck(root, 1, cold), fresh=cold),
        "cold": Tool(f"portcheck --jobs {cores}, cold", portcheck(root, cores, cold), fresh=cold),
        "warm": Tool(f"portcheck --jobs {cores}, warm (unchanged tree)", portcheck(root, cores, warm)),
        "fix 1": Tool("portcheck fix --device tpu --jobs 1", [*fix, "--jobs", "1"], fresh=work, copy_of=root),
        "fix": Tool(
            f"portcheck fix --device tpu --jobs {cores}", [*fix, "--jobs", str(cores)], fresh=work, copy_of=root
        ),
    }
    torchfix = shutil.which("torchfix", path=str(bin_dir))
    if torchfix:
        named = f"torchfix {version('torchfix')}"
        found["torchfix"] = Tool(f"{named} -j {cores}", [torchfix, "-j", str(cores), str(root)])
        fixed = [torchfix, "--fix", "-j", str(cores), str(work)]
        found["torchfix fix"] = Tool(f"{named} --fix -j {cores}", fixed, fresh=work, copy_of=root)
    ruff = shutil.which("ruff", path=str(bin_dir))
    if ruff:
        banned = ["--select", "TID251", "--config", RUFF_BANNED_CUDA, "--no-cache", "--exit-zero"]
        found["ruff"] = Tool(
            f"ruff {version('ruff')}, banned `torch.cuda` only", [ruff, "check", "--isolated", *banned, str(root)]
        )
    return found


def startup(one_file: Path, runs: int) -> tuple[float, float]:
    """Wall time of `portcheck --version`, and of a one-file scan as the pre-commit hook runs it
    (its entry point, a fresh cache): the everyday loop is mostly start-up."""
    version = [sys.executable, "-m", "portcheck", "--version"]
    cache = CACHE / "hook-cache"
    hook = [sys.executable, "-m", "portcheck", "scan", "--force-exclude", "--format", "concise", "--exit-zero"]
    hook += ["--cache-dir", str(cache), str(one_file)]
    return (
        median_of(Tool("version", version), HERE, runs).wall,
        median_of(Tool("hook", hook, fresh=cache), HERE, runs).wall,
    )


def memory_growth(files: list[Path]) -> list[tuple[int, float]]:
    """Peak RSS of one-process scans of growing shares of the corpus: it should stay flat."""
    rows = []
    for share in (8, 4, 2, 1):
        subset = CACHE / f"share-{share}"
        shutil.rmtree(subset, ignore_errors=True)
        for path in files[: len(files) // share]:
            copy = subset / path.relative_to(CACHE)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
        rows.append((len(files) // share, measure(portcheck(subset, 1, None), HERE).peak_rss_mib))
    return rows


def compiled() -> None:
    """portcheck's modules compiled to bytecode, as an installed package has them: a checkout run
    under PYTHONDONTWRITEBYTECODE would compile every module at every start and time that."""
    spec = importlib.util.find_spec("portcheck")
    assert spec and spec.submodule_search_locations, "portcheck is not installed"
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(folder, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="diffusers==0.31.0", help="a pinned PyPI release to scan")
    parser.add_argument("--runs", type=int, default=3, help="runs per tool; the table shows medians")
    options = parser.parse_args()
    compiled()
    root = corpus(options.corpus)
    files = sorted(root.rglob("*.py"))
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    cores = os.cpu_count() or 1
    parsed = parsed_files(root)
    lineup = tools(root, files, parsed, cores)
    subprocess.run(lineup["warm"].command, check=True)  # fill the warm cache
    results = {role: median_of(tool, HERE, options.runs) for role, tool in lineup.items()}
    floor, cold, warm, torchfix = results["floor"], results["cold"], results["warm"], results.get("torchfix")
    print(f"Corpus: {options.corpus}, {len(files)} files, {lines:,} lines; {cores} cores; medians of {options.runs}.")
    print(f"portcheck's prefilter skipped {len(files) - len(parsed)} of {len(files)} files without parsing them.\n")
    print("| tool | wall s | CPU s | peak RSS MiB | files/s | lines/s | CPU / floor | TorchFix CPU / its CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for role, result in results.items():
        peer = results.get("torchfix fix" if "fix" in role else "torchfix")  # the same job
        versus = f"{peer.cpu / result.cpu:.1f}x" if peer else "-"
        print(
            f"| {lineup[role].name} | {result.wall:.2f} | {result.cpu:.2f} | {result.peak_rss_mib:.0f} | "
            f"{len(files) / result.wall:,.0f} | {lines / result.wall:,.0f} | {result.cpu / floor.cpu:.2f} | {versus} |"
        )
    print(f"\nWarm re-scan of the unchanged tree / cold scan ({cores} jobs each): ", end="")
    print(f"wall {warm.wall / cold.wall:.1%}, CPU {warm.cpu / cold.cpu:.1%}.")
    if torchfix:
        print(f"TorchFix / cold portcheck ({cores} jobs each): ", end="")
        print(f"wall {torchfix.wall / cold.wall:.1f}x, CPU {torchfix.cpu / cold.cpu:.1f}x.")
    version, hook = startup(files[0], options.runs)
    print(f"`portcheck --version`: {version:.2f} s; one file as the pre-commit hook runs it: {hook:.2f} s (medians).")
    print()
    print("| files scanned (--jobs 1, no cache) | peak RSS MiB |\n| ---: | ---: |")
    for count, peak in memory_growth(files):
        print(f"| {count} | {peak:.0f} |")


if __name__ == "__main__":
    main()
