"""End to end: realistic CUDA-bound programs fail on CPU torch, and run after `portcheck fix`.

Each program under tests/fixtures/e2e/ is what a CUDA codebase ships; ported/ holds the same
program ported by hand (device-agnostic). After `fix --device cpu` and `fix --device auto`
each must run on the CPU-only torch 2.13 build and print exactly what the hand port prints.
For tpu and neuron, which CI cannot run, the fixed code must re-scan clean of fixable errors
and must not call the `torch.tpu.*` functions TorchTPU rejects.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from portcheck import api
from portcheck.config import Config
from portcheck.findings import FixSafety, Severity

FIXTURES = Path(__file__).parent / "fixtures" / "e2e"
PROGRAMS = {
    "train_amp_ddp.py": "Distributed package doesn't have NCCL built in",
    "infer_checkpoint.py": "Attempting to deserialize object on a CUDA device",
    "device_utils.py": "Torch not compiled with CUDA enabled",
}
# What TorchTPU raises on when user code calls it (targets.md §0): torch.tpu.<these>.
REJECTED_BY_TORCHTPU = re.compile(r"\btorch\.tpu\.(is_available|synchronize|set_device|device_count|current_device)\b")


def _free_port() -> str:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return str(listener.getsockname()[1])


def run_program(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MASTER_PORT": _free_port(), "PYTHONWARNINGS": "ignore"}
    env.pop("RANK", None), env.pop("WORLD_SIZE", None), env.pop("LOCAL_RANK", None)
    return subprocess.run(
        [sys.executable, path.name], cwd=path.parent, capture_output=True, text=True, timeout=180, env=env
    )


@functools.cache
def hand_ported_output(name: str) -> str:
    done = run_program(FIXTURES / "ported" / name)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fixed_copy(tmp_path: Path, name: str, device: str) -> Path:
    copy = tmp_path / name
    shutil.copyfile(FIXTURES / name, copy)
    report = api.fix_paths([copy], Config(root=tmp_path), device)
    assert not report.errors and not any(outcome.error for outcome in report.outcomes)
    assert any(outcome.changed for outcome in report.outcomes)
    again = api.fix_paths([copy], Config(root=tmp_path), device, write=False)
    assert not any(outcome.changed for outcome in again.outcomes), "a second run must change nothing"
    return copy


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_original_fails_on_cpu_torch(name: str) -> None:
    done = run_program(FIXTURES / name)
    assert done.returncode != 0
    assert PROGRAMS[name] in done.stderr


@pytest.mark.parametrize("device", ["cpu", "auto"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_fixed_program_runs_and_matches_the_hand_port(tmp_path: Path, name: str, device: str) -> None:
    fixed = fixed_copy(tmp_path, name, device)
    done = run_program(fixed)
    assert done.returncode == 0, f"{fixed.read_text()}\n{done.stderr}"
    assert done.stdout == hand_ported_output(name)


@pytest.mark.parametrize("device", ["tpu", "neuron"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_fixed_program_is_clean_of_fixable_errors_for_the_target(tmp_path: Path, name: str, device: str) -> None:
    assert fixable_errors_left(fixed_copy(tmp_path, name, device), device) == []


def fixable_errors_left(fixed: Path, device: str) -> list[str]:
    """What a fix for `device` should have fixed and did not (and no call TorchTPU rejects)."""
    assert not REJECTED_BY_TORCHTPU.search(fixed.read_text())
    report = api.scan_paths([fixed], Config(root=fixed.parent, targets=(device,)))
    return [
        f"{f.line}: {f.code} {f.message}"
        for f in report.findings
        if f.severity is Severity.ERROR and f.fix_safety is not FixSafety.NONE
    ]
