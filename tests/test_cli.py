"""End-to-end tests of the `portcheck` command line: exit codes, rule selection, targets,
statistics, output files, baselines, `rules`, `explain` and `[tool.portcheck]` configuration.

Every test writes a few small source files into its own `tmp_path` and runs the real command
line in-process with click's `CliRunner` (one test runs `python -m portcheck` in a subprocess).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import portcheck
from portcheck.cli import app

ALL_TARGETS = ("tpu", "neuron", "xla", "mps", "xpu", "npu", "hpu", "rocm", "cpu")
DEFAULT_TARGETS = tuple(t for t in ALL_TARGETS if t != "rocm")
SEVERITY_LABELS = {"error", "warning", "info", "off"}

# Errors on every default target (PC102, PC203).
ERROR_SOURCE = """\
import torch


def step(x):
    x = x.cuda()
    torch.cuda.synchronize()
    return x
"""

# Only a warning on every target (PC103).
WARNING_SOURCE = """\
def on_gpu(x):
    if x.is_cuda:
        return 1
    return 0
"""

# Only an info finding on every target (PC306 for cudnn.benchmark).
INFO_SOURCE = """\
import torch

torch.backends.cudnn.benchmark = True
"""

# One finding from each of PC102, PC203, PC210, PC103 and PC204, one per line.
MIXED_SOURCE = """\
import torch

x = torch.zeros(2).cuda()
torch.cuda.synchronize()
print(torch.version.cuda)
if x.is_cuda:
    torch.cuda.empty_cache()
"""
MIXED_CODES = {"PC102", "PC203", "PC210", "PC103", "PC204"}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory that is also the current directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def scan_json(runner: CliRunner, *args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["scan", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def codes_in(document: dict) -> set[str]:
    return {finding["code"] for finding in document["findings"]}


def concise_codes(stdout: str) -> list[str]:
    """The rule codes of `--format concise` lines, in order."""
    return [line.split(": ", 1)[1].split(" ", 1)[0] for line in stdout.splitlines() if ": PC" in line]


# --------------------------------------------------------------------------- exit codes


def test_clean_file_exits_0_and_reports_no_findings(runner: CliRunner, project: Path) -> None:
    write(project / "clean.py", "import torch\n\nx = torch.zeros(3)\n")
    result = runner.invoke(app, ["scan", "clean.py"])
    assert result.exit_code == 0, result.output
    assert "No findings" in result.stdout


def test_error_finding_exits_1_with_the_default_fail_on(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--format", "concise"])
    assert result.exit_code == 1, result.output
    assert "train.py:6:5: PC203 error" in result.stdout


def test_warning_only_file_exits_0_with_the_default_fail_on(runner: CliRunner, project: Path) -> None:
    write(project / "warn.py", WARNING_SOURCE)
    result = runner.invoke(app, ["scan", "warn.py", "--format", "concise"])
    assert result.exit_code == 0, result.output
    assert "warn.py:2:8: PC103 warning" in result.stdout


def test_fail_on_warning_makes_a_warning_only_file_exit_1(runner: CliRunner, project: Path) -> None:
    write(project / "warn.py", WARNING_SOURCE)
    result = runner.invoke(app, ["scan", "warn.py", "--fail-on", "warning"])
    assert result.exit_code == 1, result.output


def test_fail_on_warning_still_passes_an_info_only_file(runner: CliRunner, project: Path) -> None:
    write(project / "info.py", INFO_SOURCE)
    result = runner.invoke(app, ["scan", "info.py", "--fail-on", "warning", "--format", "concise"])
    assert result.exit_code == 0, result.output
    assert "PC306 info" in result.stdout


def test_fail_on_info_makes_an_info_only_file_exit_1(runner: CliRunner, project: Path) -> None:
    write(project / "info.py", INFO_SOURCE)
    result = runner.invoke(app, ["scan", "info.py", "--fail-on", "info"])
    assert result.exit_code == 1, result.output


def test_exit_zero_exits_0_despite_error_findings_and_still_reports_them(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--exit-zero", "--format", "concise"])
    assert result.exit_code == 0, result.output
    assert "PC203" in result.stdout
    assert "Found 2 findings." in result.stdout


def test_exit_zero_does_not_hide_a_missing_path(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "missing.py", "--exit-zero"])
    assert result.exit_code == 2, result.output


def test_unknown_format_is_a_usage_error(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--format", "xml"])
    assert result.exit_code == 2
    assert "unknown format 'xml'" in result.stderr
    for name in ("text", "concise", "json", "sarif", "github"):
        assert name in result.stderr


def test_unknown_select_code_is_a_usage_error_listing_valid_codes(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--select", "PC999"])
    assert result.exit_code == 2
    assert "PC999" in result.stderr
    for code in ("PC001", "PC101", "PC203", "PC307", "PC406"):
        assert code in result.stderr
    assert result.stdout == ""


def test_unknown_ignore_code_is_a_usage_error(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--ignore", "XY1"])
    assert result.exit_code == 2
    assert "XY1" in result.stderr


def test_unknown_target_is_a_usage_error_listing_valid_targets(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--target", "gpu"])
    assert result.exit_code == 2
    assert "gpu" in result.stderr
    for target in ALL_TARGETS:
        assert target in result.stderr


def test_unknown_fail_on_severity_is_a_usage_error(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--fail-on", "fatal"])
    assert result.exit_code == 2
    assert "fatal" in result.stderr


def test_missing_path_exits_2_but_the_other_paths_are_still_scanned(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "does_not_exist.py", "--format", "concise"])
    assert result.exit_code == 2
    assert "does_not_exist.py" in result.output
    assert "does not exist" in result.output
    assert "train.py:5:9: PC102" in result.stdout
    assert "train.py:6:5: PC203" in result.stdout


def test_missing_path_is_listed_in_json_errors(runner: CliRunner, project: Path) -> None:
    write(project / "warn.py", WARNING_SOURCE)
    result = runner.invoke(app, ["scan", "warn.py", "nowhere/", "--format", "json"])
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert codes_in(document) == {"PC103"}
    assert len(document["errors"]) == 1
    assert "nowhere" in document["errors"][0]


def test_version_option_in_a_subprocess(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "portcheck", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"portcheck {portcheck.__version__}"


# --------------------------------------------------------------------------- targets and rule selection


def test_target_option_is_repeatable_and_comma_separated(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    _, document = scan_json(runner, "m.py", "--target", "tpu", "--target", "neuron, xla")
    assert document["targets"] == ["tpu", "neuron", "xla"]
    assert document["findings"]
    for finding in document["findings"]:
        assert set(finding["targets"]) <= {"tpu", "neuron", "xla"}
    assert set(document["summary"]["by_target"]) == {"tpu", "neuron", "xla"}


def test_default_targets_are_every_target_but_rocm(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    _, document = scan_json(runner, "m.py")
    assert tuple(document["targets"]) == DEFAULT_TARGETS


def test_target_all_selects_every_target_including_rocm(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    _, document = scan_json(runner, "m.py", "--target", "all")
    assert tuple(document["targets"]) == ALL_TARGETS
    # torch.version.cuda is None on ROCm builds too, while HIP answers torch.cuda.synchronize.
    by_code = {f["code"]: f for f in document["findings"]}
    assert "rocm" in by_code["PC210"]["targets"]
    assert "rocm" not in by_code["PC203"]["targets"]


def test_rocm_target_drops_findings_that_hip_answers(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--target", "rocm"])
    assert result.exit_code == 0, result.output
    assert "No findings" in result.stdout


def test_select_prefix_keeps_only_that_family(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    result = runner.invoke(app, ["scan", "m.py", "--select", "PC2", "--format", "concise"])
    assert result.exit_code == 1, result.output
    assert concise_codes(result.stdout) == ["PC203", "PC210", "PC204"]


def test_select_accepts_a_comma_separated_list(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    result = runner.invoke(app, ["scan", "m.py", "--select", "PC203,PC103", "--format", "concise"])
    assert concise_codes(result.stdout) == ["PC203", "PC103"]


def test_extend_select_adds_to_select(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    result = runner.invoke(app, ["scan", "m.py", "--select", "PC1", "--extend-select", "PC203", "--format", "concise"])
    assert concise_codes(result.stdout) == ["PC102", "PC203", "PC103"]


def test_ignore_full_code_removes_only_that_rule(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    result = runner.invoke(app, ["scan", "m.py", "--ignore", "PC203", "--format", "concise"])
    assert concise_codes(result.stdout) == ["PC102", "PC210", "PC103", "PC204"]


def test_ignore_prefix_removes_every_rule_it_prefixes(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    result = runner.invoke(app, ["scan", "m.py", "--ignore", "PC20", "--format", "concise"])
    # PC20 covers PC201-PC209 (PC203, PC204) but not PC210.
    assert concise_codes(result.stdout) == ["PC102", "PC210", "PC103"]
    result = runner.invoke(app, ["scan", "m.py", "--ignore", "PC2", "--format", "concise"])
    assert concise_codes(result.stdout) == ["PC102", "PC103"]


def test_selection_is_reflected_in_the_json_rule_list(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    _, document = scan_json(runner, "m.py", "--select", "PC2", "--ignore", "PC203")
    assert document["rules"]
    assert all(code.startswith("PC2") for code in document["rules"])
    assert "PC203" not in document["rules"]
    assert codes_in(document) == {"PC210", "PC204"}


# --------------------------------------------------------------------------- statistics and output files


def test_statistics_text_prints_one_row_per_rule(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE + "torch.cuda.synchronize()\n")
    result = runner.invoke(app, ["scan", "m.py", "--statistics"])
    assert result.exit_code == 1, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert all(len(row) == 4 for row in rows), result.stdout
    by_code = {code: (int(count), name, worst) for count, code, name, worst in rows}
    assert set(by_code) == MIXED_CODES
    assert by_code["PC203"] == (2, "[*] cuda-synchronize", "error")  # [*]: `fix` fixes every one
    assert by_code["PC103"][0] == 1 and by_code["PC103"][2] == "warning"
    assert by_code["PC103"][1].endswith("] is-cuda-attribute")
    assert rows[0][1] == "PC203"  # the most frequent rule first
    assert "torch.cuda.synchronize()" not in result.stdout  # counts only, no per-finding output


def test_statistics_json_is_a_list_of_rule_counts(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE + "torch.cuda.synchronize()\n")
    result = runner.invoke(app, ["scan", "m.py", "--statistics", "--format", "json"])
    assert result.exit_code == 1, result.output
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    assert {row["code"] for row in rows} == MIXED_CODES
    counts = {row["code"]: row["count"] for row in rows}
    assert counts["PC203"] == 2
    assert sum(counts.values()) == 6
    for row in rows:
        assert {"code", "name", "count", "worst_severity"} <= set(row)
        assert row["worst_severity"] in SEVERITY_LABELS


def test_output_file_receives_the_report_instead_of_stdout(runner: CliRunner, project: Path) -> None:
    write(project / "src" / "m.py", MIXED_SOURCE)
    result = runner.invoke(app, ["scan", "src", "--format", "json", "--output-file", "report.json"])
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    document = json.loads((project / "report.json").read_text(encoding="utf-8"))
    assert codes_in(document) == MIXED_CODES

    on_stdout = runner.invoke(app, ["scan", "src", "--format", "json"])
    assert (project / "report.json").read_text(encoding="utf-8") == on_stdout.stdout


def test_output_file_short_option_with_text_format_has_no_colour(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "-o", "report.txt"])
    assert result.exit_code == 1, result.output
    text = (project / "report.txt").read_text(encoding="utf-8")
    assert "train.py:6:5: PC203" in text
    assert "\x1b[" not in text


def test_statistics_can_go_to_an_output_file(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--statistics", "-f", "json", "-o", "stats.json"])
    assert result.exit_code == 1, result.output
    rows = json.loads((project / "stats.json").read_text(encoding="utf-8"))
    assert {row["code"] for row in rows} == {"PC102", "PC203"}


# --------------------------------------------------------------------------- baseline


@pytest.fixture
def baselined(runner: CliRunner, project: Path) -> Path:
    """A tree with four findings and a baseline of them at project/baseline.json."""
    write(project / "src" / "train.py", ERROR_SOURCE)
    write(project / "src" / "model.py", WARNING_SOURCE)
    write(project / "src" / "setup_backends.py", INFO_SOURCE)
    result = runner.invoke(app, ["baseline", "src", "-o", "baseline.json"])
    assert result.exit_code == 0, result.output
    return project / "baseline.json"


def test_baseline_command_writes_a_reviewable_json_file(runner: CliRunner, baselined: Path) -> None:
    document = json.loads(baselined.read_text(encoding="utf-8"))
    assert document["portcheck_baseline"] == 1
    entries = document["findings"]
    assert [(e["path"], e["line"], e["code"]) for e in entries] == [
        ("src/model.py", 2, "PC103"),
        ("src/setup_backends.py", 3, "PC306"),
        ("src/train.py", 5, "PC102"),
        ("src/train.py", 6, "PC203"),
    ]
    assert all(isinstance(e["fingerprint"], str) and e["fingerprint"] for e in entries)
    assert len({e["fingerprint"] for e in entries}) == 4


def test_baseline_command_says_how_many_findings_it_wrote(runner: CliRunner, project: Path) -> None:
    write(project / "src" / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["baseline", "src", "--output", "accepted.json"])
    assert result.exit_code == 0, result.output
    assert "Wrote 2 findings to accepted.json" in result.stdout
    assert (project / "accepted.json").is_file()


def test_scan_with_baseline_of_the_same_tree_exits_0(runner: CliRunner, baselined: Path) -> None:
    result = runner.invoke(app, ["scan", "src", "--baseline", str(baselined)])
    assert result.exit_code == 0, result.output
    assert "No findings" in result.stdout
    assert "4 known findings hidden by the baseline" in result.stdout


def test_scan_with_baseline_reports_only_a_new_cuda_line(runner: CliRunner, project: Path, baselined: Path) -> None:
    train = project / "src" / "train.py"
    train.write_text(ERROR_SOURCE + "\n\ntorch.cuda.set_device(0)\n", encoding="utf-8")
    result = runner.invoke(app, ["scan", "src", "--baseline", str(baselined), "--format", "json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert [(f["path"], f["line"], f["code"]) for f in document["findings"]] == [("src/train.py", 10, "PC202")]
    assert document["summary"]["baselined"] == 4

    concise = runner.invoke(app, ["scan", "src", "--baseline", str(baselined), "--format", "concise"])
    assert concise.exit_code == 1
    assert concise_codes(concise.stdout) == ["PC202"]


def test_baseline_survives_blank_lines_and_comments_inserted_above_findings(
    runner: CliRunner, project: Path, baselined: Path
) -> None:
    train = project / "src" / "train.py"
    train.write_text("# a new header comment\n\n\n# and another\n" + ERROR_SOURCE, encoding="utf-8")
    model = project / "src" / "model.py"
    model.write_text(WARNING_SOURCE.replace("def on_gpu(x):\n", "def on_gpu(x):\n\n    # why\n\n"), encoding="utf-8")

    # The findings did move...
    _, moved = scan_json(runner, "src")
    assert ("src/train.py", 10) in {(f["path"], f["line"]) for f in moved["findings"]}
    # ...but they are not new.
    result = runner.invoke(app, ["scan", "src", "--baseline", str(baselined), "--fail-on", "info"])
    assert result.exit_code == 0, result.output
    assert "No findings" in result.stdout


@pytest.fixture
def repository(runner: CliRunner, project: Path) -> Path:
    """A git repository without [tool.portcheck] in project/repo, baselined from its root."""
    repo = project / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "src" / "train.py", ERROR_SOURCE)
    write(repo / "src" / "model.py", WARNING_SOURCE)
    with pytest.MonkeyPatch.context() as here:
        here.chdir(repo)
        result = runner.invoke(app, ["baseline", "src", "-o", "baseline.json"])
    assert result.exit_code == 0, result.output
    return repo


@pytest.mark.parametrize("where", [".", "repo/src"], ids=["from-the-parent", "from-a-subfolder"])
def test_a_baseline_holds_wherever_the_scan_runs_from_in_a_git_repository(
    runner: CliRunner, repository: Path, project: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.chdir(project / where)
    target = Path("repo/src") if where == "." else Path(".")
    result = runner.invoke(app, ["scan", str(target), "--baseline", str(repository / "baseline.json")])
    assert result.exit_code == 0, result.output
    assert "3 known findings hidden by the baseline" in result.stdout


def test_baseline_paths_and_fingerprints_start_at_the_repository_root(
    runner: CliRunner, repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repository / "src")
    result = runner.invoke(app, ["baseline", ".", "-o", "again.json"])
    assert result.exit_code == 0, result.output
    again = json.loads((repository / "src" / "again.json").read_text(encoding="utf-8"))
    first = json.loads((repository / "baseline.json").read_text(encoding="utf-8"))
    assert again["findings"] == first["findings"]
    assert {e["path"] for e in first["findings"]} == {"src/model.py", "src/train.py"}
    assert first["paths_from"] == "git"


def test_fingerprints_do_not_depend_on_line_numbers(runner: CliRunner, project: Path) -> None:
    write(project / "src" / "train.py", ERROR_SOURCE)
    _, before = scan_json(runner, "src")
    write(project / "src" / "train.py", "\n\n# moved down\n\n" + ERROR_SOURCE)
    _, after = scan_json(runner, "src")
    assert [f["line"] + 4 for f in before["findings"]] == [f["line"] for f in after["findings"]]
    assert [f["fingerprint"] for f in before["findings"]] == [f["fingerprint"] for f in after["findings"]]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("this is not json{", id="not-json"),
        pytest.param('{"findings": []}', id="no-format-marker"),
        pytest.param('{"portcheck_baseline": 99, "findings": []}', id="unknown-format"),
        pytest.param('{"portcheck_baseline": 1, "findings": [{"code": "PC203"}]}', id="entry-without-fingerprint"),
        pytest.param('{"portcheck_baseline": 1}', id="no-findings-key"),
        pytest.param("[1, 2, 3]", id="not-an-object"),
    ],
)
def test_malformed_baseline_file_exits_2(runner: CliRunner, project: Path, content: str) -> None:
    write(project / "train.py", ERROR_SOURCE)
    write(project / "bad-baseline.json", content)
    result = runner.invoke(app, ["scan", "train.py", "--baseline", "bad-baseline.json"])
    assert result.exit_code == 2, result.output
    assert "bad-baseline.json" in result.stderr


def test_missing_baseline_file_exits_2(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    result = runner.invoke(app, ["scan", "train.py", "--baseline", "nope.json"])
    assert result.exit_code == 2
    assert "nope.json" in result.stderr


# --------------------------------------------------------------------------- rules and explain


def test_rules_table_lists_every_rule_and_target(runner: CliRunner) -> None:
    result = runner.invoke(app, ["rules"])
    assert result.exit_code == 0, result.output
    for code in ("PC001", "PC004", "PC101", "PC105", "PC201", "PC214", "PC301", "PC307", "PC401", "PC406"):
        assert code in result.stdout
    header = result.stdout.splitlines()[0]
    for target in ALL_TARGETS:
        assert target in header
    assert "\x1b[" not in result.stdout


def test_rules_json_gives_every_rule_a_severity_on_each_of_the_nine_targets(runner: CliRunner) -> None:
    result = runner.invoke(app, ["rules", "--format", "json"])
    assert result.exit_code == 0, result.output
    rules = json.loads(result.stdout)
    assert isinstance(rules, list) and len(rules) >= 36
    codes = [rule["code"] for rule in rules]
    assert codes == sorted(codes) and len(set(codes)) == len(codes)
    for rule in rules:
        assert rule["code"].startswith("PC")
        assert isinstance(rule["name"], str) and rule["name"]
        assert tuple(rule["severity"]) == ALL_TARGETS, rule["code"]
        assert set(rule["severity"].values()) <= SEVERITY_LABELS, rule["code"]
    by_code = {rule["code"]: rule for rule in rules}
    assert by_code["PC203"]["name"] == "cuda-synchronize"
    assert by_code["PC203"]["severity"]["tpu"] == "error"
    assert by_code["PC203"]["severity"]["rocm"] == "off"


def test_rules_markdown_is_a_table_with_a_row_per_rule(runner: CliRunner) -> None:
    result = runner.invoke(app, ["rules", "--format", "markdown"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| code |"))
    assert header.endswith("| " + " | ".join(ALL_TARGETS) + " |")
    rows = [line for line in lines if line.startswith("| PC")]
    as_json = json.loads(runner.invoke(app, ["rules", "--format", "json"]).stdout)
    assert [row.split("|")[1].strip() for row in rows] == [rule["code"] for rule in as_json]
    pc203 = next(row for row in rows if row.startswith("| PC203 |"))
    assert "cuda-synchronize" in pc203


def test_rules_unknown_format_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["rules", "--format", "yaml"])
    assert result.exit_code == 2
    assert "yaml" in result.stderr


def test_explain_prints_the_rule_documentation(runner: CliRunner) -> None:
    result = runner.invoke(app, ["explain", "PC203"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# PC203 cuda-synchronize")
    for heading in ("## What it does", "## Why is this bad?", "## Use instead", "## Severity per target"):
        assert heading in result.stdout
    for target in ALL_TARGETS:
        assert f"- {target}: " in result.stdout
    assert "torch.accelerator.synchronize()" in result.stdout


def test_explain_is_case_insensitive_and_narrows_to_one_target(runner: CliRunner) -> None:
    result = runner.invoke(app, ["explain", "pc203", "--target", "xla"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# PC203 cuda-synchronize")
    assert "torch_xla.sync()" in result.stdout
    assert "- xla: error" in result.stdout
    assert "- tpu: " not in result.stdout
    assert "## About xla" in result.stdout


def test_explain_unknown_code_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["explain", "PC999"])
    assert result.exit_code == 2
    assert "PC999" in result.stderr
    assert result.stdout == ""


def test_explain_unknown_target_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["explain", "PC203", "--target", "gpu"])
    assert result.exit_code == 2
    assert "gpu" in result.stderr


# --------------------------------------------------------------------------- configuration


def write_pyproject(directory: Path, body: str) -> Path:
    return write(directory / "pyproject.toml", '[project]\nname = "demo"\n\n[tool.portcheck]\n' + body)


def test_config_targets_change_the_results(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    assert runner.invoke(app, ["scan", "."]).exit_code == 1
    write_pyproject(project, 'targets = ["rocm"]\n')
    _, document = scan_json(runner, ".")
    assert document["targets"] == ["rocm"]
    assert document["findings"] == []


def test_cli_target_overrides_config_targets(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    write_pyproject(project, 'targets = ["rocm"]\n')
    code, document = scan_json(runner, ".", "--target", "tpu")
    assert code == 1
    assert document["targets"] == ["tpu"]
    assert codes_in(document) == {"PC102", "PC203"}


def test_config_ignore_removes_rules(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    write_pyproject(project, 'ignore = ["PC203", "PC1"]\n')
    _, document = scan_json(runner, ".")
    assert codes_in(document) == {"PC210", "PC204"}


def test_config_select_is_replaced_by_cli_select(runner: CliRunner, project: Path) -> None:
    write(project / "m.py", MIXED_SOURCE)
    write_pyproject(project, 'select = ["PC1"]\n')
    _, from_config = scan_json(runner, ".")
    assert codes_in(from_config) == {"PC102", "PC103"}
    _, from_cli = scan_json(runner, ".", "--select", "PC203")
    assert codes_in(from_cli) == {"PC203"}


def test_config_per_file_ignores_apply_only_to_matching_files(runner: CliRunner, project: Path) -> None:
    write(project / "src" / "train.py", ERROR_SOURCE)
    write(project / "tests" / "test_train.py", ERROR_SOURCE)
    write_pyproject(project, 'per-file-ignores = { "tests/**" = ["PC1"] }\n')
    _, document = scan_json(runner, ".")
    found = {(f["path"], f["code"]) for f in document["findings"]}
    assert found == {
        ("src/train.py", "PC102"),
        ("src/train.py", "PC203"),
        ("tests/test_train.py", "PC203"),
    }


def test_config_extend_exclude_skips_a_directory(runner: CliRunner, project: Path) -> None:
    write(project / "src" / "train.py", ERROR_SOURCE)
    write(project / "third_party" / "vendored.py", ERROR_SOURCE)
    _, before = scan_json(runner, ".")
    assert {f["path"] for f in before["findings"]} == {"src/train.py", "third_party/vendored.py"}
    write_pyproject(project, 'extend-exclude = ["third_party/"]\n')
    _, after = scan_json(runner, ".")
    assert {f["path"] for f in after["findings"]} == {"src/train.py"}
    assert after["summary"]["files"] == 2  # src/train.py and pyproject.toml (read for dependencies)


def test_config_fail_on_is_overridden_by_the_cli(runner: CliRunner, project: Path) -> None:
    write(project / "warn.py", WARNING_SOURCE)
    write_pyproject(project, 'fail-on = "warning"\n')
    assert runner.invoke(app, ["scan", "."]).exit_code == 1
    assert runner.invoke(app, ["scan", ".", "--fail-on", "error"]).exit_code == 0


def test_unknown_config_key_exits_2_and_names_it(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    write_pyproject(project, 'targets = ["tpu"]\nfrobnicate = true\n')
    result = runner.invoke(app, ["scan", "."])
    assert result.exit_code == 2
    assert "frobnicate" in result.stderr
    assert "pyproject.toml" in result.stderr
    assert result.stdout == ""


def test_invalid_config_value_exits_2(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    write_pyproject(project, 'targets = ["gpu"]\n')
    result = runner.invoke(app, ["scan", "."])
    assert result.exit_code == 2
    assert "gpu" in result.stderr


def test_config_is_found_above_the_single_path_given(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    write(project / "pkg" / "train.py", ERROR_SOURCE)
    write_pyproject(project, 'targets = ["rocm"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = runner.invoke(app, ["scan", str(project / "pkg"), "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["targets"] == ["rocm"]
    assert document["findings"] == []


def test_pyproject_without_a_portcheck_table_is_ignored(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    write(project / "pyproject.toml", '[project]\nname = "demo"\n\n[tool.other]\nfrobnicate = true\n')
    code, document = scan_json(runner, ".")
    assert code == 1
    assert tuple(document["targets"]) == DEFAULT_TARGETS


def test_explicit_config_option_reads_that_file(runner: CliRunner, project: Path) -> None:
    write(project / "train.py", ERROR_SOURCE)
    write(project / "configs" / "pyproject.toml", '[tool.portcheck]\nignore = ["PC102"]\n')
    _, document = scan_json(runner, ".", "--config", "configs/pyproject.toml")
    assert codes_in(document) == {"PC203"}


# --------------------------------------------------------------------------- kernels in tests and vendored code

TRITON_KERNEL = "import triton\n\n@triton.jit\ndef kernel(x):\n    pass\n"


def test_kernels_in_tests_and_vendored_code_are_marked_and_counted_on_request(runner: CliRunner, project: Path) -> None:
    write(project / "pkg" / "ops.py", TRITON_KERNEL)
    write(project / "tests" / "test_ops.py", TRITON_KERNEL)
    write(project / "vendor" / "lib" / "ops.py", TRITON_KERNEL)
    text = runner.invoke(app, ["kernels", ".", "--target", "tpu", "--no-cache"])
    assert "tests/test_ops.py:4 (test)" in text.stdout and "vendor/lib/ops.py:4 (vendored)" in text.stdout
    assert "2 kernels in tests or vendored code not counted" in text.stdout
    default = json.loads(runner.invoke(app, ["kernels", ".", "-t", "tpu", "--format", "json", "--no-cache"]).stdout)
    assert default["per_target"]["tpu"]["kernels"] == 1
    assert sorted(k["origin"] for k in default["kernels"]) == ["project", "test", "vendored"]
    every = runner.invoke(app, ["kernels", ".", "-t", "tpu", "--format", "json", "--all-kernels", "--no-cache"])
    assert json.loads(every.stdout)["per_target"]["tpu"]["kernels"] == 3
    report = runner.invoke(app, ["report", ".", "-t", "tpu", "--format", "json", "--all-kernels", "--no-cache"])
    assert json.loads(report.stdout)["targets"][0]["kernels"] == 3
