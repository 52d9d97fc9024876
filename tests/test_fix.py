"""`portcheck fix`: what it writes, what it leaves alone, and how it fails without losing data.

Per-rule rewrites are checked by the rules' own examples (tests/test_rule_examples.py); these
tests cover the guarantees every fix shares: bytes outside fixed spans, encodings, line endings,
suppressions, idempotence, atomic writes, links, owners and modes, files changed on disk, and
the command's exit codes.
"""

from __future__ import annotations

import os
import signal
import stat
import threading
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from portcheck import api
from portcheck import targets as target_data
from portcheck.config import Config
from portcheck.fixer import add_import, fix_source
from portcheck.writeback import write_back

SOURCE = """\
import torch  # the model runs on one accelerator

# keep this comment
x = torch.zeros(3, device="cuda")   # odd spacing stays
y = torch.ones(2,
               device='cuda:1')
"""

FIXED_FOR_TPU = """\
import torch  # the model runs on one accelerator

# keep this comment
x = torch.zeros(3, device="tpu")   # odd spacing stays
y = torch.ones(2,
               device='tpu')
"""


def fix(data: bytes, device: str = "tpu", **kwargs: object) -> bytes:
    outcome = fix_source(data, "example.py", Config(targets=(device,)), target_data.get(device), **kwargs)
    assert not outcome.error, outcome.error
    return outcome.source


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(tmp_path)
    from portcheck.cli import app

    return CliRunner().invoke(app, ["fix", *args])


def test_only_the_fixed_spans_change_and_comments_and_spacing_stay() -> None:
    assert fix(SOURCE.encode()).decode() == FIXED_FOR_TPU


def test_a_second_run_changes_nothing() -> None:
    once = fix(SOURCE.encode())
    assert fix(once) == once


def test_crlf_line_endings_are_kept() -> None:
    fixed = fix(SOURCE.replace("\n", "\r\n").encode())
    assert fixed == FIXED_FOR_TPU.replace("\n", "\r\n").encode()


def test_old_mac_line_endings_are_kept_to_the_last_byte() -> None:
    # libcst's own round trip drops a carriage return that ends the file.
    fixed = fix(SOURCE.replace("\n", "\r").encode())
    assert fixed == FIXED_FOR_TPU.replace("\n", "\r").encode()


def test_utf8_bom_is_kept() -> None:
    fixed = fix(b"\xef\xbb\xbf" + SOURCE.encode())
    assert fixed == b"\xef\xbb\xbf" + FIXED_FOR_TPU.encode()


def test_declared_encoding_is_kept() -> None:
    source = "# -*- coding: latin-1 -*-\nimport torch\nname = 'café'\nx = torch.zeros(1, device='cuda')\n"
    fixed = fix(source.encode("latin-1"))
    assert fixed == source.replace("'cuda'", "'tpu'").encode("latin-1")


def test_suppressed_lines_are_not_touched() -> None:
    source = b'import torch\nx = torch.zeros(1, device="cuda")  # portcheck: ignore[PC101]\ny = torch.zeros(1, device="cuda")\n'
    assert fix(source) == source.replace(b'y = torch.zeros(1, device="cuda")', b'y = torch.zeros(1, device="tpu")')


def test_files_that_do_not_parse_or_decode_are_left_as_they_are() -> None:
    for source in (b"import torch\nx = torch.zeros(1, device='cuda'\n", b"x = 'caf\xe9'\ny = 'cuda'\n"):
        outcome = fix_source(source, "example.py", Config(targets=("tpu",)), target_data.get("tpu"))
        assert outcome.source == source
        assert not outcome.changed


def test_rocm_keeps_the_cuda_spellings() -> None:
    assert fix(SOURCE.encode(), device="rocm") == SOURCE.encode()


def test_add_import_goes_after_the_docstring_and_existing_imports() -> None:
    tree = cst.parse_module('"""Doc."""\nfrom __future__ import annotations\nimport os\n\nx = 1\n')
    assert (
        add_import(tree, "torch").code
        == '"""Doc."""\nfrom __future__ import annotations\nimport os\nimport torch\n\nx = 1\n'
    )
    assert add_import(cst.parse_module("import torch\n"), "torch").code == "import torch\n"


def test_fix_writes_the_file_and_keeps_its_permissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    script.chmod(0o755)
    result = run(tmp_path, monkeypatch, ".", "--device", "tpu")
    assert result.exit_code == 0, result.output
    assert script.read_text() == FIXED_FOR_TPU
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert "Fixed 2 findings in 1 file for tpu (PC101 x2)" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"], "no temporary file is left behind"


def test_diff_prints_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    result = run(tmp_path, monkeypatch, "--device", "neuron", "--diff")
    assert script.read_text() == SOURCE
    assert "--- a/train.py" in result.stdout and '+x = torch.zeros(3, device="neuron")' in result.stdout
    assert "Would fix 2 findings" in result.output


def test_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "train.py").write_text(SOURCE)
    assert run(tmp_path, monkeypatch, "--device", "tpu", "--diff", "--exit-non-zero-on-fix").exit_code == 1
    assert run(tmp_path, monkeypatch, "--device", "tpu", "--exit-non-zero-on-fix").exit_code == 1
    assert run(tmp_path, monkeypatch, "--device", "tpu", "--exit-non-zero-on-fix").exit_code == 0, "nothing left"
    (tmp_path / "loop.py").write_text("import torch\nfor b in data:\n    torch.cuda.synchronize()\n")
    left = run(tmp_path, monkeypatch, "--device", "tpu", "--select", "PC102")
    assert left.exit_code == 0
    assert run(tmp_path, monkeypatch).exit_code == 2, "a target is required"
    assert run(tmp_path, monkeypatch, "--device", "gpu").exit_code == 2


def test_what_is_left_is_listed_with_its_guidance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "check.py").write_text("import torch\nmajor, _ = torch.cuda.get_device_capability()\n")
    result = run(tmp_path, monkeypatch, "--device", "tpu")
    assert result.exit_code == 1
    assert "left for a person" in result.output and "check.py:2:" in result.output and "help:" in result.output


def test_a_file_changed_on_disk_is_not_overwritten(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("edited meanwhile\n")
    assert "changed on disk" in write_back(script, SOURCE.encode(), FIXED_FOR_TPU.encode())
    assert script.read_text() == "edited meanwhile\n"


def test_an_interrupted_write_leaves_the_original_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text(SOURCE)

    def crash(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    problem = write_back(script, SOURCE.encode(), FIXED_FOR_TPU.encode())
    assert "No space left on device" in problem
    assert script.read_text() == SOURCE
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


def test_a_file_that_cannot_be_written_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "a.py").write_text(SOURCE)
    (tmp_path / "b.py").write_text(SOURCE)
    locked.chmod(0o555)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        report = api.fix_paths([tmp_path], Config(root=tmp_path), "tpu")
    finally:
        locked.chmod(0o755)
    errors = {outcome.path: outcome.error for outcome in report.outcomes}
    assert "cannot write" in errors["locked/a.py"]
    assert (tmp_path / "b.py").read_text() == FIXED_FOR_TPU
    assert (locked / "a.py").read_text() == SOURCE


def test_a_symbolic_link_is_written_through_to_its_target_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "src" / "train.py"
    real.parent.mkdir()
    real.write_text(SOURCE)
    (tmp_path / "a_link.py").symlink_to("src/train.py")
    (tmp_path / "b_link.py").symlink_to(real)
    result = run(tmp_path, monkeypatch, ".", "--device", "tpu")
    assert result.exit_code == 0, result.output
    assert real.read_text() == FIXED_FOR_TPU
    assert (tmp_path / "a_link.py").is_symlink() and (tmp_path / "b_link.py").is_symlink()
    assert "Fixed 2 findings in 1 file" in result.output  # one file, under its own name
    assert sorted(p.name for p in real.parent.iterdir()) == ["train.py"], "no temporary file is left behind"


def test_a_link_given_alone_fixes_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text(SOURCE)
    (tmp_path / "link.py").symlink_to("real.py")
    report = api.fix_paths([tmp_path / "link.py"], Config(root=tmp_path), "tpu")
    assert [outcome.path for outcome in report.outcomes if outcome.changed] == ["link.py"]
    assert (tmp_path / "link.py").is_symlink() and real.read_text() == FIXED_FOR_TPU


def test_hard_links_are_kept_and_the_file_is_fixed_once(tmp_path: Path) -> None:
    first = tmp_path / "a.py"
    first.write_text(SOURCE)
    os.link(first, tmp_path / "b.py")
    inode = first.stat().st_ino
    report = api.fix_paths([tmp_path], Config(root=tmp_path), "tpu")
    assert [outcome.path for outcome in report.outcomes] == ["a.py"]
    assert first.stat().st_ino == inode and first.stat().st_nlink == 2
    assert (tmp_path / "b.py").read_text() == FIXED_FOR_TPU
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0, reason="giving a file away needs root")
def test_owner_group_and_mode_are_kept(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    os.chown(script, 4321, 4322)
    script.chmod(0o2750)
    assert write_back(script, SOURCE.encode(), FIXED_FOR_TPU.encode()) == ""
    info = script.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o2750)
    assert script.read_text() == FIXED_FOR_TPU


def test_a_file_whose_owner_cannot_be_given_is_written_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    inode = script.stat().st_ino

    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chown", refuse)
    assert write_back(script, SOURCE.encode(), FIXED_FOR_TPU.encode()) == ""
    assert script.stat().st_ino == inode and script.read_text() == FIXED_FOR_TPU


def test_extended_attributes_are_kept(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    try:
        os.setxattr(script, "user.portcheck.test", b"kept")
    except (AttributeError, OSError):
        pytest.skip("no user extended attributes here")
    assert write_back(script, SOURCE.encode(), FIXED_FOR_TPU.encode()) == ""
    assert os.getxattr(script, "user.portcheck.test") == b"kept"
    assert script.read_text() == FIXED_FOR_TPU


def test_an_attribute_that_cannot_be_copied_keeps_the_file_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    try:
        os.setxattr(script, "user.portcheck.test", b"kept")
    except (AttributeError, OSError):
        pytest.skip("no user extended attributes here")
    inode = script.stat().st_ino

    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")  # as for a security label

    monkeypatch.setattr(os, "setxattr", refuse)
    assert write_back(script, SOURCE.encode(), FIXED_FOR_TPU.encode()) == ""
    assert script.stat().st_ino == inode and os.getxattr(script, "user.portcheck.test") == b"kept"
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


def test_an_interrupt_during_an_in_place_write_waits_for_a_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    first = tmp_path / "a.py"
    first.write_text(SOURCE)
    os.link(first, tmp_path / "b.py")
    write = os.write

    def interrupted_write(handle: int, data: bytes) -> int:
        if threading.current_thread() is not threading.main_thread():
            return write(handle, data)  # pytest-xdist's channel writes from its own thread
        written = write(handle, bytes(data[:10]))
        signal.raise_signal(signal.SIGINT)  # ^C after a tenth of the file
        return written

    monkeypatch.setattr(os, "write", interrupted_write)
    # Python's own ^C handler, whatever this process inherited (a shell's background job ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            write_back(first, SOURCE.encode(), FIXED_FOR_TPU.encode())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (tmp_path / "b.py").read_text() == FIXED_FOR_TPU
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


def test_a_hard_linked_file_changed_on_disk_is_not_overwritten(tmp_path: Path) -> None:
    first = tmp_path / "a.py"
    first.write_text("edited meanwhile\n")
    os.link(first, tmp_path / "b.py")
    assert "changed on disk" in write_back(first, SOURCE.encode(), FIXED_FOR_TPU.encode())
    assert (tmp_path / "b.py").read_text() == "edited meanwhile\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


def test_a_full_disk_leaves_the_original_and_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text(SOURCE)

    def full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert "No space left on device" in write_back(script, SOURCE.encode(), FIXED_FOR_TPU.encode())
    assert script.read_text() == SOURCE
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


ROOT = Path(__file__).resolve().parent.parent
SHIPPED_PROGRAMS = sorted(
    [*ROOT.glob("examples/**/*.py"), *ROOT.glob("tests/fixtures/e2e/*.py")], key=lambda path: str(path)
)


@pytest.mark.parametrize("device", target_data.FIX_TARGETS)
@pytest.mark.parametrize("path", SHIPPED_PROGRAMS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_shipped_program_fixes_to_code_that_parses_and_stays_fixed(path: Path, device: str) -> None:
    config = Config(targets=(target_data.judged_as(device),))
    target = target_data.fix_target(device)
    for unsafe in (False, True):
        outcome = fix_source(path.read_bytes(), path.name, config, target, unsafe=unsafe)
        assert not outcome.error, outcome.error
        cst.parse_module(outcome.source)
        again = fix_source(outcome.source, path.name, config, target, unsafe=unsafe)
        assert again.source == outcome.source and not again.applied


def test_fix_source_from_python_keeps_the_users_alias() -> None:
    outcome = api.fix_source("import torch as T\nT.cuda.synchronize()\n", "tpu")
    assert outcome.source == b"import torch as T\nT.accelerator.synchronize()\n"
    assert [code for code, _ in outcome.applied] == ["PC203"]


def test_each_finding_one_shared_edit_fixes_counts_as_fixed() -> None:
    """`from torch.cuda.amp import autocast, GradScaler` is rewritten with every use in one
    edit: the import and each use are fixed, and the summary counts all of them."""
    source = (
        "import torch\nfrom torch.cuda.amp import GradScaler, autocast\nscaler = GradScaler()\n"
        "with autocast():\n    y = torch.ones(2)\n"
    )
    outcome = api.fix_source(source, "tpu", unsafe=True)
    assert [code for code, _ in outcome.applied].count("PC301") == 3  # the import, GradScaler(), autocast()
    assert "from torch.amp import GradScaler, autocast" in outcome.source.decode()
