"""The command line held to Ruff's standard: report files, one line and exit code 2 for every
error, rule selectors, standard input, log levels, --show-files/--show-settings, statistics,
parallel fixing, help text and sizes.

Most tests run the command line in-process (click's `CliRunner`); standard input goes through a
real pipe to `python -m portcheck`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from portcheck import api, explain
from portcheck.cli import app
from portcheck.config import Config
from portcheck.rules.precision.float64_on_target import Float64OnTarget

SOURCE = "import torch\n\nx = torch.zeros(2).cuda()\ntorch.cuda.synchronize()\n"
FIXED = 'import torch\n\nx = torch.zeros(2).to(device="tpu")\ntorch.accelerator.synchronize()\n'
CLEAN = "import torch\n\nx = torch.zeros(2)\n"
FLOAT64 = "import torch\nx = torch.zeros(2, dtype=torch.float64)\n"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE, encoding="utf-8")
    return tmp_path


def one_line_error(result: object) -> str:
    """The error a failed run printed: exactly one line on stderr, and no traceback."""
    lines = result.stderr.splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("portcheck: error: "), result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    return lines[0]


# --------------------------------------------------------------------------- report files


def test_output_file_in_a_missing_folder_creates_the_folder(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(app, ["scan", "train.py", "-f", "json", "-o", "reports/ci/portcheck.json"])
    assert result.exit_code == 1, result.output
    assert {f["code"] for f in json.loads((project / "reports/ci/portcheck.json").read_text())["findings"]} == {
        "PC102",
        "PC203",
    }


@pytest.mark.parametrize("target", [".", "train.py/report.txt"])
def test_output_file_onto_a_folder_or_under_a_file_is_an_error(runner: CliRunner, project: Path, target: str) -> None:
    result = runner.invoke(app, ["scan", "train.py", "-o", target])
    assert result.exit_code == 2
    assert f"cannot write {target}" in one_line_error(result)


def test_baseline_into_a_missing_folder_creates_it_and_onto_a_folder_fails(runner: CliRunner, project: Path) -> None:
    assert runner.invoke(app, ["baseline", "train.py", "-o", "ci/baseline.json"]).exit_code == 0
    assert json.loads((project / "ci/baseline.json").read_text())
    result = runner.invoke(app, ["baseline", "train.py", "-o", "ci"])
    assert result.exit_code == 2 and "ci: it is a directory" in one_line_error(result)


def test_run_report_onto_a_folder_fails_before_the_program_runs(runner: CliRunner, project: Path) -> None:
    (project / "prog.py").write_text("open('ran', 'w').close()\n", encoding="utf-8")
    result = runner.invoke(app, ["run", "--emulate", "tpu", "--report", ".", "prog.py"])
    assert result.exit_code == 2 and "it is a directory" in one_line_error(result)
    assert not (project / "ran").exists()


# --------------------------------------------------------------------------- internal errors


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("args", "target"),
    [
        (["scan", "train.py"], (api, "scan_paths")),
        (["fix", "train.py", "-d", "tpu"], (api, "fix_paths")),
        (["baseline", "train.py"], (api, "scan_paths")),
        (["kernels", "train.py"], (api, "scan_paths")),
        (["report", "train.py"], (api, "scan_paths")),
        (["rules"], (explain, "rules_listing")),
        (["explain", "PC203"], (explain, "explain")),
        (["smoke", "m.py:f", "-d", "cpu"], ("portcheck.cli.smoke_settings", None)),
        (["run", "--emulate", "tpu", "prog.py"], ("portcheck.smoke.launch.run_program", None)),
    ],
)
def test_every_command_reports_a_bug_in_one_line_with_exit_2(
    runner: CliRunner, project: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], target: tuple
) -> None:
    owner, name = target
    if name is None:
        monkeypatch.setattr(owner, _boom)
    else:
        monkeypatch.setattr(owner, name, _boom)
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "internal error: RuntimeError: boom (run with --verbose for the traceback)" in one_line_error(result)

    verbose = runner.invoke(app, ["--verbose", *args])  # `run` passes what follows the program on
    assert verbose.exit_code == 2
    assert "Traceback (most recent call last)" in verbose.stderr and "RuntimeError: boom" in verbose.stderr


def test_a_rule_that_crashes_on_one_file_is_one_line_per_file(
    runner: CliRunner, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Float64OnTarget, "visit_Call", _boom)
    (project / "f.py").write_text(FLOAT64, encoding="utf-8")
    result = runner.invoke(app, ["scan", "f.py", "--no-cache", "-f", "concise"])
    assert result.exit_code == 2
    assert "error: f.py: internal error: RuntimeError: boom" in result.stdout
    assert "Traceback" not in result.output
    verbose = runner.invoke(app, ["-v", "scan", "f.py", "--no-cache", "-f", "concise"])
    assert "Traceback (most recent call last)" in verbose.stderr


# --------------------------------------------------------------------------- rule selectors


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--select", "", "select: empty rule selector ''"),
        ("--select", ",", "select: empty rule selector ''"),
        ("--ignore", "PC1,", "ignore: empty rule selector ''"),
        ("--extend-select", "", "extend-select: empty rule selector ''"),
        ("--select", "PC999", "select: unknown rule selector 'PC999'"),
        ("--ignore", "PC", "the rule selection enables no rule"),
    ],
)
def test_empty_unknown_or_all_excluding_selectors_are_usage_errors(
    runner: CliRunner, project: Path, option: str, value: str, named: str
) -> None:
    for command in (["scan"], ["fix", "-d", "tpu"]):
        result = runner.invoke(app, [*command, "train.py", option, value])
        assert result.exit_code == 2, result.output
        assert named in one_line_error(result)
    assert (project / "train.py").read_text() == SOURCE


@pytest.mark.parametrize("setting", ['select = [""]', 'ignore = ["PC2", ""]', "select = []"])
def test_empty_selectors_in_the_config_are_rejected(runner: CliRunner, project: Path, setting: str) -> None:
    (project / "pyproject.toml").write_text(f"[tool.portcheck]\n{setting}\n", encoding="utf-8")
    result = runner.invoke(app, ["scan", "train.py"])
    assert result.exit_code == 2
    assert "pyproject.toml" in one_line_error(result)


# --------------------------------------------------------------------------- standard input


def portcheck(*args: str, stdin: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "portcheck", *args], input=stdin, cwd=cwd, env=env, capture_output=True, text=True
    )


def test_scan_of_stdin_takes_kind_settings_and_name_from_stdin_filename(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.portcheck]\ntargets = ["tpu"]\nper-file-ignores = { "legacy/**" = ["PC102"] }\n', encoding="utf-8"
    )
    found = portcheck("scan", "-", "--stdin-filename", "legacy/train.py", "-f", "concise", stdin=SOURCE, cwd=tmp_path)
    assert found.returncode == 1, found.stderr
    assert found.stdout.splitlines()[:-1] == [
        "legacy/train.py:4:1: PC203 error `torch.cuda.synchronize` is CUDA-only: without CUDA it raises "
        "AssertionError: Torch not compiled with CUDA enabled"
    ]
    requirements = portcheck(
        "scan", "--stdin-filename", "requirements.txt", "-f", "json", stdin="cupy-cuda12x\n", cwd=tmp_path
    )
    assert [(f["path"], f["code"]) for f in json.loads(requirements.stdout)["findings"]] == [
        ("requirements.txt", "PC702")
    ]


def test_scan_of_stdin_without_a_name_reports_it_as_dash(tmp_path: Path) -> None:
    found = portcheck("scan", "-", "-f", "concise", "-t", "tpu", stdin=SOURCE, cwd=tmp_path)
    assert found.returncode == 1
    assert found.stdout.startswith("-:3:5: PC102 error")


def test_fix_of_stdin_writes_the_fixed_source_to_stdout_and_the_summary_to_stderr(tmp_path: Path) -> None:
    fixed = portcheck("fix", "-", "-d", "tpu", stdin=SOURCE, cwd=tmp_path)
    assert (fixed.returncode, fixed.stdout) == (0, FIXED)
    assert "Fixed 2 findings in 1 file for tpu" in fixed.stderr
    flagged = portcheck("fix", "-", "-d", "tpu", "--exit-non-zero-on-fix", stdin=SOURCE, cwd=tmp_path)
    assert (flagged.returncode, flagged.stdout) == (1, FIXED)
    untouched = portcheck("fix", "-", "-d", "tpu", stdin=CLEAN, cwd=tmp_path)
    assert (untouched.returncode, untouched.stdout) == (0, CLEAN)


def test_fix_of_stdin_that_leaves_an_error_exits_1_and_a_diff_replaces_the_source(tmp_path: Path) -> None:
    left = "import torch\nname = torch.cuda.get_device_properties(0).name\n"
    fixed = portcheck("fix", "-", "-d", "tpu", stdin=left, cwd=tmp_path)
    assert (fixed.returncode, fixed.stdout) == (1, left)
    assert "PC206" in fixed.stderr
    diff = portcheck("fix", "-", "-d", "tpu", "--diff", "--stdin-filename", "src/train.py", stdin=SOURCE, cwd=tmp_path)
    assert diff.stdout.startswith("--- a/src/train.py\n+++ b/src/train.py\n")


def test_force_exclude_leaves_an_excluded_stdin_filename_alone(tmp_path: Path) -> None:
    excluded = ["--force-exclude", "--extend-exclude", "third_party/", "--stdin-filename", "third_party/x.py"]
    scanned = portcheck("scan", *excluded, "-f", "concise", stdin=SOURCE, cwd=tmp_path)
    assert (scanned.returncode, scanned.stdout) == (0, "No findings.\n")
    fixed = portcheck("fix", "-d", "tpu", *excluded, stdin=SOURCE, cwd=tmp_path)
    assert (fixed.returncode, fixed.stdout) == (0, SOURCE)


def test_stdin_together_with_paths_is_a_usage_error(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(app, ["scan", "-", "train.py"])
    assert result.exit_code == 2 and "standard input cannot be read together" in one_line_error(result)


# --------------------------------------------------------------------------- log levels


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_prints_only_the_findings(runner: CliRunner, project: Path, where: str) -> None:
    args = ["scan", "train.py", "--no-cache"]
    result = runner.invoke(app, ["-q", *args] if where == "before" else [*args, "-q"])
    assert result.exit_code == 1
    assert "train.py:4:1: PC203" in result.stdout
    assert "Found" not in result.stdout and "By rule" not in result.stdout
    concise = runner.invoke(app, [*args, "-q", "-f", "concise"])
    assert concise.stdout.splitlines() == [line for line in concise.stdout.splitlines() if ": PC" in line] != []


def test_silent_prints_nothing_but_keeps_the_exit_code(runner: CliRunner, project: Path) -> None:
    assert (
        runner.invoke(app, ["scan", "train.py", "-s"]).exit_code,
        runner.invoke(app, ["-s", "scan", "train.py"]).stdout,
    ) == (1, "")
    fixed = runner.invoke(app, ["fix", "train.py", "-d", "tpu", "-s"])
    assert (fixed.exit_code, fixed.output) == (0, "")
    assert (project / "train.py").read_text() == FIXED


def test_quiet_fix_prints_only_what_is_left(runner: CliRunner, project: Path) -> None:
    (project / "left.py").write_text(
        "import torch\nname = torch.cuda.get_device_properties(0).name\n", encoding="utf-8"
    )
    result = runner.invoke(app, ["fix", ".", "-d", "tpu", "-q"])
    assert result.exit_code == 1
    assert result.stdout.startswith("  left.py:2:8: PC206") and "Fixed" not in result.stdout


def test_quiet_baseline_says_nothing(runner: CliRunner, project: Path) -> None:
    result = runner.invoke(app, ["baseline", "train.py", "-q"])
    assert (result.exit_code, result.output) == (0, "")


# --------------------------------------------------------------------------- show files and settings


def test_show_files_lists_what_would_be_scanned_after_excludes(runner: CliRunner, project: Path) -> None:
    for name in ("pkg/a.py", "pkg/gen/b.py", "build/c.py", "notes.md"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(SOURCE, encoding="utf-8")
    result = runner.invoke(app, ["scan", "--show-files", "--extend-exclude", "gen/"])
    assert (result.exit_code, result.stdout) == (0, "pkg/a.py\ntrain.py\n")


def test_show_settings_shows_the_config_and_the_rules_left_for_the_file(runner: CliRunner, project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.portcheck]\ntargets = ["tpu"]\nmax-file-size = "1MB"\nper-file-ignores = { "tests/**" = ["PC2"] }\n',
        encoding="utf-8",
    )
    (project / "tests").mkdir()
    (project / "tests/t.py").write_text(SOURCE, encoding="utf-8")
    result = runner.invoke(app, ["scan", "tests/t.py", "--show-settings"])
    assert result.exit_code == 0, result.output
    assert f"Config file: {project / 'pyproject.toml'}" in result.stdout
    lines = dict(line.split(" = ", 1) for line in result.stdout.splitlines() if " = " in line)
    assert lines["targets"] == '["tpu"]' and lines["max-file-size"] == "1000000"
    assert "PC102" in lines["select"] and "PC203" not in lines["select"]


# --------------------------------------------------------------------------- statistics


def test_statistics_mark_the_rules_fix_can_fix(runner: CliRunner, project: Path) -> None:
    (project / "train.py").write_text(SOURCE + "name = torch.cuda.get_device_properties(0).name\n", encoding="utf-8")
    result = runner.invoke(app, ["scan", "train.py", "--statistics", "-t", "tpu"])
    rows = {row.split("\t")[1]: row.split("\t")[2] for row in result.stdout.splitlines()}
    assert rows == {
        "PC102": "[*] tensor-cuda-call",
        "PC203": "[*] cuda-synchronize",
        "PC206": "[ ] cuda-device-properties",
    }


# --------------------------------------------------------------------------- parallel fix


def test_fix_in_parallel_gives_what_one_process_gives(tmp_path: Path) -> None:
    trees = []
    for jobs in (1, 2):
        tree = tmp_path / f"jobs{jobs}"
        for index in range(30):
            (tree / f"pkg{index % 3}").mkdir(parents=True, exist_ok=True)
            (tree / f"pkg{index % 3}" / f"m{index}.py").write_text(SOURCE if index % 2 else CLEAN, encoding="utf-8")
        report = api.fix_paths([tree], Config(root=tree), "tpu", jobs=jobs)
        trees.append((report.outcomes, {p.relative_to(tree): p.read_bytes() for p in sorted(tree.rglob("*.py"))}))
    (serial, serial_files), (parallel, parallel_files) = trees
    assert parallel == serial and parallel_files == serial_files
    assert sum(outcome.changed for outcome in parallel) == 15


def test_fix_judges_what_is_left_with_the_whole_project_as_scan_does(runner: CliRunner, project: Path) -> None:
    (project / "csrc").mkdir()
    (project / "csrc/ops.cpp").write_text(
        'TORCH_LIBRARY(app, m) { m.def("scale(Tensor x) -> Tensor"); }\n'
        'TORCH_LIBRARY_IMPL(app, CUDA, m) { m.impl("scale", &scale_cuda); }\n',
        encoding="utf-8",
    )
    (project / "model.py").write_text("import torch\ny = torch.ops.app.scale(x)\n", encoding="utf-8")
    scanned = runner.invoke(app, ["scan", ".", "-t", "tpu", "-f", "concise", "--no-cache"])
    assert "model.py:2:5: PC605" in scanned.stdout
    fixed = runner.invoke(app, ["fix", ".", "-d", "tpu", "-j", "2"])
    assert fixed.exit_code == 1
    assert "model.py:2:5: PC605" in fixed.stdout


# --------------------------------------------------------------------------- help and sizes


@pytest.mark.parametrize(
    "command", ["scan", "fix", "baseline", "kernels", "report", "smoke", "run", "rules", "explain"]
)
def test_help_shows_placeholders_not_python_types(runner: CliRunner, command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "<" not in result.stdout, result.stdout  # no Python types such as <list[Path]>, <str>, <int range>


def test_help_shows_the_defaults(runner: CliRunner) -> None:
    help_text = " ".join(runner.invoke(app, ["scan", "--help"]).stdout.split())
    assert "[PATH]..." in help_text
    for shown in ("--jobs N", "[default: (all cores)", "--max-file-size SIZE", "[default: (2MB)]", "[default: text]"):
        assert shown in help_text


@pytest.mark.parametrize(("size", "reported"), [("40B", True), ("1KB", False), ("40", True), ("1MiB", False)])
def test_max_file_size_takes_bytes_or_units(runner: CliRunner, project: Path, size: str, reported: bool) -> None:
    result = runner.invoke(app, ["scan", "train.py", "--max-file-size", size, "-f", "concise", "--no-cache"])
    assert ("PC003" in result.stdout) is reported, result.output


def test_the_summary_counts_errors_per_target(runner: CliRunner, project: Path) -> None:
    (project / "train.py").write_text("import torch\nx = torch.zeros(2, dtype=torch.float64)\n", encoding="utf-8")
    result = runner.invoke(app, ["scan", "train.py", "-t", "tpu,mps", "--no-cache"])
    assert "Found 1 finding in 1 of 1 file (errors: tpu 0, mps 1)" in result.stdout
