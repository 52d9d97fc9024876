"""Jupyter notebooks: the code cells scanned as one module (names resolve across cells), IPython
escapes left alone, positions by cell in every output, and fixes written back into the fixed
cells' sources only, every other byte of the file kept."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import nbformat
import pytest
from click.testing import CliRunner

from portcheck import magics, nbjson, notebooks
from portcheck.api import fix_source, scan_source
from portcheck.cli import app

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "notebooks"

# (cell, line, column, code) of every finding in cross_cells.ipynb: `torch`, `nn` and the
# `sync` alias are bound in cell 2 only.
CROSS_CELLS = [(3, 2, 9, "PC102"), (5, 2, 5, "PC102"), (5, 4, 1, "PC203")]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture notebooks under nb/ in tmp_path, which is also the current directory."""
    shutil.copytree(FIXTURES, tmp_path / "nb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return tmp_path


def run(*args: str, expect: int = 1) -> str:
    result = CliRunner().invoke(app, [*args, "--no-cache"] if args[0] == "scan" else list(args))
    assert result.exit_code == expect, result.output
    return result.stdout


def cell_notebook(*sources: str, **metadata: object) -> str:
    """A notebook of code cells, as nbformat writes it."""
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    for number, cell in enumerate(cells, 1):
        cell.id = f"cell-{number}"
    return nbformat.writes(nbformat.v4.new_notebook(cells=cells, metadata=metadata)) + "\n"


def pieces(text: str) -> list[str]:
    """The notebook's text cut around every cell's source: [outside, source, outside, ...]."""
    cuts = [0, *(index for span in nbjson.source_spans(text) for index in span), len(text)]
    return [text[start:end] for start, end in zip(cuts, cuts[1:])]


# --------------------------------------------------------------------------- scan


def test_names_bound_in_one_cell_resolve_in_later_cells(project: Path) -> None:
    out = run("scan", "nb/cross_cells.ipynb", "--format", "concise")
    expected = [f"nb/cross_cells.ipynb:cell {c}:{line}:{col}: {code} " for c, line, col, code in CROSS_CELLS]
    assert [row[: len(prefix)] for row, prefix in zip(out.splitlines(), expected)] == expected
    assert out.endswith("Found 3 findings.\n")


def test_ipython_escapes_are_masked_on_their_own_lines_and_restored_exactly() -> None:
    source = (
        "%matplotlib inline\n"
        "files = !ls\n"
        "!pip install \\\n"
        "    tqdm\n"
        "torch.cuda?\n"
        "??torch.cuda.synchronize\n"
        "/print 1 2\n"
        "for name in files:\n"
        "    !echo {name}\n"
        "text = '''\n"
        "%not an escape: inside a string\n"
        "'''\n"
        "total = (1 +\n"
        "    2)\n"
        "ok = total % 2 != 0\n"
    )
    masked = magics.mask(source, 7)
    assert len(magics.lines(masked.text)) == len(magics.lines(source))
    kept = [n for n, (a, b) in enumerate(zip(source.splitlines(), masked.text.splitlines()), 1) if a == b]
    assert kept == [8, 10, 11, 12, 13, 14, 15]  # Python, or inside a string or brackets
    assert masked.text.splitlines()[:2] == ["# portcheck-escape:7.0", "# portcheck-escape:7.1"]
    assert masked.text.splitlines()[8] == "    pass  # portcheck-escape:7.7"  # an indented escape keeps its block
    assert len(masked.escapes) == 8  # a continued line has its own placeholder
    assert magics.restore(masked.text, masked) == source
    with pytest.raises(ValueError):
        magics.restore(masked.text.replace("# portcheck-escape:7.1\n", ""), masked)


def test_escapes_in_a_scanned_notebook_cause_no_finding_and_no_parse_error() -> None:
    data = cell_notebook("import torch\n%time torch.cuda.synchronize()\n!nvidia-smi\nx = !ls", "torch.cuda?")
    assert scan_source(data, path="nb.ipynb") == []


def test_a_cell_magic_with_a_python_body_is_scanned_and_another_is_left_out() -> None:
    data = cell_notebook("import torch", "%%bash\ntorch.cuda.synchronize()", "%%timeit -n 3\ntorch.cuda.synchronize()")
    assert [(f.cell, f.line, f.code) for f in scan_source(data, path="nb.ipynb")] == [(3, 2, "PC203")]


def test_a_cell_that_does_not_parse_is_reported_and_the_rest_is_scanned(project: Path) -> None:
    document = json.loads(run("scan", "nb/broken_cell.ipynb", "--format", "json"))
    found = [(f["cell"], f["line"], f["column"], f["code"], f["source_line"]) for f in document["findings"]]
    assert found == [
        (2, 1, 1, "PC001", 'print "loss:", 0.25'),
        (3, 1, 1, "PC203", "torch.cuda.synchronize()"),
    ]


def test_a_notebook_of_another_language_is_skipped() -> None:
    data = cell_notebook("torch.cuda.synchronize()", kernelspec={"name": "ir", "language": "R", "display_name": "R"})
    assert scan_source(data, path="analysis.ipynb") == []


def test_a_suppression_covers_its_own_cell_and_never_reaches_into_the_next() -> None:
    data = cell_notebook(
        "import torch\ntorch.cuda.synchronize()  # portcheck: ignore[PC203]",
        "# portcheck: ignore[PC203]",
        "torch.cuda.synchronize()",
    )
    found = [(f.cell, f.line, f.code) for f in scan_source(data, path="nb.ipynb")]
    assert found == [(2, 1, "PC004"), (3, 1, "PC203")]


def test_a_directory_scan_reads_notebooks_next_to_python_files(project: Path) -> None:
    (project / "nb" / "train.py").write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    document = json.loads(run("scan", "nb", "--format", "json"))
    assert document["summary"]["files"] == 5
    cells = {(f["path"], f["cell"]) for f in document["findings"] if f["code"] == "PC203"}
    assert cells == {
        ("nb/train.py", None),
        ("nb/broken_cell.ipynb", 3),
        ("nb/cross_cells.ipynb", 5),
        ("nb/imports_added.ipynb", 4),
    }


# --------------------------------------------------------------------------- outputs


def test_text_report_gives_the_cell_and_shows_the_line_of_the_cell(project: Path) -> None:
    out = run("scan", "nb/cross_cells.ipynb", "--format", "text")
    assert "nb/cross_cells.ipynb:cell 5:4:1: PC203 error `torch.cuda.synchronize` is CUDA-only" in out
    assert "4 | sync()\n  | ^^^^\n" in out


def test_json_report_carries_the_cell_and_lines_within_it(project: Path) -> None:
    findings = json.loads(run("scan", "nb/cross_cells.ipynb", "--format", "json"))["findings"]
    assert [(f["cell"], f["line"], f["column"], f["code"]) for f in findings] == CROSS_CELLS
    assert findings[2]["source_line"] == "sync()" and findings[2]["end_column"] == 5


def test_sarif_report_keeps_the_cell_in_the_region_and_as_a_logical_location(
    project: Path, sarif_validator: jsonschema.Draft7Validator
) -> None:
    document = json.loads(run("scan", "nb/cross_cells.ipynb", "--format", "sarif"))
    sarif_validator.validate(document)
    location = document["runs"][0]["results"][2]["locations"][0]
    region = location["physicalLocation"]["region"]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "nb/cross_cells.ipynb"
    assert (region["startLine"], region["startColumn"], region["properties"]) == (4, 1, {"cell": 5})
    assert location["logicalLocations"] == [
        {"name": "cell 5", "fullyQualifiedName": "nb/cross_cells.ipynb:cell 5", "kind": "notebookCell"}
    ]


def test_github_annotations_point_at_the_notebook_and_name_the_cell(project: Path) -> None:
    out = run("scan", "nb/cross_cells.ipynb", "--format", "github")
    first = out.splitlines()[0]
    assert first.startswith("::error file=nb/cross_cells.ipynb,title=portcheck PC102 (tensor-cuda-call)::cell 3:2:9: ")


def test_fingerprints_do_not_move_when_a_cell_is_inserted_above() -> None:
    data = cell_notebook("import torch", "torch.cuda.synchronize()")
    shifted = cell_notebook("import torch", "print('warm-up')", "torch.cuda.synchronize()")
    (before,), (after,) = scan_source(data, path="nb.ipynb"), scan_source(shifted, path="nb.ipynb")
    assert (before.cell, after.cell) == (2, 3) and before.fingerprint == after.fingerprint


def test_baseline_and_cache_keep_notebook_findings(project: Path) -> None:
    run("baseline", "nb/cross_cells.ipynb", "-o", "baseline.json", "--cache-dir", "cache", expect=0)
    entries = json.loads((project / "baseline.json").read_text(encoding="utf-8"))["findings"]
    assert [(e["cell"], e["line"]) for e in entries] == [(c, line) for c, line, _, _ in CROSS_CELLS]
    cached = [
        CliRunner().invoke(app, ["scan", "nb/cross_cells.ipynb", "--format", "json", "--cache-dir", "cache"])
        for _ in range(2)
    ]
    assert cached[0].stdout == cached[1].stdout and '"cell": 5' in cached[1].stdout
    result = CliRunner().invoke(app, ["scan", "nb/cross_cells.ipynb", "--baseline", "baseline.json", "--no-cache"])
    assert result.exit_code == 0 and "3 known findings hidden by the baseline" in result.stdout


# --------------------------------------------------------------------------- fix


def test_fix_rewrites_only_the_fixed_cells_sources_and_is_idempotent(project: Path) -> None:
    path = project / "nb" / "cross_cells.ipynb"
    before = path.read_text(encoding="utf-8")
    assert "Fixed 3 findings in 1 file for tpu" in run("fix", str(path), "--device", "tpu", expect=0)
    after = path.read_text(encoding="utf-8")
    old, new = pieces(before), pieces(after)
    changed = [index for index, (a, b) in enumerate(zip(old, new)) if a != b]
    assert len(old) == len(new) and changed == [5, 9]  # the sources of cells 3 and 5 (all cells count)
    fixed = nbformat.reads(after, as_version=4)
    assert fixed.cells[2].source == '!pip install -q tqdm\nmodel = nn.Linear(4, 2).to(device="tpu")'
    assert (
        fixed.cells[4].source
        == '%%time\nx = torch.randn(8, 4).to(device="tpu")\ny = model(x)\ntorch.accelerator.synchronize()'
    )
    assert nbformat.writes(fixed) + "\n" == after  # laid out as nbformat writes it, to the byte
    assert "Nothing to fix for tpu." in run("fix", str(path), "--device", "tpu", expect=0)
    assert path.read_text(encoding="utf-8") == after


def test_fix_adds_an_import_to_the_cell_of_the_first_imports(project: Path) -> None:
    path = project / "nb" / "imports_added.ipynb"
    run("fix", str(path), "--device", "tpu", expect=0)
    cells = [cell.source for cell in nbformat.read(path, as_version=4).cells]
    assert cells[1:] == [
        "%matplotlib inline",
        "import numpy as np\nfrom torch.cuda import synchronize\nimport torch",
        "import os\n\ntorch.accelerator.synchronize()\nprint(os.getcwd(), np.pi)",
    ]


def test_fix_of_a_notebook_with_a_broken_cell_fixes_the_others_and_leaves_it(project: Path) -> None:
    path = project / "nb" / "broken_cell.ipynb"
    out = run("fix", str(path), "--device", "tpu")  # the parse error is left: exit 1
    assert "nb/broken_cell.ipynb:cell 2:1:1: PC001" in out
    cells = [cell.source for cell in nbformat.read(path, as_version=4).cells]
    assert cells == ["import torch", 'print "loss:", 0.25', "torch.accelerator.synchronize()"]


@pytest.mark.parametrize(
    ("layout", "lines"),
    [({"indent": 2, "ensure_ascii": False}, False), ({"separators": (",", ":"), "ensure_ascii": True}, True)],
    ids=["indent-2-string-sources", "compact-ascii-line-lists"],
)
def test_fix_keeps_another_writers_layout_byte_for_byte(layout: dict, lines: bool) -> None:
    document = {
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
        "nbformat_minor": 4,
        "nbformat": 4,
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "Entraînement sur le GPU ✓"},
            {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": "import torch"},
            {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [], "source": "y = 1\nx.cuda()"},
        ],
    }
    for cell in document["cells"] if lines else ():
        cell["source"] = cell["source"].splitlines(keepends=True)
    text = json.dumps(document, **layout)  # keys unsorted, no final newline
    fixed = fix_source(text, "cpu", path="nb.ipynb").source.decode()
    assert fixed == text.replace("x.cuda()", "x.cpu()") != text


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("*.ipynb")))
def test_an_untouched_round_trip_is_byte_exact(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    module = notebooks.read(data).module()
    assert module.rebuild(module.code) == data


def test_fix_of_a_notebook_with_nothing_to_fix_changes_nothing() -> None:
    outcome = fix_source((FIXTURES / "clean.ipynb").read_bytes(), "tpu", path="clean.ipynb")
    assert (outcome.changed, outcome.source) == (False, (FIXTURES / "clean.ipynb").read_bytes())


def test_a_fix_that_would_cross_cells_leaves_the_notebook_unchanged() -> None:
    module = notebooks.read(cell_notebook("import torch", "x = 1").encode()).module()
    with pytest.raises(notebooks.NotebookError, match="across cells"):
        module.rebuild(module.code.replace("...  # portcheck-cell:2\n", ""))
