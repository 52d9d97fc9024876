"""`portcheck run --emulate TARGET PROGRAM ARGS`: a whole program on an emulated device.

The program runs in child processes (portcheck.smoke.program), never here: PrivateUse1 can be
renamed once per process, the device must be emulated before the program's first import, and
a program that crashes or calls os._exit must not take the report with it. With `nproc` > 1
this process is a small torchrun --standalone: it starts one child per rank with the
environment torchrun sets, lets their output through, and stops them all when one fails.
This module never imports torch.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from portcheck import targets as target_data

# The targets the emulator stands in for: PrivateUse1 can only be a device type torch does not
# build in, and these two are the ones its tests cover.
EMULATED_TARGETS = ("tpu", "neuron")
GRACE_S = 10.0  # how long the other ranks get to stop after one failed, before they are killed


class UsageError(ValueError):
    """A mistake on the command line, reported before any process starts (exit code 2)."""


@dataclass(frozen=True)
class Program:
    """What the launcher asks of one child (passed to it as JSON)."""

    target: str
    name: str  # the script's path, or with `module` the module's dotted name
    args: tuple[str, ...]
    module: bool = False
    report: str = ""  # where the child writes its outcome (JSON)


@dataclass(frozen=True)
class ProcessRun:
    """How one process of the program ended."""

    rank: int
    exit_code: int
    error: dict[str, str] | None  # the refusal or exception that ended it: kind, op, where, rule, detail
    emulation: dict[str, Any] | None  # what the emulator observed; None when the process left no report


@dataclass(frozen=True)
class RunResult:
    target: str
    command: tuple[str, ...]  # the program and its arguments, as given
    module: bool
    nproc: int
    exit_code: int
    processes: tuple[ProcessRun, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_program(target: str, name: str, args: list[str], *, module: bool = False, nproc: int = 1) -> RunResult:
    """Run the program in `nproc` children on the emulated `target`; raises UsageError before
    starting any when the command cannot work."""
    _check(target, name, module, nproc)
    command = (name, *args)
    with tempfile.TemporaryDirectory(prefix="portcheck-run-") as folder:
        reports = [Path(folder) / f"rank{rank}.json" for rank in range(nproc)]
        children = _start(Program(target, name, tuple(args), module), reports)
        exit_code = _wait(children)
        processes = tuple(_outcome(rank, child, report) for rank, (child, report) in enumerate(zip(children, reports)))
    return RunResult(target, command, module, nproc, exit_code, processes)


def _check(target: str, name: str, module: bool, nproc: int) -> None:
    if target not in target_data.all_targets():
        raise UsageError(f"unknown target {target!r}; --emulate takes one of: {', '.join(EMULATED_TARGETS)}")
    if target not in EMULATED_TARGETS:
        raise UsageError(f"{target} cannot be emulated; --emulate takes one of: {', '.join(EMULATED_TARGETS)}")
    if nproc < 1:
        raise UsageError(f"--nproc must be at least 1, not {nproc}")
    if not name:
        raise UsageError("name the program: portcheck run --emulate TARGET SCRIPT.py [ARGS] (or -m MODULE [ARGS])")
    if not module and not Path(name).is_file():
        raise UsageError(f"can't open file {name!r}: no such file")


def _start(program: Program, reports: list[Path]) -> list[subprocess.Popen[bytes]]:
    """One child per rank; with more than one, each gets what torchrun --standalone sets
    (and one intra-op thread unless OMP_NUM_THREADS says otherwise, as torchrun does)."""
    # The emulator claims PrivateUse1: a backend plugin that autoloads would take it first.
    base = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    if len(reports) > 1:
        base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=_free_port(), WORLD_SIZE=str(len(reports)))
        base.update(
            LOCAL_WORLD_SIZE=str(len(reports)), GROUP_RANK="0", OMP_NUM_THREADS=base.get("OMP_NUM_THREADS", "1")
        )
    children = []
    for rank, report in enumerate(reports):
        env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank)} if len(reports) > 1 else base
        job = json.dumps(asdict(Program(program.target, program.name, program.args, program.module, str(report))))
        children.append(subprocess.Popen([sys.executable, "-m", "portcheck.smoke.program", job], env=env))
    return children


def _free_port() -> str:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return str(listener.getsockname()[1])


def _wait(children: list[subprocess.Popen[bytes]]) -> int:
    """Wait for every child; when one fails, stop the others. The exit code is the first
    failure's (a signal N as 128 + N, like a shell), else 0: the ranks stopped after it only
    echo it."""
    failed: int | None = None
    try:
        while [child for child in children if child.poll() is None]:  # polls every child, unlike any()
            if failed is None:
                failed = next((child.returncode for child in children if child.returncode not in (None, 0)), None)
                if failed is not None:
                    _stop([child for child in children if child.poll() is None])
            time.sleep(0.05)
    finally:
        _stop([child for child in children if child.poll() is None], grace=0.0)  # interrupted: leave nothing
    if failed is None:
        failed = next((child.returncode for child in children if child.returncode != 0), 0)
    return 128 - failed if failed < 0 else failed


def _stop(children: list[subprocess.Popen[bytes]], grace: float = GRACE_S) -> None:
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _outcome(rank: int, child: subprocess.Popen[bytes], report: Path) -> ProcessRun:
    try:
        written = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # killed, crashed, or it ended the process itself (os._exit)
        written = {}
    return ProcessRun(rank, child.returncode, written.get("error"), written.get("emulation"))
