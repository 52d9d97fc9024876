"""The kernels example: exactly what `scan`, `kernels` and `report` say about it."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from portcheck.api import scan_paths
from portcheck.cli import app
from portcheck.config import Config

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "examples" / "kernels_app"

EXPECTED_SCAN = [
    ("csrc/ops.cpp", 10, "PC604"),  # TORCH_LIBRARY_IMPL(kernels_app, CUDA, m) { m.impl("fused_scale", ...) }
    ("csrc/scale_kernel.cu", 5, "PC603"),  # two __global__ kernels
    ("kernels_app/model.py", 6, "PC607"),  # from kernels_app import _C, built by CUDAExtension
    ("kernels_app/model.py", 7, "PC610"),  # from kernels_app.triton_ops import add: that imports triton
    ("kernels_app/model.py", 17, "PC502"),  # hidden[hidden > 0]
    ("kernels_app/model.py", 18, "PC504"),  # if ... active.mean().item() > 1.0:
    ("kernels_app/model.py", 20, "PC501"),  # torch.nonzero(...)
    ("kernels_app/model.py", 21, "PC605"),  # torch.ops.kernels_app.fused_scale: CUDA-only op
    ("kernels_app/model.py", 22, "PC707"),  # add(...) of kernels_app.triton_ops, which imports triton (info)
    ("kernels_app/model.py", 22, "PC501"),  # hidden[rows]: rows come from torch.nonzero
    ("kernels_app/model.py", 26, "PC102"),  # GatedMLP().cuda()
    ("kernels_app/model.py", 26, "PC101"),  # device="cuda"
    ("kernels_app/triton_ops.py", 4, "PC610"),  # import triton, unguarded
    ("kernels_app/triton_ops.py", 5, "PC610"),  # import triton.language as tl, unguarded too
    ("kernels_app/triton_ops.py", 8, "PC601"),  # @triton.jit above add_kernel
    ("kernels_app/triton_ops.py", 22, "PC103"),  # if x.is_cuda:
    ("requirements.txt", 1, "PC703"),  # the cu121 index
    ("requirements.txt", 2, "PC704"),  # torch==2.5.1
    ("requirements.txt", 3, "PC702"),  # flash-attn
    ("requirements.txt", 4, "PC702"),  # nvidia-cublas-cu12
    ("setup.py", 7, "PC704"),  # torch>=2.1 meets tpu/neuron only in part
    ("setup.py", 7, "PC702"),  # triton
    ("setup.py", 8, "PC602"),  # CUDAExtension
]

EXPECTED_KERNELS = [
    # name, kind, file:line, lines of code, call sites, fallback found
    ("kernels_app::fused_scale", "library-op", "csrc/ops.cpp:10", 0, ["kernels_app/model.py:21"], False),
    (
        "examples/kernels_app/csrc/scale_kernel.cu::scale_kernel",
        "cuda-c++",
        "csrc/scale_kernel.cu:5",
        6,
        ["csrc/scale_kernel.cu:21"],
        False,
    ),
    ("examples/kernels_app/csrc/scale_kernel.cu::shift_kernel", "cuda-c++", "csrc/scale_kernel.cu:12", 6, [], False),
    (
        "kernels_app.triton_ops.add_kernel",
        "triton",
        "kernels_app/triton_ops.py:9",
        7,
        ["kernels_app/triton_ops.py:25"],
        True,
    ),
    ("kernels_app._C", "cuda-extension", "setup.py:8", 6, ["kernels_app/model.py:6"], False),
]


def _local(path: str) -> str:
    return path.removeprefix("examples/kernels_app/")


def test_scan_reports_exactly_the_expected_findings() -> None:
    report = scan_paths([PROJECT], Config(root=ROOT), jobs=1)
    assert [(_local(f.path), f.line, f.code) for f in report.findings] == EXPECTED_SCAN
    assert report.errors == () and report.internal_errors == ()


@pytest.fixture()
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(ROOT)
    return CliRunner()


def test_kernels_inventory(cli: CliRunner) -> None:
    result = cli.invoke(app, ["kernels", "examples/kernels_app", "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    found = [
        (
            k["name"],
            k["kind"],
            f"{_local(k['path'])}:{k['line']}",
            k["lines_of_code"],
            [_local(c) for c in k["call_sites"]],
            bool(k["fallback"]),
        )
        for k in document["kernels"]
    ]
    assert found == EXPECTED_KERNELS
    assert document["kernels"][3]["fallback"].endswith(
        "triton_ops.py:25 in an `if` on availability that returns, before the other path"
    )
    assert document["per_target"]["tpu"] == {"kernels": 5, "lines_of_code": 25, "without_fallback": 4}
    assert document["per_target"]["xpu"] == {"kernels": 4, "lines_of_code": 18, "without_fallback": 4}  # Triton runs
    assert "Pallas" in document["kernels"][0]["port"]["tpu"] and "NKI" in document["kernels"][0]["port"]["neuron"]


@pytest.mark.parametrize("columns", ["200", "60"])
def test_kernels_text_never_breaks_a_name(cli: CliRunner, monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    monkeypatch.setenv("COLUMNS", columns)  # a table where it fits, else a paragraph per kernel
    result = cli.invoke(app, ["kernels", "examples/kernels_app", "--target", "tpu,rocm"])
    assert result.exit_code == 0
    assert "Custom kernels" in result.stdout and "To port, per target" in result.stdout
    assert ("┃" in result.stdout) == (columns == "200")
    for whole in ("kernels_app.triton_ops.add_kernel", "examples/kernels_app/csrc/scale_kernel.cu:12"):
        assert whole in result.stdout
    assert "rocm: 0 to port, 0 lines, 0 without fallback; nothing to port" in result.stdout  # Triton runs, C++ hipified


def test_kernels_csv_for_a_spreadsheet(cli: CliRunner) -> None:
    result = cli.invoke(app, ["kernels", "examples/kernels_app", "--target", "tpu,rocm", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert result.exit_code == 0 and len(rows) == 5
    triton = next(row for row in rows if row["kind"] == "triton")
    assert (triton["line"], triton["port on rocm"]) == ("9", "")  # Triton runs on ROCm
    assert triton["port on tpu"].startswith("rewrite in Pallas")


def test_readiness_report(cli: CliRunner) -> None:
    result = cli.invoke(app, ["report", "examples/kernels_app", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["target"]: row for row in json.loads(result.stdout)["targets"]}
    assert set(rows) == {"tpu", "neuron", "xla", "mps", "xpu", "npu", "hpu", "cpu"}
    assert {row["verdict"] for row in rows.values()} == {"blocked"}
    assert (rows["tpu"]["kernels"], rows["tpu"]["kernel_lines"], rows["xpu"]["kernels"]) == (5, 25, 4)
    assert len(rows["tpu"]["dependencies"]) == 3 and len(rows["xpu"]["dependencies"]) == 2  # triton runs on xpu
    assert "torch version" in rows["neuron"]["reason"] and "torch version" not in rows["xla"]["reason"]


def test_readiness_markdown_for_a_pull_request(cli: CliRunner) -> None:
    result = cli.invoke(app, ["report", "examples/kernels_app", "--target", "tpu,neuron", "--format", "markdown"])
    assert result.exit_code == 0
    text = result.stdout
    assert text.startswith("## portcheck readiness")
    assert "| `tpu` | ⛔ blocked: 5 custom kernels" in text and "— at `examples/kernels_app/csrc/ops.cpp:10`" in text
    assert "### Start here" in text and "`portcheck fix --device TARGET`" in text
    assert "| `examples/kernels_app/kernels_app/model.py` | " in text  # the file with the most errors left
    assert text.count("`kernels_app.triton_ops.add_kernel`") == 1  # each kernel once, for every target
    assert "tpu: rewrite in Pallas via torch.tpu.pallas.jax_op" in text and "neuron: rewrite in NKI" in text
    assert "<details>" not in text
    detailed = cli.invoke(
        app, ["report", "examples/kernels_app", "--target", "tpu", "--format", "markdown", "--details"]
    )
    assert "<details><summary><code>tpu</code>: what to port</summary>" in detailed.stdout


def test_readiness_markdown_fits_a_pull_request_comment(cli: CliRunner, tmp_path: Path) -> None:
    kernel = "import triton\n\n@triton.jit\ndef k{n}(x_ptr):\n    pass\n"
    for n in range(600):
        (tmp_path / f"kernel_{n:03}.py").write_text(kernel.format(n=n))
    result = cli.invoke(app, ["report", str(tmp_path), "--format", "markdown", "--details", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert len(result.stdout) < 65_536  # GitHub's limit for a comment
    assert result.stdout.rstrip().endswith("`portcheck report --format json` has everything._")
    assert result.stdout.count("<details>") == result.stdout.count("</details>")


def test_readiness_of_a_clean_project(cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import torch\nx = torch.ones(2)\n")
    result = cli.invoke(app, ["report", str(tmp_path), "--target", "tpu", "--format", "json"])
    assert json.loads(result.stdout)["targets"][0]["verdict"] == "ready"
