"""Real-corpus sweep: scan and fix whole repositories, and check that every fix is sound.

    python bench/sweep.py /work/corpus/nanoGPT diffusers==0.31.0
    python bench/sweep.py path/to/repo --device tpu --device auto --jobs 2 --unsafe-fixes

Each corpus is a directory or a pinned PyPI release (`name==version`: its wheel is downloaded
with `pip download --no-deps` and its .py files unpacked under the system's temporary
directory, never into the repository). For each corpus:

- scan: every .py file (no excludes, no .gitignore, no size limit); a crash is an internal
  error, and a file that is on disk but not discovered is reported too;
- fix, once per device (default tpu, cpu, auto), on a copy of the corpus's .py files. Every
  changed file must re-parse (libcst, and CPython's compiler where the original compiled);
  a second `fix` must change nothing; and no byte may change outside the fixes. That last
  check follows the fixer round by round (fixes run to a fixed point, and a later round may
  rewrite what an earlier one wrote): each line a round changes or deletes must lie in the
  region of one of that round's fixes, which is where the node the fix replaces overlaps the
  statement that holds its finding (leading blank and comment lines included: libcst attaches
  them to the statement); each line a round only inserts must touch such a region or be an
  import or module-level statement one of its fixes asked for, placed among the leading
  imports. Lines outside the changes are compared byte for byte (line endings included), and
  the BOM and coding cookie must stay.

It prints a table per corpus and device and exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import ast
import codecs
import os
import subprocess
import sys
import tempfile
import time
import tokenize
import warnings
import zipfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from difflib import SequenceMatcher
from io import BytesIO
from pathlib import Path

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, WhitespaceInclusivePositionProvider

from portcheck import api, fixer
from portcheck.config import Config
from portcheck.discovery import discover
from portcheck.engine import Examination
from portcheck.findings import Finding, FixSafety
from portcheck.rewrites.edits import Edit
from portcheck.targets import FIX_TARGETS

# Never in the checkout; bench/run.py keeps its corpus here too, so a release is downloaded once.
CACHE = Path(tempfile.gettempdir()) / "portcheck-bench"
DEVICES = ("tpu", "cpu", "auto")
UNPARSABLE = "PC001"
EVERY_FILE = {"exclude": (), "respect_gitignore": False, "max_file_size": 2**31}

Lines = tuple[int, int]  # first and last line, 1-based, inclusive


@dataclass(frozen=True)
class Round:
    """One round of the fixer on one file: the source it examined, where the fixes it could
    apply may change lines, and what they may add at the top of the module."""

    source: bytes
    regions: tuple[Lines, ...] = ()
    additions: frozenset[str] = frozenset()  # `import x` and prelude statements, as written
    top: int = 0  # the last line before the first statement that is not a docstring or import
    # Module-level imports inside a node a fix replaces: a fix may rename what they import from
    # along with the uses it rewrites (PC301: `from torch.cuda.amp import X`), never drop them.
    imports: tuple[Lines, ...] = ()


@dataclass(frozen=True)
class ScanCounts:
    """What scanning one corpus found; `failures` are what the sweep fails on."""

    files: int  # .py files on disk
    analysed: int  # files discovered and not skipped by the prefilter (not only .py: manifests too)
    findings: int
    unparsable: int  # PC001: files Python or libcst cannot parse (not portcheck's fault)
    missed: tuple[str, ...] = ()  # .py files on disk that discovery did not return
    errors: tuple[str, ...] = ()  # paths that could not be used
    internal_errors: tuple[str, ...] = ()  # crashes

    def failures(self) -> list[str]:
        return [*(f"not scanned: {p}" for p in self.missed), *self.errors, *self.internal_errors]


@dataclass(frozen=True)
class FixCounts:
    """What fixing one corpus for one device did, and each file that failed a check, with why."""

    device: str
    files: int
    changed: int
    applied: tuple[tuple[str, int], ...]  # (rule code, fixes applied), most first
    fix_errors: tuple[str, ...] = ()  # files the fixer gave up on (a bad edit, a crash)
    reparse_failures: tuple[str, ...] = ()
    not_idempotent: tuple[str, ...] = ()
    out_of_span: tuple[str, ...] = ()

    def failures(self) -> list[str]:
        problems = (*self.fix_errors, *self.reparse_failures, *self.not_idempotent, *self.out_of_span)
        return [f"[{self.device}] {problem}" for problem in problems]


@dataclass(frozen=True)
class CorpusResult:
    """One corpus swept: its scan, one fix per device, and how long it all took."""

    name: str
    scan: ScanCounts
    fixes: tuple[FixCounts, ...]
    seconds: float

    def failures(self) -> list[str]:
        return [*self.scan.failures(), *(problem for counts in self.fixes for problem in counts.failures())]


# Corpora


def corpus(spec: str) -> Path:
    """A directory as given, or the unpacked .py files of a pinned release, downloaded once."""
    if "==" not in spec:
        root = Path(spec).resolve()
        if not root.is_dir():
            raise SystemExit(f"sweep: not a directory or a pinned requirement (name==version): {spec}")
        return root
    target = CACHE / spec.replace("==", "-")
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as download:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
        subprocess.run([*pip, "-d", download, spec], check=True)
        unpacked = Path(download, "unpacked")  # renamed into place whole: an interrupted run leaves no half corpus
        with zipfile.ZipFile(next(Path(download).glob("*.whl"))) as archive:
            archive.extractall(unpacked, [member for member in archive.namelist() if member.endswith(".py")])
        unpacked.rename(target)
    return target


def python_files(root: Path) -> list[Path]:
    """Every regular .py file under `root`, symbolic links not followed (as discovery does)."""
    found = []
    for directory, _, names in os.walk(root):
        found += [Path(directory, name) for name in names if name.endswith(".py")]
    return sorted(path for path in found if path.is_file() and not path.is_symlink())


def copy_sources(files: Sequence[Path], root: Path, destination: Path) -> None:
    """The .py files only: `fix` rewrites nothing else, and the rest can be large (torch's .so)."""
    for path in files:
        copy = destination / path.relative_to(root)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(path.read_bytes())


# Scan


def scan_corpus(root: Path, jobs: int) -> ScanCounts:
    """Scan every .py file under `root`; a crash is an internal error, a file not seen a miss."""
    files = python_files(root)
    config = Config(root=root, **EVERY_FILE)
    seen = set(discover([root], config).files)
    report = api.scan_paths([root], config, jobs=jobs)
    return ScanCounts(
        files=len(files),
        analysed=report.files - report.skipped,
        findings=len(report.findings),
        unparsable=sum(finding.code == UNPARSABLE for finding in report.findings),
        missed=tuple(str(path.relative_to(root)) for path in files if path not in seen),
        errors=report.errors,
        internal_errors=report.internal_errors,
    )


# Fix, round by round


@contextmanager
def watching_rounds(unsafe: bool) -> Iterator[dict[str, list[Round]]]:
    """Record the rounds the fixer makes, by file, while it runs in this process: each
    examination it asks for, with the regions of the fixes it will choose from it. Files
    without any fix are not recorded."""
    rounds: dict[str, list[Round]] = {}
    examine = fixer.examine

    def recording(data: bytes, path: str, *args: object, **kwargs: object) -> Examination:
        examination = examine(data, path, *args, **kwargs)
        chosen = [
            (finding, edit) for finding, edit in examination.fixes() if unsafe or edit.safety is not FixSafety.UNSAFE
        ]
        if chosen and examination.tree is not None:
            rounds.setdefault(path, []).append(_round(data, examination.tree, chosen))
        elif path in rounds:
            rounds[path].append(Round(data))
        return examination

    fixer.examine = recording
    try:
        yield rounds
    finally:
        fixer.examine = examine


def _round(data: bytes, tree: cst.Module, chosen: Sequence[tuple[Finding, Edit]]) -> Round:
    """Ranges as libcst writes them, each with the whitespace its node owns: a statement owns
    the blank and comment lines above it and its line break, which removing it takes along."""
    ranges = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(WhitespaceInclusivePositionProvider)
    statements = [node for node in ranges if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement))]
    regions = [_region(statements, ranges, finding, edit) for finding, edit in chosen]
    additions = {f"import {module}" for _, edit in chosen for module in edit.imports}
    additions.update(statement for _, edit in chosen for statement in edit.prelude)
    replaced = [_lines(ranges[edit.original]) for _, edit in chosen if edit.original in ranges]
    imports = [_lines(ranges[statement]) for statement in tree.body if _is_import(statement)]
    renamable = tuple(lines for lines in imports if any(_overlap(lines, node) == lines for node in replaced))
    return Round(data, tuple(r for r in regions if r), frozenset(additions), _top(tree, ranges), renamable)


def _region(
    statements: Sequence[cst.CSTNode], ranges: Mapping[cst.CSTNode, CodeRange], finding: Finding, edit: Edit
) -> Lines | None:
    """Where one fix may change lines: the node it replaces, within the statement that holds
    its finding. None when the two do not meet (a fix far from its finding)."""
    holder = _innermost_statement(statements, ranges, finding)
    where = _lines(ranges[holder]) if holder else (finding.line, finding.end_line)
    return _overlap(_lines(ranges[edit.original]), where) if edit.original in ranges else None


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(part, (cst.Import, cst.ImportFrom)) for part in statement.body
    )


def _innermost_statement(
    statements: Sequence[cst.CSTNode], ranges: Mapping[cst.CSTNode, CodeRange], finding: Finding
) -> cst.CSTNode | None:
    """The innermost statement that holds the finding: statements nest, so the one that starts
    last (and, of those, ends first)."""
    start, end = (finding.line, finding.column - 1), (finding.end_line, finding.end_column - 1)
    holders = [node for node in statements if _start(ranges[node]) <= start and end <= _end(ranges[node])]
    return max(holders, key=lambda node: (_start(ranges[node]), tuple(-n for n in _end(ranges[node]))), default=None)


def _start(where: CodeRange) -> tuple[int, int]:
    return (where.start.line, where.start.column)


def _end(where: CodeRange) -> tuple[int, int]:
    return (where.end.line, where.end.column)


def _lines(where: CodeRange) -> Lines:
    """The lines a range touches; a range that ends at the start of a line ends before it."""
    last = where.end.line - 1 if where.end.column == 0 and where.end.line > where.start.line else where.end.line
    return (where.start.line, last)


def _overlap(a: Lines, b: Lines) -> Lines | None:
    first, last = max(a[0], b[0]), min(a[1], b[1])
    return (first, last) if first <= last else None


def _top(tree: cst.Module, ranges: Mapping[cst.CSTNode, CodeRange]) -> int:
    """Where imports and the module's prelude go: before the first statement, and the comment
    and blank lines above it, that is not the docstring or an import."""
    for index, statement in enumerate(tree.body):
        first = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
        is_docstring = (
            index == 0
            and isinstance(first, cst.Expr)
            and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))
        )
        if not (isinstance(first, (cst.Import, cst.ImportFrom)) or is_docstring):
            return ranges[statement].start.line - 1
    return sys.maxsize


def changes_outside(before: bytes, after: bytes, step: Round) -> list[str]:
    """The changes from one round's source to the next that none of its fixes accounts for.
    A block of lines deleted or inserted next to equal lines (a blank line among blank lines)
    could have been diffed at any of those places; it is accounted for if one of them is."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    problems = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "insert":
            if not any(_insertion_fits(at, new[j1:j2], step) for at in _insertion_places(old, i1, new[j1:j2])):
                problems.append(f"lines inserted after line {i1}: {_excerpt(new[j1:j2])}")
        elif tag == "delete":
            if not any(_inside(step.regions, at + 1, at + i2 - i1) for at in _deletion_places(old, i1, i2)):
                problems.append(f"lines {i1 + 1}-{i2} deleted outside the fixes: {_excerpt(old[i1:i2])}")
        elif tag == "replace" and not _inside(step.regions, i1 + 1, i2):
            if _inside(step.imports, i1 + 1, i2) and _imports_kept(before, after, (j1 + 1, j2)):
                continue
            problems.append(
                f"lines {i1 + 1}-{i2} replaced outside the fixes: {_excerpt(old[i1:i2])} -> {_excerpt(new[j1:j2])}"
            )
    return problems + _kept_encoding(before, after)


def _inside(regions: Sequence[Lines], first: int, last: int) -> bool:
    return all(any(start <= n <= end for start, end in regions) for n in range(first, last + 1))


def _imports_kept(before: bytes, after: bytes, written: Lines) -> bool:
    """Whether the lines written are module-level imports, and the module still binds every
    name its imports bound."""
    was, now = _module_imports(before), _module_imports(after)
    return was is not None and now is not None and _inside(now[0], *written) and was[1] <= now[1]


def _module_imports(source: bytes) -> tuple[list[Lines], set[str]] | None:
    """The lines of the module-level import statements, and the names they bind."""
    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return None
    imports = [node for node in body if isinstance(node, (ast.Import, ast.ImportFrom))]
    lines = [(node.lineno, node.end_lineno or node.lineno) for node in imports]
    return lines, {alias.asname or alias.name.split(".")[0] for node in imports for alias in node.names}


def _insertion_fits(at: int, lines: Sequence[bytes], step: Round) -> bool:
    """Next to or inside a fix's region, or what the fixes add at the top of the module."""
    if any(start - 1 <= at <= end for start, end in step.regions):
        return True
    return at <= step.top and all(_addition(line, step) for line in lines)


def _insertion_places(old: Sequence[bytes], at: int, lines: Sequence[bytes]) -> list[int]:
    """Where else inserting `lines` (rotated) after line `at` gives the same result."""
    places, block, here = [at], list(lines), at
    while here > 0 and old[here - 1] == block[-1]:
        block, here = [block[-1], *block[:-1]], here - 1
        places.append(here)
    block, here = list(lines), at
    while here < len(old) and old[here] == block[0]:
        block, here = [*block[1:], block[0]], here + 1
        places.append(here)
    return places


def _deletion_places(old: Sequence[bytes], first: int, end: int) -> list[int]:
    """Where else deleting as many lines, from line `first` + 1, gives the same result."""
    places, low, high = [first], first, end
    while low > 0 and old[low - 1] == old[high - 1]:
        low, high = low - 1, high - 1
        places.append(low)
    low, high = first, end
    while high < len(old) and old[low] == old[high]:
        low, high = low + 1, high + 1
        places.append(low)
    return places


def _addition(line: bytes, step: Round) -> bool:
    text = line.rstrip(b"\r\n").decode("utf-8", "replace")
    return not text.strip() or text in step.additions


def _kept_encoding(before: bytes, after: bytes) -> list[str]:
    """BOM, coding cookie and line endings as they were."""
    problems = []
    if before.startswith(codecs.BOM_UTF8) != after.startswith(codecs.BOM_UTF8):
        problems.append("BOM added or removed")
    if _encoding(before) != _encoding(after):
        problems.append(f"encoding changed: {_encoding(before)} -> {_encoding(after)}")
    endings = _endings(before) or {b"\n"}
    if not _endings(after) <= endings:
        problems.append(f"line endings {sorted(_endings(after) - endings)} added")
    return problems


def _encoding(data: bytes) -> str:
    try:
        return tokenize.detect_encoding(BytesIO(data).readline)[0]
    except SyntaxError as error:
        return f"invalid ({error})"


def _endings(data: bytes) -> set[bytes]:
    return {line[len(line.rstrip(b"\r\n")) :] for line in data.splitlines(keepends=True)} - {b""}


def _excerpt(lines: Sequence[bytes]) -> str:
    """The first lines, line endings shown (a changed ending is a change too)."""
    text = b"".join(lines[:3]).decode("utf-8", "replace")
    return repr(text[:200]) + (" ..." if len(lines) > 3 or len(text) > 200 else "")


def reparse_problem(original: bytes, fixed: bytes, path: str) -> str:
    """Why the fixed source does not parse (libcst) or compile where the original compiled."""
    try:
        cst.parse_module(fixed)
    except Exception as error:  # any failure to parse is the finding
        return f"libcst cannot parse it: {str(error).splitlines()[0]}"
    before, after = _compile_error(original, path), _compile_error(fixed, path)
    return f"Python cannot compile it: {after}" if after and not before else ""


def _compile_error(data: bytes, path: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences and the like are not ours
        try:
            compile(data, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            return str(error)
    return ""


def file_problems(original: bytes, fixed: bytes, rounds: Sequence[Round]) -> list[str]:
    """Bytes changed outside the fixes, over every round the fixer made on one file."""
    if not rounds or rounds[0].source != original:
        return ["the fixer's rounds were not observed"]
    sources = [step.source for step in rounds] + [fixed]
    problems = []
    for index, step in enumerate(rounds):
        problems += [f"round {index + 1}: {p}" for p in changes_outside(sources[index], sources[index + 1], step)]
    return problems


def fix_corpus(root: Path, device: str, unsafe: bool = False) -> FixCounts:
    """Fix a copy of the corpus for one device, check each changed file, then fix again."""
    files = python_files(root)
    with tempfile.TemporaryDirectory(prefix=f"sweep-{device}-") as scratch:
        copy = Path(scratch)
        copy_sources(files, root, copy)
        config = Config(root=copy, **EVERY_FILE)
        with watching_rounds(unsafe) as rounds:  # in this process: the devices are the parallel part
            report = api.fix_paths([copy], config, device, unsafe=unsafe, jobs=1)
        again = api.fix_paths([copy], config, device, unsafe=unsafe, write=False, jobs=1)
    changed = [outcome for outcome in report.outcomes if outcome.changed]
    reparse, outside = [], []
    for outcome in changed:
        original = report.originals[outcome.path]
        problem = reparse_problem(original, outcome.source, outcome.path)
        reparse += [f"{outcome.path}: {problem}"] if problem else []
        problems = file_problems(original, outcome.source, rounds.get(outcome.path, []))
        outside += [f"{outcome.path}: {problem}" for problem in problems]
    errors = [f"{o.path}: {o.error}" for o in report.outcomes if o.error]
    errors += [f"{o.path}: {o.error} (second run)" for o in again.outcomes if o.error]
    return FixCounts(
        device=device,
        files=len(files),
        changed=len(changed),
        applied=tuple(Counter(code for o in changed for code, _ in o.applied).most_common()),
        fix_errors=(*report.errors, *errors),
        reparse_failures=tuple(reparse),
        not_idempotent=tuple(f"{o.path}: fixed again ({_codes(o.applied)})" for o in again.outcomes if o.changed),
        out_of_span=tuple(outside),
    )


def _codes(applied: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{code} {title}" for code, title in applied)


def sweep(spec: str, devices: Sequence[str] = DEVICES, *, jobs: int = 1, unsafe: bool = False) -> CorpusResult:
    """Scan one corpus, then fix it once per device (the devices in parallel when `jobs` > 1)."""
    started = time.perf_counter()
    root = corpus(spec)
    scan = scan_corpus(root, jobs)
    if jobs > 1 and len(devices) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(devices))) as pool:
            fixes = list(pool.map(fix_corpus, [root] * len(devices), devices, [unsafe] * len(devices)))
    else:
        fixes = [fix_corpus(root, device, unsafe=unsafe) for device in devices]
    return CorpusResult(spec, scan, tuple(fixes), time.perf_counter() - started)


# Output


def table(results: Sequence[CorpusResult]) -> str:
    header = (
        "| corpus | device | .py files | analysed | findings | unparsable | not scanned | internal errors | changed files "
        "| fixes applied | fix errors | re-parse failures | non-idempotent | out-of-span | wall s |"
    )
    rows = [header, "|" + " --- |" * 2 + " ---: |" * 13]
    for result in results:
        scan = result.scan
        rows.append(
            f"| {result.name} | scan | {scan.files} | {scan.analysed} | {scan.findings} | {scan.unparsable} "
            f"| {len(scan.missed) + len(scan.errors)} | {len(scan.internal_errors)} | | | | | | | {result.seconds:.0f} |"
        )
        for counts in result.fixes:
            rows.append(
                f"| {result.name} | fix {counts.device} | {counts.files} | | | | | | {counts.changed} "
                f"| {sum(n for _, n in counts.applied)} | {len(counts.fix_errors)} | {len(counts.reparse_failures)} "
                f"| {len(counts.not_idempotent)} | {len(counts.out_of_span)} | |"
            )
    return "\n".join(rows)


def rule_counts(results: Sequence[CorpusResult]) -> str:
    lines = []
    for result in results:
        for counts in result.fixes:
            applied = ", ".join(f"{code} {n}" for code, n in counts.applied) or "none"
            lines.append(f"{result.name} --device {counts.device}: {applied}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+", help="directories and/or pinned releases (diffusers==0.31.0)")
    parser.add_argument("--device", action="append", choices=FIX_TARGETS, help="repeatable (default: tpu, cpu, auto)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    parser.add_argument("--unsafe-fixes", action="store_true", help="apply unsafe fixes too")
    options = parser.parse_args(argv)
    devices = tuple(options.device or DEVICES)
    results = []
    for spec in options.corpora:
        result = sweep(spec, devices, jobs=options.jobs, unsafe=options.unsafe_fixes)
        print(f"{spec}: {result.seconds:.1f} s, {len(result.failures())} problem(s)", file=sys.stderr, flush=True)
        results.append(result)
    print(table(results))
    print()
    print("Fixes applied, by rule:")
    print(rule_counts(results))
    problems = [f"{result.name}: {problem}" for result in results for problem in result.failures()]
    if problems:
        print(f"\n{len(problems)} problem(s):")
        print("\n".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
