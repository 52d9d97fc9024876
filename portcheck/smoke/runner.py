"""Run a smoke case on the reference and the target, each in its own process, and judge it.

Nothing here touches a device: the workers do (portcheck.smoke.worker). This process only
starts them with a timeout, reads what they wrote, compares the tensors on the CPU, and turns
trace findings into blocking ones where the matching static rule is an error on the target.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from portcheck import registry
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.smoke.case import check_spec
from portcheck.smoke.launch import EMULATED_TARGETS

FAILED_RUN = ("error", "backend-missing", "timeout", "crashed")


@dataclass(frozen=True)
class Job:
    """What this process asks of one worker (passed to it as JSON)."""

    spec: str
    root: str
    device: str
    role: str  # "reference" or "target"
    folder: str
    train: bool = False
    steps: int = 1
    seed: int = 0
    emulate: bool = False
    matmul_precision: str = "highest"


@dataclass(frozen=True)
class DeviceRun:
    """How one worker ended."""

    device: str
    role: str
    status: str  # ok | error | rejected | backend-missing | timeout | crashed
    detail: str = ""
    where: str = ""  # the user's file:line for an error, when known
    seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    emulation: dict[str, Any] | None = None


@dataclass(frozen=True)
class SmokeResult:
    spec: str
    device: str
    reference: str
    emulated: bool
    train: bool
    steps: int
    matmul_precision: str
    runs: tuple[DeviceRun, ...]
    checks: tuple[Any, ...]  # compare.TensorCheck
    trace: dict[str, Any] | None
    blocking: tuple[str, ...]  # why the verdict is "blocked"
    verdict: str  # pass | mismatch | blocked | error

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "mismatch": 1, "blocked": 1}.get(self.verdict, 2)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values; an error that could not be measured (a missing tensor) is null."""
        return _finite(asdict(self))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


# Device types torch builds in, besides the targets' own.
_BUILT_IN_DEVICES = frozenset({"cpu", "cuda", "mps", "xpu", "hpu", "xla", "meta", "mtia", "privateuseone"})


def check_usage(spec: str, device: str, *, emulate: bool, timeout: float, root: Path) -> None:
    """Raise ValueError for a case that cannot run, before any worker starts (workers take
    seconds to import torch, and their errors would read like the device's)."""
    check_spec(spec, root)
    if not timeout > 0:
        raise ValueError(f"--timeout must be a positive number of seconds, not {timeout:g}")
    kind, _, index = device.partition(":")
    known = _BUILT_IN_DEVICES | {target.device_type for target in target_data.all_targets().values()}
    if kind not in known:
        raise ValueError(f"unknown device {device!r}; devices: {', '.join(sorted(known))}")
    if index and not index.isdigit():
        raise ValueError(f"{device!r}: a device index is a number")
    facts = {target.device_type: target for target in target_data.all_targets().values()}.get(kind)
    if index and facts is not None and facts.one_device_per_process:
        raise ValueError(f"{device!r}: a {facts.title} process has one device; name it {kind!r}")
    if emulate and kind not in EMULATED_TARGETS:
        raise ValueError(f"--emulate stands in for {' and '.join(EMULATED_TARGETS)}, not {kind!r}")


def run_smoke(
    spec: str,
    device: str,
    *,
    reference: str = "cpu",
    train: bool = False,
    steps: int = 1,
    rtol: float | None = None,
    atol: float | None = None,
    emulate: bool = False,
    matmul_precision: str = "highest",
    timeout: float = 300.0,
    root: Path | None = None,
) -> SmokeResult:
    """Build once on the reference, copy the weights to the target, run both, compare."""
    root = (root or Path.cwd()).resolve()
    with tempfile.TemporaryDirectory(prefix="portcheck-smoke-") as folder:
        common = {"spec": spec, "root": str(root), "folder": folder, "train": train, "steps": steps}
        common["matmul_precision"] = matmul_precision
        ref_job = Job(device=reference, role="reference", **common)
        ref_run = _start(ref_job, timeout, autoload=False)
        runs = [ref_run]
        target_run = None
        if ref_run.status == "ok":
            target_run = _start(Job(device=device, role="target", emulate=emulate, **common), timeout, not emulate)
            runs.append(target_run)
        trace = _read_json(Path(folder) / "reference.json").get("trace")
        checks: list[Any] = []
        if target_run is not None and target_run.status == "ok":
            checks = _compare(Path(folder), rtol, atol, reduced=matmul_precision != "highest")
    blocking = _blocking(device, trace, target_run)
    if any(run.status in FAILED_RUN for run in runs):
        verdict = "error"
    elif blocking:
        verdict = "blocked"
    elif not all(check.passed for check in checks):
        verdict = "mismatch"
    else:
        verdict = "pass"
    return SmokeResult(
        spec,
        device,
        reference,
        emulate,
        train,
        steps,
        matmul_precision,
        tuple(runs),
        tuple(checks),
        trace,
        tuple(blocking),
        verdict,
    )


def _start(job: Job, timeout: float, autoload: bool) -> DeviceRun:
    """Run one worker; a hang, a crash or a missing backend is a result, not an exception."""
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1" if autoload else "0"}
    command = [sys.executable, "-m", "portcheck.smoke.worker", json.dumps(asdict(job))]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=job.root)
    except subprocess.TimeoutExpired:
        return DeviceRun(job.device, job.role, "timeout", f"no result after {timeout:g} s; the process was killed")
    status = _read_json(Path(job.folder) / f"{job.role}.json")
    if not status:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        how = f"killed by signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
        return DeviceRun(job.device, job.role, "crashed", f"the process ended without a result ({how}): {tail}")
    return DeviceRun(
        job.device,
        job.role,
        status["status"],
        status.get("detail", ""),
        status.get("where", ""),
        status.get("seconds", 0.0),
        status.get("versions", {}),
        status.get("emulation"),
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _compare(folder: Path, rtol: float | None, atol: float | None, reduced: bool) -> list[Any]:
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # this process never loads a backend
    import torch

    from portcheck.smoke.compare import compare

    reference = torch.load(folder / "reference.pt", weights_only=True)
    candidate = torch.load(folder / "target.pt", weights_only=True)
    return compare(reference, candidate, rtol, atol, reduced)


def _blocking(device: str, trace: dict[str, Any] | None, target_run: DeviceRun | None) -> list[str]:
    """What would stop the model on the target: the emulated target's refusals, and trace
    findings whose static rule is an error there."""
    reasons = []
    if target_run is not None and target_run.status == "rejected":
        reasons.append(f"{device} rejected the model: {target_run.detail}")
    name = device.split(":")[0]
    if trace and name in target_data.all_targets():
        for finding in trace.get("findings", ()):
            code = finding.get("rule", "")
            if code and registry.get(code).severity.get(name) is Severity.ERROR:
                where = f"{finding['path']}:{finding['line']}" if finding.get("path") else "unknown location"
                reasons.append(f"{code} {finding['kind']} at {where}: {finding['detail']}")
    return reasons
