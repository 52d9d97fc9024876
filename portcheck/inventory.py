"""The custom-kernel inventory behind `portcheck kernels` and the readiness report.

Built from the facts the PC6 rules record: kernels (Triton functions, `__global__` functions,
CUDA extensions, ops registered for CUDA), the places that launch or import them, and the
evidence that a pure-PyTorch path exists beside them.

Kernels in tests (a `tests/` or `test/` folder, `test_*` or `*_test` files, `conftest.py`) and
in vendored copies of other projects (`third_party/`, `vendor/`, `_vendor/`, `external/`...)
are listed, marked with where they come from, but not counted as kernels to port unless asked
(`--all-kernels`): a port rewrites the project's own kernels; tests follow them, and vendored
code is replaced by its upstream's port.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from portcheck import kernels, project
from portcheck.findings import Fact, cell_prefix

TEST, VENDORED = "test", "vendored"
_TEST_FOLDERS = frozenset({"tests", "test"})
_VENDOR_FOLDERS = frozenset(
    "third_party third-party thirdparty 3rdparty vendor vendored _vendor external externals extern".split()
)
_TEST_FILE = re.compile(r"^(test_.*|.*_test|conftest)$")
_KERNEL_AFFIXES = re.compile(
    r"(^(kernel|triton|cuda|fused)_)|(_(kernel|kernels|triton|cuda|fwd|bwd|impl|forward|backward))+$"
)


@dataclass(frozen=True)
class Kernel:
    """One custom kernel and what porting it involves."""

    name: str
    kind: str
    path: str
    line: int
    lines_of_code: int
    call_sites: tuple[str, ...]  # "path:line" ("path:cell 3:line" in a notebook), sorted
    fallback: str  # why a pure-PyTorch path seems to exist; empty if none was found
    cell: int | None = None  # in a notebook: the cell `line` counts in
    origin: str = ""  # TEST or VENDORED: not the project's own code
    counted: bool = True  # whether it counts as a kernel to port (see the module docstring)

    @property
    def place(self) -> str:
        return f"{self.path}:{cell_prefix(self.cell)}{self.line}"

    def runs_on(self, target: str) -> bool:
        return kernels.runs_as_is(self.kind, target)

    def to_port(self, target: str) -> bool:
        """Whether porting to `target` means rewriting this kernel."""
        return self.counted and not self.runs_on(target)

    def port_path(self, target: str) -> str:
        return kernels.port_path(self.kind, target)


def origin(path: str) -> str:
    """TEST or VENDORED when a file belongs to tests or to a vendored copy; empty otherwise."""
    parts = PurePosixPath(path).parts
    if any(part in _VENDOR_FOLDERS for part in parts[:-1]):
        return VENDORED
    if any(part in _TEST_FOLDERS for part in parts[:-1]) or _TEST_FILE.match(PurePosixPath(path).stem):
        return TEST
    return ""


def build(facts: Iterable[Fact], all_kernels: bool = False) -> list[Kernel]:
    """The inventory; with `all_kernels`, kernels in tests and vendored code count too."""
    found = [_placed(kernel, all_kernels) for kernel in _kernels(list(facts))]
    return sorted(found, key=lambda k: (k.path, k.cell or 0, k.line, k.name))


def _placed(kernel: Kernel, all_kernels: bool) -> Kernel:
    where = origin(kernel.path)
    return replace(kernel, origin=where, counted=all_kernels or not where)


def _kernels(facts: list[Fact]) -> list[Kernel]:
    by_kind: dict[str, list[Fact]] = {}
    for fact in facts:
        by_kind.setdefault(fact.kind, []).append(fact)
    calls: dict[str, list[Fact]] = {}
    for call in by_kind.get(project.CALL, []):
        calls.setdefault(call.name, []).append(call)
    sources = {fact.name: int(fact.detail("loc", "0")) for fact in by_kind.get(project.SOURCE, [])}
    for fact in by_kind.get(project.KERNEL, []):  # an extension's own lines exclude its kernels'
        if fact.detail("kind") == kernels.CUDA_CPP and fact.path in sources:
            sources[fact.path] -= int(fact.detail("loc", "0"))
    references = [fact.name for fact in by_kind.get(project.REFERENCE, [])]
    found = [
        _kernel(fact, calls.get(_call_key(fact), []), sources, references) for fact in by_kind.get(project.KERNEL, [])
    ]
    return found + _library_ops(by_kind.get(project.OP_IMPL, []), calls)


def _call_key(fact: Fact) -> str:
    """How call facts name the kernel: Triton by qualified name, CUDA C++ by function name."""
    if fact.detail("kind") == kernels.CUDA_CPP:
        return "cuda::" + fact.name.rpartition("::")[2]
    return fact.name


def _kernel(fact: Fact, calls: Sequence[Fact], sources: dict[str, int], references: Sequence[str]) -> Kernel:
    kind = fact.detail("kind")
    if fact.detail("loc"):
        loc = int(fact.detail("loc"))
    elif fact.detail("sources"):
        base = posixpath.dirname(fact.path)
        listed = [posixpath.normpath(posixpath.join(base, s)) for s in fact.detail("sources").split(",") if s]
        loc = sum(sources.get(path, 0) for path in listed)
    else:
        loc = fact.end_line - fact.line + 1
    evidence = next((f"{c.place} {c.detail('fallback')}" for c in calls if c.detail("fallback")), "")
    if not evidence:
        base = _KERNEL_AFFIXES.sub("", fact.name.rpartition(".")[2].rpartition("::")[2]).lower()
        match = next((r for r in references if len(base) >= 3 and base in r.rpartition(".")[2].lower()), "")
        evidence = f"reference implementation {match}" if match else ""
    sites = tuple(sorted({c.place for c in calls}))
    return Kernel(fact.name, kind, fact.path, fact.line, loc, sites, evidence, fact.cell)


def _library_ops(impls: Sequence[Fact], calls: dict[str, list[Fact]]) -> list[Kernel]:
    """One entry per op registered for CUDA; a non-CUDA implementation counts as the fallback."""
    devices: dict[str, set[str]] = {}
    first: dict[str, Fact] = {}
    for fact in impls:
        devices.setdefault(fact.name, set()).add(fact.detail("device"))
        if fact.detail("device") == "cuda":
            first.setdefault(fact.name, fact)
    result = []
    for op, fact in first.items():
        others = sorted(devices[op] - {"cuda", "meta", "autograd"})
        namespace, _, name = op.partition("::")
        sites = tuple(sorted({c.place for c in calls.get(f"torch.ops.{namespace}.{name}", [])}))
        fallback = f"also implemented for {', '.join(others)}" if others else ""
        result.append(Kernel(op, kernels.LIBRARY_OP, fact.path, fact.line, 0, sites, fallback, fact.cell))
    return result


@dataclass(frozen=True)
class TargetWork:
    """What a target needs rewritten."""

    target: str
    kernels: int
    lines_of_code: int
    without_fallback: int


def work(found: Sequence[Kernel], targets: Sequence[str]) -> list[TargetWork]:
    result = []
    for target in targets:
        to_port = [k for k in found if k.to_port(target)]
        result.append(
            TargetWork(
                target,
                len(to_port),
                sum(k.lines_of_code for k in to_port),
                sum(1 for k in to_port if not k.fallback),
            )
        )
    return result
