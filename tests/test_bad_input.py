"""Every kind of bad input becomes a clear per-file finding or message; the run goes on.

Exit codes through the CLI: 0 nothing at or above --fail-on, 1 something is (PC001 and PC002
are errors, PC003 is a warning), 2 a path that cannot be used or an internal error.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import portcheck
from portcheck.api import FixReport, ScanReport, fix_paths, scan_paths, scan_source
from portcheck.cli import app
from portcheck.config import Config
from portcheck.findings import Finding, Severity
from portcheck.rules.placement.tensor_cuda_call import TensorCudaCall

PORTCHECK_ROOT = str(Path(portcheck.__file__).resolve().parents[1])  # subprocesses run this same portcheck
CUDA_SOURCE = "import torch\ntorch.cuda.synchronize()\n"  # PC203 on line 2
LATIN1_WITH_COOKIE = "# -*- coding: latin-1 -*-\nimport torch\nname = 'café'\ntorch.cuda.synchronize()\n".encode(
    "latin-1"
)
NOT_UTF8 = b"import torch\nname = 'caf\xe9'\ntorch.cuda.synchronize()\n"  # Latin-1 bytes, no cookie


# --- helpers ---------------------------------------------------------------------------------


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def scan(tmp_path: Path, *names: str, **overrides: object) -> ScanReport:
    """Scan `names` (relative to tmp_path; the whole tree when none) with tmp_path as root."""
    config = Config(root=tmp_path).with_overrides(**overrides)
    paths = [tmp_path / name for name in names] or [tmp_path]
    return scan_paths(paths, config, jobs=1)


def findings_for(report: ScanReport, path: str) -> list[Finding]:
    return [f for f in report.findings if f.path == path]


def codes_for(report: ScanReport, path: str) -> list[str]:
    return [f.code for f in findings_for(report, path)]


def assert_good_file_scanned(report: ScanReport, path: str = "good.py") -> None:
    assert [(f.code, f.line) for f in findings_for(report, path)] == [("PC203", 2)]


def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["scan", *args, "--format", "concise", "--jobs", "1"])
    # A crash shows up as an exception other than the SystemExit click uses for exit codes.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def within(seconds: float, function: Callable[[], object]) -> object:
    """Run `function` in a daemon thread; fail (rather than hang) if it does not finish in time."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"did not finish within {seconds} s (an endless walk?)"
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]


# --- syntax errors -----------------------------------------------------------------------------


def test_syntax_error_is_pc001_at_the_offending_line(tmp_path: Path) -> None:
    write(tmp_path / "broken.py", "import torch\n\ndef f(:\n    torch.cuda.synchronize()\n")
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path)
    [finding] = findings_for(report, "broken.py")
    assert (finding.code, finding.line, finding.severity) == ("PC001", 3, Severity.ERROR)
    assert "syntax error" in finding.message
    assert_good_file_scanned(report)
    assert report.errors == report.internal_errors == ()


def test_unclosed_bracket_is_pc001_at_the_line_python_reports() -> None:
    [finding] = scan_source("import torch\nx = torch.zeros(3).cuda(\n")
    assert (finding.code, finding.line) == ("PC001", 2)
    assert "never closed" in finding.message


def test_python2_print_statement_is_pc001_with_cpythons_message() -> None:
    [finding] = scan_source('import torch\nprint "x", torch.cuda.device_count()\n')
    assert (finding.code, finding.line) == ("PC001", 2)
    assert "parentheses" in finding.message  # CPython: "Missing parentheses in call to 'print'"
    assert "print(...)" in finding.message


def test_syntax_error_fails_the_cli_run_with_exit_1_and_other_files_are_still_scanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "py2.py", 'import torch\nprint "x", torch.cuda.device_count()\n')
    write(tmp_path / "clean.py", "import torch\nx = torch.zeros(1).to('cpu')\n")
    write(tmp_path / "also_clean.py", "import torch\nassert torch.accelerator.is_available()\n")
    result = run_cli(tmp_path, monkeypatch, "py2.py", "clean.py", "also_clean.py")
    assert result.exit_code == 1, result.output  # only the parse error can fail this run
    assert "py2.py:2:1: PC001" in result.output
    assert "Found 1 finding." in result.output


# --- undecodable and binary files --------------------------------------------------------------


def test_binary_file_named_py_is_pc002(tmp_path: Path) -> None:
    write(tmp_path / "model.py", b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) + b"cuda\x00torch")
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path)
    [finding] = findings_for(report, "model.py")
    assert finding.code == "PC002"
    assert "binary" in finding.message
    assert_good_file_scanned(report)


def test_non_utf8_file_without_coding_cookie_is_pc002_naming_the_byte_offset(tmp_path: Path) -> None:
    write(tmp_path / "latin.py", NOT_UTF8)
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path)
    [finding] = findings_for(report, "latin.py")
    assert finding.code == "PC002"
    assert "utf-8" in finding.message.lower()
    offset = NOT_UTF8.index(b"\xe9")
    assert f"byte {offset}" in finding.message
    assert "coding" in finding.message  # says how to fix it
    assert_good_file_scanned(report)


def test_unknown_coding_cookie_is_pc002() -> None:
    [finding] = scan_source(b"# -*- coding: no-such-codec -*-\nimport torch\ntorch.cuda.synchronize()\n")
    assert finding.code == "PC002"
    assert "cannot decode" in finding.message


def test_latin1_file_with_coding_cookie_is_scanned_normally(tmp_path: Path) -> None:
    write(tmp_path / "latin.py", LATIN1_WITH_COOKIE)
    report = scan(tmp_path)
    [finding] = report.findings
    assert (finding.path, finding.code, finding.line, finding.column) == ("latin.py", "PC203", 4, 1)
    assert finding.source_line == "torch.cuda.synchronize()"


def test_non_ascii_text_before_a_finding_on_the_same_line_keeps_the_column_in_characters() -> None:
    source = "# -*- coding: latin-1 -*-\nimport torch\nn = 'éé'; torch.cuda.synchronize()\n".encode("latin-1")
    [finding] = scan_source(source)
    assert (finding.code, finding.line, finding.column) == ("PC203", 3, 11)
    assert finding.source_line == "n = 'éé'; torch.cuda.synchronize()"


def test_utf8_bom_file_is_scanned_normally(tmp_path: Path) -> None:
    write(tmp_path / "bom.py", b"\xef\xbb\xbfimport torch; torch.cuda.synchronize()\n")
    report = scan(tmp_path)
    [finding] = report.findings
    assert (finding.path, finding.code, finding.line, finding.column) == ("bom.py", "PC203", 1, 15)
    assert finding.source_line == "import torch; torch.cuda.synchronize()"  # no BOM character


def test_crlf_file_is_scanned_normally_with_correct_line_numbers(tmp_path: Path) -> None:
    write(tmp_path / "windows.py", b"import torch\r\n\r\nx = 1\r\ntorch.cuda.synchronize()\r\ny = x.cuda()\r\n")
    report = scan(tmp_path)
    assert [(f.code, f.line, f.column) for f in report.findings] == [("PC203", 4, 1), ("PC102", 5, 5)]
    assert all("\r" not in f.source_line for f in report.findings)


# --- files with nothing in them ----------------------------------------------------------------


def test_empty_file_gives_no_finding(tmp_path: Path) -> None:
    write(tmp_path / "empty.py", b"")
    report = scan(tmp_path)
    assert (report.findings, report.errors, report.internal_errors) == ((), (), ())
    assert (report.files, report.skipped) == (1, 1)


@pytest.mark.parametrize(
    "comments",
    [
        "# nothing to see here\n# at all\n",
        "#!/usr/bin/env python\n# cuda is mentioned only in this comment\n",  # has a trigger word: parsed
        "# no trailing newline, cuda",
    ],
)
def test_file_with_only_comments_gives_no_finding(tmp_path: Path, comments: str) -> None:
    write(tmp_path / "comments.py", comments)
    report = scan(tmp_path)
    assert (report.findings, report.errors, report.internal_errors) == ((), (), ())
    assert report.files == 1


def test_empty_and_comment_only_files_pass_the_cli_with_exit_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "empty.py", b"")
    write(tmp_path / "comments.py", "# cuda only in a comment\n")
    result = run_cli(tmp_path, monkeypatch, ".")
    assert result.exit_code == 0, result.output
    assert "No findings." in result.output


# --- oversized files ---------------------------------------------------------------------------


def test_file_over_max_file_size_with_a_trigger_word_is_pc003_and_not_parsed(tmp_path: Path) -> None:
    # Invalid syntax after the trigger word: a parse would give PC001, so PC003 alone proves it was not parsed.
    write(tmp_path / "generated.py", "import torch\ntorch.cuda.synchronize()\n" + "def f(:\n" * 500)
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path, max_file_size=1000)
    [finding] = findings_for(report, "generated.py")
    assert (finding.code, finding.severity) == ("PC003", Severity.WARNING)
    assert "max-file-size" in finding.message
    assert_good_file_scanned(report)


def test_file_over_max_file_size_without_any_trigger_word_is_silently_skipped(tmp_path: Path) -> None:
    write(tmp_path / "table.py", "x = 1\n" * 1000)  # 6000 bytes, no CUDA-related word
    report = scan(tmp_path, max_file_size=1000)
    assert (report.findings, report.errors) == ((), ())
    assert (report.files, report.skipped) == (1, 1)


def test_too_large_message_tells_the_file_size_from_the_limit(tmp_path: Path) -> None:
    write(tmp_path / "generated.py", "import torch\n" + "x = torch.zeros(1).cuda()\n" * 400)  # ~10 kB
    report = scan(tmp_path, max_file_size=1000)
    [finding] = report.findings
    size, limit = finding.message.split("the file is ", 1)[1].split(", over max-file-size ", 1)
    assert size != limit.strip("()"), f"size and limit read the same: {finding.message!r}"


def test_genuine_10_mb_file_mentioning_cuda_is_pc003_with_the_default_limit(tmp_path: Path) -> None:
    filler = b"x = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
    data = b"import torch\n" + filler * (10_000_000 // len(filler)) + b"torch.cuda.synchronize()\n"
    assert len(data) >= 10_000_000
    write(tmp_path / "huge.py", data)
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path)
    [finding] = findings_for(report, "huge.py")
    assert finding.code == "PC003"
    assert "10.0 MB" in finding.message and "2.0 MB" in finding.message
    assert_good_file_scanned(report)


def test_genuine_10_mb_file_without_any_trigger_word_is_silently_skipped(tmp_path: Path) -> None:
    filler = b"x = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
    write(tmp_path / "huge.py", filler * (10_000_000 // len(filler) + 1))
    report = scan(tmp_path)
    assert (report.findings, report.errors, report.internal_errors) == ((), (), ())
    assert (report.files, report.skipped) == (1, 1)


def test_too_large_file_is_only_a_warning_for_the_cli_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "pyproject.toml", "[tool.portcheck]\nmax-file-size = 1000\n")
    write(tmp_path / "generated.py", "import torch\n" + "x = torch.zeros(1).cuda()\n" * 100)
    result = run_cli(tmp_path, monkeypatch, "generated.py")
    assert result.exit_code == 0, result.output
    assert "generated.py:1:1: PC003" in result.output
    assert run_cli(tmp_path, monkeypatch, "generated.py", "--fail-on", "warning").exit_code == 1


# --- deeply nested expressions -----------------------------------------------------------------


def _nested(depth: int, brackets: str) -> str:
    opening, closing = brackets
    return "import torch\nx = " + opening * depth + "torch.cuda.synchronize()" + closing * depth + "\n"


@pytest.mark.parametrize("brackets", ["()", "[]"], ids=["parentheses", "lists"])
def test_5000_nested_brackets_give_a_finding_or_are_skipped_without_crashing_the_run(
    tmp_path: Path, brackets: str
) -> None:
    # In a subprocess: a crash here may be a segmentation fault, which would take pytest down with it.
    write(tmp_path / "deep.py", _nested(5000, brackets))
    write(tmp_path / "good.py", CUDA_SOURCE)
    completed = subprocess.run(
        [sys.executable, "-m", "portcheck", "scan", "deep.py", "good.py", "--format", "json", "--jobs", "1"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [PORTCHECK_ROOT, os.environ.get("PYTHONPATH")]))},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode in (0, 1), (
        f"exit status {completed.returncode} (negative: killed by signal {-completed.returncode})\n"
        f"stderr: {completed.stderr[-3000:]}"
    )
    document = json.loads(completed.stdout)
    assert document["errors"] == []
    deep = [f for f in document["findings"] if f["path"] == "deep.py"]
    assert deep or document["summary"]["skipped_by_prefilter"] == 1
    assert [(f["code"], f["line"]) for f in document["findings"] if f["path"] == "good.py"] == [("PC203", 2)]


def test_500_nested_lists_give_a_finding_or_are_skipped_not_an_internal_error(tmp_path: Path) -> None:
    # Shallow enough for libcst's parser, deep enough for a recursive walk over the tree.
    write(tmp_path / "deep.py", _nested(500, "[]"))
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path)
    assert report.internal_errors == (), report.internal_errors[0][-1500:]
    assert findings_for(report, "deep.py") or report.skipped == 1
    assert_good_file_scanned(report)


# --- symbolic links and missing paths ----------------------------------------------------------


def test_symlink_loop_given_on_the_command_line_is_a_clear_message_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    write(tmp_path / "good.py", CUDA_SOURCE)
    result = run_cli(tmp_path, monkeypatch, "a", "good.py")
    assert result.exit_code == 2, result.output
    [message] = [line for line in result.output.splitlines() if line.startswith("error: a:")]
    assert "symbolic link" in message or "loop" in message
    assert "good.py:2:1: PC203" in result.output  # the other path was still scanned


def test_symlink_loop_given_to_scan_paths_is_reported_in_errors(tmp_path: Path) -> None:
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path, "a.py", "good.py")
    assert len(report.errors) == 1 and report.errors[0].startswith(f"{tmp_path / 'a.py'}:")
    assert_good_file_scanned(report)


def test_symlink_loop_found_while_walking_a_directory_does_not_crash_the_run(tmp_path: Path) -> None:
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path)  # must not raise
    assert_good_file_scanned(report)
    mentioned = " ".join([*report.errors, *(f"{f.path} {f.message}" for f in report.findings)])
    assert "a.py" in mentioned and "b.py" in mentioned  # each loop member is reported, not dropped
    assert report.internal_errors == ()


def test_symlink_loop_found_while_walking_gives_the_cli_a_clean_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").symlink_to("b.py")
    (tmp_path / "pkg" / "b.py").symlink_to("a.py")
    write(tmp_path / "good.py", CUDA_SOURCE)
    result = run_cli(tmp_path, monkeypatch, ".")
    assert result.exit_code in (1, 2), result.output
    assert "good.py:2:1: PC203" in result.output


def test_fix_reports_a_symlink_loop_and_fixes_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = within(30, lambda: fix_paths([tmp_path], Config(root=tmp_path), "tpu"))
    assert isinstance(report, FixReport)
    assert sorted(error.split(":")[0] for error in report.errors) == ["a.py", "b.py"]
    assert all("symbolic links" in error for error in report.errors)
    assert [outcome.path for outcome in report.outcomes if outcome.changed] == ["good.py"]


def test_directory_symlink_to_its_own_parent_is_not_followed(tmp_path: Path) -> None:
    write(tmp_path / "good.py", CUDA_SOURCE)
    write(tmp_path / "sub" / "good.py", CUDA_SOURCE)
    (tmp_path / "sub" / "up").symlink_to("..", target_is_directory=True)
    (tmp_path / "self").symlink_to(".", target_is_directory=True)
    report = within(60, lambda: scan(tmp_path))
    assert isinstance(report, ScanReport)
    assert report.files == 2
    assert [(f.path, f.code) for f in report.findings] == [("good.py", "PC203"), ("sub/good.py", "PC203")]
    assert report.errors == report.internal_errors == ()


def test_dangling_symlink_given_on_the_command_line_is_a_clear_message_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dangling.py").symlink_to("nowhere.py")
    write(tmp_path / "good.py", CUDA_SOURCE)
    result = run_cli(tmp_path, monkeypatch, "dangling.py", "good.py")
    assert result.exit_code == 2, result.output
    [message] = [line for line in result.output.splitlines() if line.startswith("error: dangling.py:")]
    assert "broken symbolic link" in message
    assert "good.py:2:1: PC203" in result.output


def test_dangling_symlink_found_while_walking_is_reported_under_its_own_name(tmp_path: Path) -> None:
    (tmp_path / "dangling.py").symlink_to("nowhere.py")
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path)
    assert_good_file_scanned(report)
    assert report.internal_errors == ()
    reported = [*report.errors, *(f"{f.path}: {f.code} {f.message}" for f in report.findings if f.path != "good.py")]
    assert len(reported) == 1, reported
    assert "dangling.py" in reported[0], f"the user has no file by the name reported: {reported[0]!r}"


def test_symlinked_file_inside_the_tree_gives_no_duplicate_findings_under_one_path(tmp_path: Path) -> None:
    write(tmp_path / "real.py", CUDA_SOURCE)
    (tmp_path / "link.py").symlink_to("real.py")
    report = scan(tmp_path)
    keys = [(f.path, f.line, f.code) for f in report.findings]
    assert len(keys) == len(set(keys)), f"duplicate findings: {keys}"


def test_nonexistent_path_is_a_message_and_exit_2_while_other_paths_are_scanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "good.py", CUDA_SOURCE)
    result = run_cli(tmp_path, monkeypatch, "missing.py", "good.py", "missing_dir")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2, result.output
    assert errors[0].startswith("error: missing.py:") and "does not exist" in errors[0]
    assert errors[1].startswith("error: missing_dir:") and "does not exist" in errors[1]
    assert "good.py:2:1: PC203" in result.output


def test_nonexistent_path_is_reported_in_scan_paths_errors(tmp_path: Path) -> None:
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path, "missing.py", "good.py")
    [error] = report.errors
    assert error.startswith(f"{tmp_path / 'missing.py'}:") and "does not exist" in error
    assert_good_file_scanned(report)


def test_nonexistent_path_alone_still_exits_2_even_with_exit_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_cli(tmp_path, monkeypatch, "missing.py", "--exit-zero")
    assert result.exit_code == 2, result.output


# --- unreadable files --------------------------------------------------------------------------


@pytest.fixture
def locked_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`locked.py` exists but reading it fails as it would without read permission (we run as root)."""
    locked = write(tmp_path / "locked.py", CUDA_SOURCE)
    original = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "locked.py":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    return locked


def test_unreadable_file_is_pc002_cannot_read(tmp_path: Path, locked_file: Path) -> None:
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path)
    [finding] = findings_for(report, "locked.py")
    assert (finding.code, finding.line) == ("PC002", 1)
    assert "cannot read" in finding.message
    assert "Permission denied" in finding.message
    assert_good_file_scanned(report)
    assert report.errors == report.internal_errors == ()


def test_unreadable_file_fails_the_cli_run_with_exit_1(
    tmp_path: Path, locked_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "good.py", CUDA_SOURCE)
    result = run_cli(tmp_path, monkeypatch, ".", "--select", "PC002")
    assert result.exit_code == 1, result.output
    assert "locked.py:1:1: PC002" in result.output and "cannot read" in result.output


# --- a bug in a rule ---------------------------------------------------------------------------


@pytest.fixture
def exploding_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """PC102's visit_Call raises, but only while visiting `boom.py`."""
    original = TensorCudaCall.visit_Call

    def visit_call(self: TensorCudaCall, node: object) -> None:
        if self.ctx.path.endswith("boom.py"):
            raise ZeroDivisionError("simulated bug in PC102")
        original(self, node)

    monkeypatch.setattr(TensorCudaCall, "visit_Call", visit_call)


def test_rule_raising_is_an_internal_error_for_that_file_only(tmp_path: Path, exploding_rule: None) -> None:
    write(tmp_path / "boom.py", "import torch\nx = torch.zeros(1).cuda()\n")
    write(tmp_path / "good.py", CUDA_SOURCE)
    write(tmp_path / "other.py", "import torch\ny = torch.ones(1).cuda()\n")
    report = scan(tmp_path)
    [internal] = report.internal_errors
    assert internal.startswith("boom.py: internal error")
    assert "ZeroDivisionError: simulated bug in PC102" in internal
    assert_good_file_scanned(report)
    assert [(f.code, f.line) for f in findings_for(report, "other.py")] == [
        ("PC102", 2)
    ]  # the rule still works elsewhere


def test_rule_raising_makes_scan_source_raise_runtime_error(exploding_rule: None) -> None:
    with pytest.raises(RuntimeError, match="simulated bug in PC102"):
        scan_source("import torch\nx = torch.zeros(1).cuda()\n", path="boom.py")


def test_rule_raising_exits_2_through_the_cli_and_still_reports_other_files(
    tmp_path: Path, exploding_rule: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "boom.py", "import torch\nx = torch.zeros(1).cuda()\n")
    write(tmp_path / "good.py", CUDA_SOURCE)
    result = run_cli(tmp_path, monkeypatch, ".", "--exit-zero")
    assert result.exit_code == 2, result.output
    assert "error: boom.py: internal error" in result.output
    assert "simulated bug in PC102" in result.output
    assert "good.py:2:1: PC203" in result.output


# --- all of it at once -------------------------------------------------------------------------


def test_a_tree_of_bad_inputs_is_scanned_to_the_end_with_one_finding_per_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "pyproject.toml", "[tool.portcheck]\nmax-file-size = 2000\n")
    write(tmp_path / "syntax.py", "import torch\n\ndef f(:\n    torch.cuda.synchronize()\n")
    write(tmp_path / "py2.py", 'import torch\nprint "x", torch.cuda.device_count()\n')
    write(tmp_path / "binary.py", b"\x00\x01\x02cuda\xff\xfe")
    write(tmp_path / "latin.py", NOT_UTF8)
    write(tmp_path / "cookie.py", LATIN1_WITH_COOKIE)
    write(tmp_path / "bom.py", b"\xef\xbb\xbf" + CUDA_SOURCE.encode())
    write(tmp_path / "crlf.py", CUDA_SOURCE.replace("\n", "\r\n"))
    write(tmp_path / "empty.py", b"")
    write(tmp_path / "comments.py", "# cuda\n")
    write(tmp_path / "big.py", "import torch\n" + "x = torch.zeros(1).cuda()\n" * 200)
    write(tmp_path / "good.py", CUDA_SOURCE)
    result = run_cli(tmp_path, monkeypatch, ".", "--select", "PC0,PC203")
    assert result.exit_code == 1, result.output
    for expected in (
        "syntax.py:3:",  # the column is CPython's
        "py2.py:2:1: PC001",
        "binary.py:1:1: PC002",
        "latin.py:1:1: PC002",
        "cookie.py:4:1: PC203",
        "bom.py:2:1: PC203",
        "crlf.py:2:1: PC203",
        "big.py:1:1: PC003",
        "good.py:2:1: PC203",
    ):
        assert expected in result.output, f"{expected!r} missing from:\n{result.output}"
    assert "empty.py" not in result.output and "comments.py" not in result.output
    assert not [line for line in result.output.splitlines() if line.startswith("error:")]  # no path or internal errors


# --- files that are not regular files ----------------------------------------------------------


@pytest.fixture
def special_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A FIFO, a Unix socket and a character device (a link to /dev/zero, which never ends),
    each named like a source file; reading any of them would hang or never finish."""
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "requirements.txt").symlink_to("pipe.py")
    monkeypatch.chdir(tmp_path)  # a socket path must be short: bind it relative to here
    server = socket.socket(socket.AF_UNIX)
    server.bind("sock.py")
    write(tmp_path / "good.py", CUDA_SOURCE)
    yield tmp_path
    server.close()
    _release_readers(tmp_path / "pipe.py")


def _release_readers(fifo: Path) -> None:
    """Unblock a reader stuck opening the FIFO (code that opened it), so its thread can end."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # nobody is waiting


def test_fifos_sockets_and_devices_are_pc002_without_being_opened(special_files: Path) -> None:
    report = within(30, lambda: scan(special_files))
    assert isinstance(report, ScanReport)
    assert_good_file_scanned(report)
    problems = {f.path: f.message for f in report.findings if f.code == "PC002"}
    assert set(problems) == {"pipe.py", "sock.py", "zero.py", "requirements.txt"}
    assert "named pipe" in problems["pipe.py"] and "named pipe" in problems["requirements.txt"]
    assert "socket" in problems["sock.py"] and "character device" in problems["zero.py"]
    assert all("not opened" in message for message in problems.values())
    assert report.errors == report.internal_errors == ()


def test_fix_skips_fifos_sockets_and_devices_with_a_message(special_files: Path) -> None:
    report = within(30, lambda: fix_paths([special_files], Config(root=special_files), "tpu"))
    assert isinstance(report, FixReport)
    assert sorted(error.split(":")[0] for error in report.errors) == [
        "pipe.py",
        "requirements.txt",
        "sock.py",
        "zero.py",
    ]
    assert all("not a regular file" in error for error in report.errors)
    assert (special_files / "good.py").read_text() == CUDA_SOURCE.replace("cuda.synchronize", "accelerator.synchronize")


# --- pathological files: bounded time and memory -------------------------------------------------


def operator_chain(terms: int) -> str:
    """One statement summing `terms` CUDA calls. libcst's parser is quadratic in such chains:
    3,000 terms (74 kB) took 24 to 36 s of CPU before portcheck gave up with PC001."""
    return "import torch\n\nx = " + " + ".join(f"torch.ones({i}).cuda()" for i in range(terms)) + "\n"


def many_findings(count: int) -> str:
    """`count` findings in 9 bytes each: 130,000 findings took 2.4 min and 3.5 GB."""
    return "import torch\n\nt = torch.ones(1)\n" + "t.cuda()\n" * count


def test_an_operator_chain_over_the_limit_is_pc003_at_its_line_and_the_run_goes_on(tmp_path: Path) -> None:
    write(tmp_path / "chain.py", operator_chain(100))
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path, max_expression_chain=50)
    [finding] = findings_for(report, "chain.py")
    assert (finding.code, finding.line, finding.severity) == ("PC003", 3, Severity.WARNING)
    assert "too long to parse" in finding.message and "chains 99 operations" in finding.message
    assert "max-expression-chain is 50" in finding.message
    assert_good_file_scanned(report)
    assert codes_for(scan(tmp_path), "chain.py") == ["PC102"] * 100, "the default limit takes it"


def test_findings_stop_at_max_findings_per_file_with_one_summary(tmp_path: Path) -> None:
    write(tmp_path / "many.py", many_findings(20))
    write(tmp_path / "good.py", CUDA_SOURCE)
    report = scan(tmp_path, max_findings_per_file=5)
    assert [(f.code, f.line) for f in findings_for(report, "many.py")] == [
        *(("PC102", line) for line in range(4, 9)),
        ("PC006", 9),  # where the sixth would have been
    ]
    [summary] = [f for f in report.findings if f.code == "PC006"]
    assert "after 5 findings" in summary.message and "the rest of the file was not checked" in summary.message
    assert summary.severity == Severity.WARNING
    assert_good_file_scanned(report)


def test_fix_leaves_a_file_over_max_findings_per_file_unchanged_and_says_why(tmp_path: Path) -> None:
    write(tmp_path / "many.py", many_findings(20))
    report = fix_paths([tmp_path], Config(root=tmp_path).with_overrides(max_findings_per_file=5), "tpu")
    [outcome] = report.outcomes
    assert not outcome.changed and not outcome.error
    assert [code for code, _ in outcome.skipped] == ["PC006"]
    assert "PC006" in {f.code for f in outcome.remaining}
    assert (tmp_path / "many.py").read_text() == many_findings(20)


def test_a_chain_of_3000_terms_is_reported_before_libcst_parses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libcst parses a chain in time quadratic in its length (a 3,000-term `+` chain: 24-36 s of
    CPU); the guard must answer from the bytes, without ever handing the file to the parser."""

    def no_parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("libcst was asked to parse the chain")

    write(tmp_path / "chain.py", operator_chain(3000))
    monkeypatch.setattr("portcheck.parsing.cst.parse_module", no_parse)
    report = scan_paths([tmp_path], Config(root=tmp_path), jobs=1)
    assert [f.code for f in report.findings] == ["PC003"] and not report.internal_errors


def test_past_max_findings_per_file_the_analysis_of_the_file_stops(tmp_path: Path) -> None:
    """Findings cost time (0.2 ms each: 2.4 min for 130,000); at the cap the walk stops, so a
    file costs no more than its parse, and says where it stopped."""
    write(tmp_path / "many.py", many_findings(3000))
    report = scan_paths([tmp_path], Config(root=tmp_path), jobs=1)
    assert len(report.findings) == 2001 and report.findings[-1].code == "PC006"
