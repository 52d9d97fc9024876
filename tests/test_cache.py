"""The result cache: a warm scan reports exactly what a cold one does without parsing anything;
edits, settings and portcheck's own code invalidate precisely; a broken, foreign or unwritable
cache never fails a run; concurrent runs leave a valid cache. And the progress bar."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from portcheck import api, cache, engine
from portcheck.cli import app
from portcheck.config import Config
from portcheck.project import CUDA_EXTENSION
from portcheck.report import progress
from portcheck.results import FileResult

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Both example projects: CUDA calls, and kernels and extensions (a second pass)."""
    root = tmp_path / "tree"
    for name in ("cuda_app", "kernels_app"):
        shutil.copytree(EXAMPLES / name, root / name)
    return root


def scanned_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record which files are really scanned (not answered from the cache)."""
    seen: list[str] = []
    real = engine.scan_read

    def recording(source, config, project):  # type: ignore[no-untyped-def]
        seen.append(source.path)
        return real(source, config, project)

    monkeypatch.setattr(engine, "scan_read", recording)
    return seen


def scan(root: Path, folder: Path | None, **settings: object) -> api.ScanReport:
    return api.scan_paths([root], Config(root=root, **settings), jobs=1, cache=folder)  # type: ignore[arg-type]


def same_report(left: api.ScanReport, right: api.ScanReport) -> bool:
    return (left.findings, left.facts, left.files, left.skipped) == (
        right.findings,
        right.facts,
        right.files,
        right.skipped,
    )


def test_a_warm_scan_reports_exactly_what_a_cold_one_does_without_scanning(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uncached = scan(tree, None)
    assert any(fact.kind == CUDA_EXTENSION for fact in uncached.facts), "the second pass must be exercised"
    cold = scan(tree, tmp_path / "cache")
    seen = scanned_paths(monkeypatch)
    warm = scan(tree, tmp_path / "cache")
    assert seen == []
    assert same_report(uncached, cold) and same_report(cold, warm)
    assert warm.findings and warm.skipped


def test_a_warm_scan_that_computed_nothing_leaves_the_cache_file_as_it_was(tree: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    scan(tree, folder)
    (stored,) = folder.rglob("*.json")
    before = stored.stat()
    scan(tree, folder)
    after = stored.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


WARM_RUN = """
import sys
from portcheck import cli
sys.argv = ["portcheck", *sys.argv[1:]]
try:
    cli.main()
finally:
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("libcst", "pydantic") or
                    name.startswith(("portcheck.rules", "portcheck.engine", "portcheck.fixer")))
    print("loaded:", loaded, file=sys.stderr)
"""


@pytest.mark.parametrize("output_format", ["text", "sarif"])
def test_a_warm_scan_imports_neither_libcst_nor_the_rules(tree: Path, tmp_path: Path, output_format: str) -> None:
    """The cache answers: start-up is the whole cost of a warm run, and libcst and the rules are
    most of what portcheck would import."""
    arguments = ["scan", str(tree), "--cache-dir", str(tmp_path / "cache"), "--format", output_format, "--exit-zero"]
    runs = [subprocess.run([sys.executable, "-c", WARM_RUN, *arguments], capture_output=True, text=True, cwd=tree)]
    runs.append(subprocess.run([sys.executable, "-c", WARM_RUN, *arguments], capture_output=True, text=True, cwd=tree))
    cold, warm = runs
    assert cold.returncode == warm.returncode == 0, cold.stderr + warm.stderr
    assert "libcst" in cold.stderr.splitlines()[-1]
    assert warm.stderr.splitlines()[-1] == "loaded: []", warm.stderr
    assert cold.stdout == warm.stdout


def test_an_edited_file_alone_is_scanned_again(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scan(tree, tmp_path / "cache")
    edited = tree / "cuda_app" / "utils.py"
    edited.write_text(edited.read_text() + "\nimport torch\ntorch.cuda.synchronize()\n")
    seen = scanned_paths(monkeypatch)
    warm = scan(tree, tmp_path / "cache")
    assert set(seen) == {"cuda_app/utils.py"}  # in each pass
    assert same_report(warm, scan(tree, None))


def test_other_settings_keep_their_own_results(tree: Path, tmp_path: Path) -> None:
    for targets in (("tpu",), ("cpu",), ("tpu",)):
        assert same_report(scan(tree, tmp_path / "cache", targets=targets), scan(tree, None, targets=targets))
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2


def test_results_of_files_outside_a_run_are_kept(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "cache"
    for part in ("cuda_app", "kernels_app"):
        api.scan_paths([tree / part], Config(root=tree), jobs=1, cache=folder)
    seen = scanned_paths(monkeypatch)
    api.scan_paths([tree / "cuda_app"], Config(root=tree), jobs=1, cache=folder)
    api.scan_paths([tree / "kernels_app"], Config(root=tree), jobs=1, cache=folder)
    assert seen == []


def test_an_upgrade_of_portcheck_starts_afresh(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scan(tree, tmp_path / "cache")
    monkeypatch.setattr(cache, "_code_digest", lambda: "another build")
    seen = scanned_paths(monkeypatch)
    scan(tree, tmp_path / "cache")
    assert seen


@pytest.mark.parametrize(
    "content",
    [b"\x00garbage", b'{"format": 1, "entries": {"k": 3}}', b'{"format": 999}', b"[]"],
    ids=["binary", "malformed-entry", "other-format", "not-an-object"],
)
def test_a_corrupt_or_foreign_cache_file_is_ignored_and_replaced(tree: Path, tmp_path: Path, content: bytes) -> None:
    folder = tmp_path / "cache"
    scan(tree, folder)
    (stored,) = folder.rglob("*.json")
    entries = json.loads(stored.read_bytes())["entries"]
    stored.write_bytes(content)
    assert same_report(scan(tree, folder), scan(tree, None))
    assert json.loads(stored.read_bytes())["entries"] == entries


def test_an_entry_that_does_not_decode_is_computed_again(tree: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    scan(tree, folder)
    (stored,) = folder.rglob("*.json")
    document = json.loads(stored.read_bytes())
    document["entries"] = {key: [entry[0], False, [["truncated"]], []] for key, entry in document["entries"].items()}
    stored.write_text(json.dumps(document))
    assert same_report(scan(tree, folder), scan(tree, None))


def test_an_unwritable_cache_folder_does_not_fail_the_scan(tree: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    assert same_report(scan(tree, blocker), scan(tree, None))
    assert blocker.read_text() == "a file where the cache folder should be"


def test_internal_errors_are_never_kept(tmp_path: Path) -> None:
    store = cache.ResultCache(tmp_path / "cache", Config(root=tmp_path))
    store.put("key", FileResult("a.py", internal_error="Traceback ..."))
    store.save(["a.py"])
    assert not (tmp_path / "cache").exists()


def test_concurrent_runs_leave_a_valid_cache(tree: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    command = [sys.executable, "-m", "portcheck", "scan", str(tree), "--format", "json", "--jobs", "1"]
    command += ["--cache-dir", str(folder), "--exit-zero"]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, cwd=tree) for _ in range(4)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert len(set(outputs)) == 1
    (stored,) = folder.rglob("*.json")
    assert json.loads(stored.read_bytes())["entries"]
    assert [path.name for path in stored.parent.iterdir()] == [stored.name]  # no temporary files left


def test_the_command_line_keeps_its_cache_in_the_project_root_marked_for_git(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / "pyproject.toml").write_text("[tool.portcheck]\n")
    monkeypatch.chdir(tree / "cuda_app")
    monkeypatch.delenv("PORTCHECK_CACHE_DIR", raising=False)
    assert CliRunner().invoke(app, ["scan", "--exit-zero"]).exit_code == 0
    folder = tree / cache.FOLDER
    assert (folder / ".gitignore").read_text() == "*\n"
    assert (folder / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert list(folder.rglob("*.json"))


def test_no_cache_writes_nothing_and_the_folder_can_be_moved(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    monkeypatch.delenv("PORTCHECK_CACHE_DIR", raising=False)
    assert CliRunner().invoke(app, ["scan", "--no-cache", "--exit-zero"]).exit_code == 0
    assert not (tree / cache.FOLDER).exists()
    monkeypatch.setenv("PORTCHECK_CACHE_DIR", str(tree.parent / "elsewhere"))
    assert CliRunner().invoke(app, ["scan", "--exit-zero"]).exit_code == 0
    assert not (tree / cache.FOLDER).exists()
    assert list((tree.parent / "elsewhere").rglob("*.json"))


def test_progress_is_reported_for_every_file(tree: Path) -> None:
    calls: list[tuple[int, int]] = []
    report = api.scan_paths([tree], Config(root=tree), jobs=1, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(done, report.files) for done in range(1, report.files + 1)]


def test_the_bar_appears_on_long_runs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=80)
    with progress.FileProgress("Scanning", console) as bar:
        bar(1, 40)
    assert stream.getvalue() == ""
    monkeypatch.setattr(progress, "DELAY_SECONDS", 0.0)
    with progress.FileProgress("Scanning", console) as bar:
        bar(1, 40)
        bar(2, 40)
    assert "Scanning files" in stream.getvalue() and "2/40" in stream.getvalue()


@pytest.mark.parametrize(
    ("output_format", "to_file", "terminal", "shown"),
    [("text", False, True, True), ("json", False, True, False), ("sarif", False, True, False),
     ("text", True, True, False), ("text", False, False, False)],
)  # fmt: skip
def test_the_bar_is_never_drawn_into_reports_or_pipes(
    monkeypatch: pytest.MonkeyPatch, output_format: str, to_file: bool, terminal: bool, shown: bool
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: terminal)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert progress.wanted(output_format, to_file) is shown
