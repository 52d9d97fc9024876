"""Run smoke cases on the reference and the target, each device in its own process, and judge them.

Nothing here touches a device: the workers do (portcheck.smoke.worker). This process starts
one worker per device for the whole run (torch's start-up is most of a small case's time),
hands it the cases one by one with a timeout each, compares the tensors on the CPU, and turns
trace findings into blocking ones where the matching static rule is an error on the target.
A worker that crashes or hangs costs its case only: the next case gets a new process.
"""

from __future__ import annotations

import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from portcheck import registry
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.smoke.case import SpecError, check_spec
from portcheck.smoke.launch import EMULATED_TARGETS
from portcheck.targets.api import lookup

_STARTUP_TIMEOUT = 600.0  # seconds for a worker to import torch and its backend
FAILED_RUN = ("error", "backend-missing", "timeout", "crashed")


@dataclass(frozen=True)
class Job:
    """What this process asks of a worker for one case (sent to it as a line of JSON)."""

    spec: str
    root: str
    device: str
    role: str  # "reference" or "target"
    folder: str  # the case's own folder: initial weights and inputs, tensors
    target: str = ""  # the port's target ("tpu"), whose replacements CUDA findings name; "" for none
    train: bool = False
    steps: int = 1
    seed: int = 0
    emulate: bool = False
    matmul_precision: str = "highest"


@dataclass(frozen=True)
class Settings:
    """What every case of one run shares."""

    device: str
    reference: str = "cpu"
    train: bool = False
    steps: int = 1
    rtol: float | None = None
    atol: float | None = None
    emulate: bool = False
    matmul_precision: str = "highest"
    timeout: float = 300.0


@dataclass(frozen=True)
class DeviceRun:
    """How one worker's run of a case ended."""

    device: str
    role: str
    status: str  # ok | error | rejected | backend-missing | timeout | crashed
    detail: str = ""
    where: str = ""  # the user's file:line for an error, when known
    seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    emulation: dict[str, Any] | None = None
    rule: str = ""  # the static rule for a refusal ("rejected"), when there is one


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
    observed: tuple[dict[str, Any], ...]  # what the reference run did: CUDA calls, random draws
    notes: tuple[str, ...]  # what the reader needs to weigh the checks
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


def run_smoke(specs: Sequence[str], settings: Settings, root: Path | None = None) -> list[SmokeResult]:
    """Each case built once on the reference, its weights copied to the target, both run and
    compared. Every reference run comes first, so a factory that returns something unusable
    stops the run (SpecError) before the target runs anything."""
    root = (root or Path.cwd()).resolve()
    kind = settings.device.split(":")[0]
    target = next((t.name for t in target_data.all_targets().values() if t.device_type == kind != "cuda"), "")
    with tempfile.TemporaryDirectory(prefix="portcheck-smoke-") as folder, ExitStack() as stack:
        reference = stack.enter_context(_Worker.running(Path(folder), "reference", False, root))
        candidate = stack.enter_context(_Worker.running(Path(folder), "target", not settings.emulate, root))
        candidate.start()  # its torch imports while the reference works
        common = {"root": str(root), "target": target, "train": settings.train, "steps": settings.steps}
        common["matmul_precision"] = settings.matmul_precision
        jobs = []
        for index, spec in enumerate(specs):
            case_folder = Path(folder) / f"case-{index}"
            case_folder.mkdir()
            jobs.append(Job(spec, device=settings.reference, role="reference", folder=str(case_folder), **common))
        answers = [reference.ask(job, settings.timeout) for job in jobs]
        for job, answer in zip(jobs, answers):
            if answer.get("kind") == "spec":
                raise SpecError(f"{job.spec}: {answer['detail']}")
        results = []
        for job, answer in zip(jobs, answers):
            ref_run = _device_run(job, answer)
            target_run = None
            if ref_run.status == "ok":
                target_job = replace(job, device=settings.device, role="target", emulate=settings.emulate)
                target_run = _device_run(target_job, candidate.ask(target_job, settings.timeout))
            results.append(_judge(job, settings, target, answer, ref_run, target_run))
    return results


def _device_run(job: Job, answer: dict[str, Any]) -> DeviceRun:
    return DeviceRun(
        job.device,
        job.role,
        answer["status"],
        answer.get("detail", ""),
        answer.get("where", ""),
        answer.get("seconds", 0.0),
        answer.get("versions", {}),
        answer.get("emulation"),
        answer.get("rule", ""),
    )


def _judge(
    job: Job,
    settings: Settings,
    target: str,
    answer: dict[str, Any],
    ref_run: DeviceRun,
    target_run: DeviceRun | None,
) -> SmokeResult:
    runs = (ref_run,) if target_run is None else (ref_run, target_run)
    checks: list[Any] = []
    if target_run is not None and target_run.status == "ok":
        checks = _compare(Path(job.folder), settings.rtol, settings.atol, settings.matmul_precision != "highest")
    trace = answer.get("trace")
    observed = tuple(answer.get("cuda_calls", ())) + tuple(answer.get("random_draws", ()))
    blocking = _blocking(settings.device, target, runs, trace, observed)
    if any(run.status in FAILED_RUN for run in runs):
        verdict = "error"
    elif blocking:
        verdict = "blocked"
    elif not all(check.passed for check in checks):
        verdict = "mismatch"
    else:
        verdict = "pass"
    return SmokeResult(
        job.spec,
        settings.device,
        settings.reference,
        settings.emulate,
        settings.train,
        settings.steps,
        settings.matmul_precision,
        runs,
        tuple(checks),
        trace,
        observed,
        _notes(settings, observed, verdict),
        tuple(blocking),
        verdict,
    )


def _notes(settings: Settings, observed: tuple[dict[str, Any], ...], verdict: str) -> tuple[str, ...]:
    """Random draws explain a mismatch on a device with a generator of its own; the CPU and the
    emulated targets (which draw from the CPU's) start from the same state and draw the same."""
    draws = [finding for finding in observed if finding["kind"] == "random"]
    own_generator = not settings.emulate and settings.device.split(":")[0] != settings.reference.split(":")[0]
    if not draws or not own_generator or verdict != "mismatch":
        return ()
    sites = ", ".join(f"{d['detail']} at {d['path']}:{d['line']}" if d["path"] else d["detail"] for d in draws)
    return (
        f"the model draws random numbers ({sites}); {settings.device} draws them from its own generator, so its "
        "results differ from the reference's by design: compare with the model in eval() mode, or without the "
        "random operators",
    )


class _Worker:
    """One device's worker process, serving the run's cases in turn; a new process replaces
    one that crashed or hung."""

    def __init__(self, folder: Path, name: str, autoload: bool, root: Path) -> None:
        self.log = folder / f"{name}.stderr"  # a file: a pipe nobody reads would block the worker
        self.autoload = autoload
        self.root = root
        self.process: subprocess.Popen[str] | None = None
        self.answers: queue.Queue[str | None] = queue.Queue()
        self.ready = False  # the process said it imported torch (and the backend)

    @classmethod
    @contextmanager
    def running(cls, folder: Path, name: str, autoload: bool, root: Path) -> Iterator[_Worker]:
        worker = cls(folder, name, autoload, root)
        try:
            yield worker
        finally:
            worker.stop()

    def start(self) -> subprocess.Popen[str]:
        if self.process is None:
            env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1" if self.autoload else "0"}
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "portcheck.smoke.worker"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                    env=env,
                    cwd=self.root,
                )
            self.answers = queue.Queue()
            self.ready = False
            threading.Thread(target=_forward, args=(self.process.stdout, self.answers), daemon=True).start()
        return self.process

    def ask(self, job: Job, timeout: float) -> dict[str, Any]:
        """The worker's answer to one job; a hang or a crash is an answer too. `timeout` counts
        from the job's start: importing torch and a backend on a busy host is not the case's."""
        process = self.start()
        assert process.stdin is not None
        written = self.log.stat().st_size
        if not self.ready:
            try:
                said = self.answers.get(timeout=_STARTUP_TIMEOUT)
            except queue.Empty:
                self.stop()
                return {
                    "status": "timeout",
                    "detail": f"not started after {_STARTUP_TIMEOUT:g} s; the process was killed",
                }
            if said is None:
                return self._ended(process, written)
            self.ready = True
        try:
            process.stdin.write(json.dumps(asdict(job)) + "\n")
            process.stdin.flush()
            answer = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            return {"status": "timeout", "detail": f"no result after {timeout:g} s; the process was killed"}
        except BrokenPipeError:
            answer = None
        return self._ended(process, written) if answer is None else json.loads(answer)

    def _ended(self, process: subprocess.Popen[str], written: int) -> dict[str, Any]:
        """The answer of a process that ended without one."""
        code = process.wait()
        self.process = None
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return {"status": "crashed", "detail": f"the process ended without a result ({how}): {self._tail(written)}"}

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    stream.close()
            self.process = None

    def _tail(self, offset: int) -> str:
        """The last lines the process wrote to stderr since `offset`."""
        with self.log.open("rb") as log:
            log.seek(offset)
            text = log.read().decode("utf-8", "replace")
        return "\n".join(text.strip().splitlines()[-5:])


def _forward(stream: IO[str], answers: queue.Queue[str | None]) -> None:
    """Each line the worker answers, then None when its output ends (it exited or died)."""
    for line in stream:
        answers.put(line)
    answers.put(None)


def _compare(folder: Path, rtol: float | None, atol: float | None, reduced: bool) -> list[Any]:
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # this process never loads a backend
    import torch

    from portcheck.smoke.compare import compare

    reference = torch.load(folder / "reference.pt", weights_only=True)
    candidate = torch.load(folder / "target.pt", weights_only=True)
    return compare(reference, candidate, rtol, atol, reduced)


def _blocking(
    device: str,
    target: str,
    runs: tuple[DeviceRun, ...],
    trace: dict[str, Any] | None,
    observed: tuple[dict[str, Any], ...],
) -> list[str]:
    """What would stop the model on the target: a refusal (the emulated target's, or a CUDA
    call the reference refused), and findings whose static rule is an error there."""
    reasons = []
    for run in runs:
        if run.status == "rejected":
            rule = f"{run.rule} " if run.rule else ""
            where = f" at {run.where}" if run.where else ""
            reasons.append(f"{rule}{device} would reject the model{where}: {run.detail}")
    findings = (*(trace or {}).get("findings", ()), *observed)
    for finding in findings:
        if target and _severity(finding, target) is Severity.ERROR:
            where = f"{finding['path']}:{finding['line']}" if finding.get("path") else "unknown location"
            reasons.append(f"{finding['rule']} {finding['kind']} at {where}: {finding['detail']}")
    return reasons


def _severity(finding: dict[str, Any], target: str) -> Severity:
    """A CUDA call's own severity on the target (the table knows it per call), else its rule's."""
    found = lookup(finding["op"]) if finding.get("op") else None
    if found is not None:
        return found[1].severity_on(target)
    return registry.get(finding["rule"]).severity.get(target, Severity.OFF) if finding.get("rule") else Severity.OFF
