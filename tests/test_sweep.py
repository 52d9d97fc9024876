"""The real-corpus sweep (bench/sweep.py): its checks catch what they must, and a pinned real
corpus passes them.

The corpus is part of the installed torch package's own Python sources (torch==2.13.0, pinned
in the Makefile), the parts with the most CUDA code, so nothing is downloaded at test time.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from portcheck import api

ROOT = Path(__file__).resolve().parents[1]
TORCH_PARTS = (
    "cuda",
    "amp",
    "backends",
    "nn/parallel",
    "utils/data",
    "utils/benchmark",
    "distributed/algorithms",
    "profiler",
)


def _load_sweep() -> ModuleType:
    """bench/ is scripts, not a package: load the file as a module of its own."""
    spec = importlib.util.spec_from_file_location("bench_sweep", ROOT / "bench" / "sweep.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it is executed
    spec.loader.exec_module(module)
    return module


sweep = _load_sweep()


def _round(
    source: bytes,
    *regions: tuple[int, int],
    additions: tuple[str, ...] = (),
    top: int = 0,
    imports: tuple[tuple[int, int], ...] = (),
):
    return sweep.Round(source, regions, frozenset(additions), top, imports)


SOURCE = b"import os\n\nx = 'cuda'\n# keep me\ny = 1\n"


def test_a_change_inside_a_fix_region_passes() -> None:
    after = SOURCE.replace(b"'cuda'", b"'tpu'")
    assert sweep.changes_outside(SOURCE, after, _round(SOURCE, (3, 3))) == []


def test_a_change_outside_every_fix_region_is_reported() -> None:
    after = SOURCE.replace(b"'cuda'", b"'tpu'").replace(b"keep me", b"kept")
    problems = sweep.changes_outside(SOURCE, after, _round(SOURCE, (3, 3)))
    assert len(problems) == 1 and "replaced outside the fixes" in problems[0] and "keep me" in problems[0]


def test_only_the_requested_imports_may_be_added_and_only_at_the_top() -> None:
    step = _round(SOURCE, (3, 3), additions=("import torch",), top=2)
    assert sweep.changes_outside(SOURCE, SOURCE.replace(b"import os\n", b"import os\nimport torch\n"), step) == []
    assert sweep.changes_outside(SOURCE, SOURCE.replace(b"import os\n", b"import os\nimport sys\n"), step)
    assert sweep.changes_outside(SOURCE, SOURCE + b"import torch\n", step)


def test_a_deleted_line_among_equal_lines_may_be_any_of_them() -> None:
    # The statement and the blank line above it go; a diff may as well say the one below went.
    before, after = b"a = 1\n\nsync()\n\nb = 2\n", b"a = 1\n\nb = 2\n"
    assert sweep.changes_outside(before, after, _round(before, (2, 3))) == []
    assert sweep.changes_outside(before, after, _round(before, (3, 3)))


def test_line_endings_bom_and_coding_cookie_must_stay() -> None:
    crlf = b"x = 'cuda'\r\ny = 1\r\n"
    assert sweep.changes_outside(crlf, b"x = 'tpu'\ny = 1\r\n", _round(crlf, (1, 1)))
    assert sweep.changes_outside(crlf, b"x = 'tpu'\r\ny = 1\r\n", _round(crlf, (1, 1))) == []
    bom = b"\xef\xbb\xbfx = 'cuda'\n"
    assert sweep.changes_outside(bom, b"x = 'tpu'\n", _round(bom, (1, 1)))
    latin = b"# -*- coding: latin-1 -*-\nx = 'cuda'\n"
    assert sweep.changes_outside(latin, b"# -*- coding: utf-8 -*-\nx = 'tpu'\n", _round(latin, (1, 2)))


def test_the_rounds_of_the_real_fixer_are_followed() -> None:
    source = b"import torch\n# a comment\nx = torch.zeros(2).cuda().cuda()\ny = 1\n"
    with sweep.watching_rounds(unsafe=False) as rounds:
        outcome = api.fix_source(source, "tpu", path="a.py")
    assert len(rounds["a.py"]) == 3  # the outer .cuda() waits for the inner one's round
    assert sweep.file_problems(source, outcome.source, rounds["a.py"]) == []
    tampered = outcome.source.replace(b"y = 1", b"y = 2")
    assert sweep.file_problems(source, tampered, rounds["a.py"])
    assert sweep.file_problems(source, outcome.source, []) == ["the fixer's rounds were not observed"]


def test_an_import_may_be_renamed_with_its_uses_but_keeps_its_names() -> None:
    source = b"from torch.cuda.amp import GradScaler\nimport torch\n\ns = GradScaler()\n"
    with sweep.watching_rounds(unsafe=False) as rounds:
        outcome = api.fix_source(source, "tpu", path="a.py")
    assert outcome.source.startswith(b"from torch.amp import GradScaler\n")  # one edit: the import and its use
    assert sweep.file_problems(source, outcome.source, rounds["a.py"]) == []

    step = _round(source, (4, 4), imports=((1, 1),))
    renamed = source.replace(b"torch.cuda.amp", b"torch.amp")
    assert sweep.changes_outside(source, renamed, step) == []
    assert sweep.changes_outside(source, renamed.replace(b"GradScaler\n", b"autocast\n", 1), step)
    assert sweep.changes_outside(source, renamed, _round(source, (4, 4)))  # no fix replaces the import


def test_a_fix_that_breaks_the_code_is_reported() -> None:
    assert sweep.reparse_problem(b"x = 1\n", b"x = = 1\n", "a.py").startswith("libcst cannot parse it")
    # libcst parses a `return` outside a function; Python does not compile it.
    assert sweep.reparse_problem(b"x = 1\n", b"return 1\n", "a.py").startswith("Python cannot compile it")
    assert sweep.reparse_problem(b"x = 1\n", b"x = 2\n", "a.py") == ""


@pytest.mark.slow
def test_the_sweep_passes_on_torch_sources(tmp_path: Path) -> None:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed (make setup installs the pinned torch)")
    torch_root = Path(spec.origin).parent
    corpus = tmp_path / "torch"
    for part in TORCH_PARTS:
        shutil.copytree(torch_root / part, corpus / part, ignore=shutil.ignore_patterns("__pycache__"))

    result = sweep.sweep(str(corpus), jobs=2)

    assert result.scan.files > 100
    assert result.scan.internal_errors == () and result.scan.missed == () and result.scan.errors == ()
    assert [counts.device for counts in result.fixes] == ["tpu", "cpu", "auto"]
    for counts in result.fixes:
        assert counts.fix_errors == ()
        assert counts.reparse_failures == ()
        assert counts.not_idempotent == ()
        assert counts.out_of_span == ()
        assert sum(n for _, n in counts.applied) > 10, counts  # the checks ran on real fixes
    assert result.failures() == []
