"""scan and fix (and everything they load) work where torch cannot be imported, and never imports it.

pre-commit installs the hook without torch, and importing a backend plugin (TorchTPU,
TorchNeuron) has side effects; so the static commands must not touch them at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BLOCK_AND_SCAN = textwrap.dedent(
    """
    import importlib.abc, json, sys

    BLOCKED = ("torch", "torch_tpu", "torch_neuronx", "torch_xla", "torch_npu", "habana_frameworks", "triton")

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, NoTorch())
    from portcheck.cli import app
    try:
        app(["scan", sys.argv[1], "--format", "json", "--output-file", sys.argv[2], "--jobs", "2"])
    except SystemExit as exit:
        code = exit.code
    for argv in (
        ["rules", "--format", "json"],
        ["explain", "PC203", "--target", "tpu"],
        ["fix", sys.argv[1], "--device", "tpu", "--diff"],
    ):
        try:
            app(argv)
        except SystemExit as exit:
            assert exit.code in (0, 1, None), argv
    print(json.dumps({"exit": code, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)}))
    """
)


def _scan_without_torch(project: Path, report: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_AND_SCAN, str(project), str(report)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_scan_and_fix_run_and_never_import_torch(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    outcome = _scan_without_torch(ROOT / "examples" / "cuda_app", report)
    assert outcome == {"exit": 1, "loaded": []}  # findings (exit 1), and nothing torch-like loaded
    assert json.loads(report.read_text())["summary"]["findings"] == 24


def test_notebooks_are_scanned_and_fixed_without_importing_torch(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    outcome = _scan_without_torch(ROOT / "tests" / "fixtures" / "notebooks", report)
    assert outcome == {"exit": 1, "loaded": []}
    findings = json.loads(report.read_text())["findings"]
    assert {f["path"].rpartition("/")[2] for f in findings if f["cell"]} == {
        "broken_cell.ipynb",
        "cross_cells.ipynb",
        "imports_added.ipynb",
    }
