"""One device's worker for a smoke run, in its own process: `python -m portcheck.smoke.worker`.

A backend plugin can crash or hang, and TorchTPU, TorchNeuron and torch_npu share the one
PrivateUse1 slot a process has, so each device runs in a process of its own; importing torch
is most of a small case's time, so that process serves every case of the run in turn. It reads
one Job per line from stdin and answers each with one line of JSON on its original stdout
(what the job's code prints goes to stderr), after a first line that says it is ready. The reference run builds the model, saves its
initial weights and inputs, and traces it; the target's run loads those, so both sides start
from the same numbers, and both reseed before the measured run, so random draws match where
the device draws from the CPU's generator. Tensors go to `<role>.pt` in the job's folder.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from portcheck import targets as target_data
from portcheck.smoke import cuda_calls
from portcheck.smoke.case import SmokeCase, SpecError, as_case, load_factory
from portcheck.smoke.frames import innermost_outside_tooling
from portcheck.smoke.runner import Job

INITIAL = "initial.pt"


def main() -> int:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the user's prints must not break the answers
    answers.write(json.dumps({"ready": True}) + "\n")  # torch is imported: the cases' clocks may start
    answers.flush()
    for line in sys.stdin:
        answers.write(json.dumps(serve(Job(**json.loads(line))), default=str) + "\n")
        answers.flush()
    return 0


def serve(job: Job) -> dict[str, Any]:
    """Run one job; every outcome, the user's errors included, is an answer."""
    status: dict[str, Any] = {"versions": {"torch": torch.__version__}}
    try:
        problem = _backend_problem(job)
        if problem:
            return {**status, "status": "backend-missing", "detail": problem}
        with _restored(), _emulated(job) as log:
            calls: Counter[cuda_calls.CudaCall] = Counter()
            tensors, extra = _run(job, functools.partial(_watching, job, calls))
        if log is not None:
            extra["emulation"] = log.summary()
        if calls:
            extra["cuda_calls"] = [call.to_json(job.target, n) for call, n in sorted(calls.items(), key=_order)]
        torch.save(tensors, Path(job.folder) / f"{job.role}.pt")
        return {**status, "status": "ok", **extra}
    except SpecError as error:
        return {**status, "status": "error", "kind": "spec", "detail": str(error)}
    except Exception as error:  # the user's model or the backend failed: report, do not crash
        kind = getattr(error, "kind", "")
        return {
            **status,
            "status": "rejected" if kind else "error",
            "kind": kind,
            "rule": getattr(error, "rule", ""),
            "detail": str(error) if kind else f"{type(error).__name__}: {error}",  # a refusal speaks for itself
            "where": _user_frame(error),
            "traceback": traceback.format_exc(limit=-6),
        }


@contextmanager
def _restored() -> Iterator[None]:
    """The process-wide settings a case may change, restored after it: the next case of the
    run starts as in a fresh process."""
    dtype, grad, precision = torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_float32_matmul_precision()
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        torch.set_float32_matmul_precision(precision)


def _emulated(job: Job) -> AbstractContextManager[Any]:
    """The emulated target, for the target's run with --emulate; else nothing."""
    if not job.emulate:
        return nullcontext(None)
    from portcheck.smoke import emulate

    precision = "highest" if job.matmul_precision == "highest" else "default"
    return emulate.emulate(job.device.split(":")[0], matmul_precision=precision)


def _watching(job: Job, calls: Counter[cuda_calls.CudaCall]) -> AbstractContextManager[Any]:
    """Where the reference runs the user's code (the factory, the measured run), the CUDA
    calls it makes, which a host without CUDA refuses with a bare error or lets pass silently.
    Tracing is left unwatched: Dynamo would not inline the watch's wrappers."""
    if job.role == "reference" and job.target and not torch.cuda.is_available():
        return cuda_calls.watch(job.target, calls)
    return nullcontext()


def _order(item: tuple[cuda_calls.CudaCall, int]) -> tuple[str, int, str]:
    return item[0].path, item[0].line, item[0].name


def _backend_problem(job: Job) -> str:
    """Why the device cannot be used in this process, or ''."""
    device = job.device.split(":")[0]
    if device == "cpu" or job.emulate:
        return ""
    known = target_data.all_targets().get(device)
    package = known.package if known else ""
    if package:
        try:
            __import__(package)
        except ImportError as error:
            return f"the {device} backend needs {package}, which is not importable here ({error})"
    module = getattr(torch, device, None)
    if module is not None and hasattr(module, "is_available"):
        return "" if module.is_available() else f"torch.{device}.is_available() is False on this machine"
    current = torch.accelerator.current_accelerator(check_available=True)
    if current is None or current.type != device:
        return f"no {device} device is visible to torch on this machine"
    return ""


def _run(job: Job, watching: Callable[[], AbstractContextManager[Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    torch.set_float32_matmul_precision(job.matmul_precision)
    torch.manual_seed(job.seed)
    factory = load_factory(job.spec, Path(job.root))
    with watching():
        case = as_case(factory())
    folder = Path(job.folder)
    extra: dict[str, Any] = {}
    if job.role == "reference":
        state = {name: value.detach().clone() for name, value in case.model.state_dict().items()}
        torch.save({"state": state, "inputs": case.inputs, "alternates": list(case.alternate_inputs)}, folder / INITIAL)
        extra["trace"] = _trace(case, state)
    else:
        initial = torch.load(folder / INITIAL, weights_only=False)
        case.model.load_state_dict(initial["state"])
        case = dataclasses.replace(case, inputs=initial["inputs"], alternate_inputs=initial["alternates"])
    torch.manual_seed(job.seed)  # tracing drew random numbers on the reference: both sides start here
    started = time.perf_counter()
    if job.role == "reference":
        with watching(), _RandomDraws() as draws:
            tensors = _execute(case, job)
        extra["random_draws"] = draws.found()
    else:
        tensors = _execute(case, job)
    extra["seconds"] = round(time.perf_counter() - started, 6)
    extra["device"] = job.device
    return tensors, extra


class _RandomDraws(TorchDispatchMode):
    """The operators of a run that draw random numbers (dropout, randn_like...), each at the
    first line outside torch that ran it: a device with its own generator draws other numbers
    there by design, which a parity failure must say instead of calling it a defect."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: dict[str, tuple[str, int]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func.name() not in self.sites and _draws(func, args, kwargs):
            stack = traceback.extract_stack()
            self.sites[func.name()] = innermost_outside_tooling((f.filename, f.lineno or 0) for f in stack)
        return func(*args, **kwargs)

    def found(self) -> list[dict[str, Any]]:
        return [
            {"kind": "random", "detail": op.removeprefix("aten::"), "path": path, "line": line, "rule": ""}
            for op, (path, line) in sorted(self.sites.items(), key=lambda item: (item[1], item[0]))
        ]


def _draws(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether this call of a seeded operator draws: attention and RNN kernels are seeded for
    their dropout, and draw nothing with a dropout probability of 0 or outside training."""
    if torch.Tag.nondeterministic_seeded not in func.tags:
        return False
    schema = func._schema.arguments
    given = {a.name: a.default_value for a in schema if a.has_default_value()}
    given |= {argument.name: value for argument, value in zip(schema, args)} | kwargs
    if any(given.get(name) == 0 for name in ("p", "dropout_p", "dropout")):
        return False
    return given.get("train", True) is not False


def _trace(case: SmokeCase, state: dict[str, Any]) -> dict[str, Any]:
    """Trace a copy of the model on the CPU: graph breaks and recompilations do not depend on
    the device, and the copy keeps the parity run untouched."""
    import copy

    from portcheck.smoke import trace

    model = copy.deepcopy(case.model)
    model.load_state_dict(state)
    result = trace.trace(model, _positional(case.inputs), [_positional(x) for x in case.alternate_inputs])
    return dataclasses.asdict(result)


def _execute(case: SmokeCase, job: Job) -> dict[str, Any]:
    device = torch.device(job.device)
    model = case.model.to(device)
    inputs = _positional(_map(case.inputs, lambda t: t.to(device)))
    results: dict[str, Any] = {}
    if not job.train:
        with torch.no_grad():
            results["outputs"] = dict(_leaves(model(*inputs), "output"))
            results["buffers"] = _buffers(model)
            _other_shapes(model, case, device)
        return _to_cpu(results)
    optimizer = case.optimizer(model.parameters()) if case.optimizer else torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = case.loss_fn or _sum_of_outputs
    losses = []
    for step in range(job.steps):
        optimizer.zero_grad()
        outputs = model(*inputs)
        loss = loss_fn(outputs, inputs)
        loss.backward()
        if step == 0:
            results["outputs"] = {name: t.detach() for name, t in _leaves(outputs, "output")}
            results["gradients"] = {name: p.grad.detach() for name, p in model.named_parameters() if p.grad is not None}
        losses.append(loss.detach())
        optimizer.step()
    results["losses"] = {f"loss[step {index}]": loss for index, loss in enumerate(losses)}
    results["weights"] = {name: p.detach() for name, p in model.named_parameters()}
    results["buffers"] = _buffers(model)
    with torch.no_grad():
        _other_shapes(model, case, device)
    return _to_cpu(results)


def _buffers(model: Any) -> dict[str, torch.Tensor]:
    """Running statistics (BatchNorm), EMA weights and other state a step updates; copied,
    since the alternate inputs run next and may update them again."""
    return {name: buffer.detach().clone() for name, buffer in model.named_buffers()}


def _other_shapes(model: Any, case: SmokeCase, device: torch.device) -> None:
    """Run the inputs of other shapes too: on the device (or its stand-in) each new shape is a
    compilation, and one that fails only there should fail the smoke test."""
    for alternate in case.alternate_inputs:
        model(*_positional(_map(alternate, lambda t: t.to(device))))


def _sum_of_outputs(outputs: Any, inputs: tuple[Any, ...]) -> Any:
    return sum(t.float().sum() for _, t in _leaves(outputs, "output") if t.is_floating_point())


def _positional(inputs: Any) -> tuple[Any, ...]:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _map(value: Any, function: Callable[[torch.Tensor], Any]) -> Any:
    if isinstance(value, torch.Tensor):
        return function(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map(item, function) for item in value)
    if isinstance(value, dict):
        return {key: _map(item, function) for key, item in value.items()}
    return value


def _leaves(value: Any, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor in a model's output, named by where it sits (`output[0]`, `output['logits']`)."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, dict):  # includes Hugging Face ModelOutput
        for key, item in value.items():
            yield from _leaves(item, f"{path}[{key!r}]")
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield from _leaves(getattr(value, item.name), f"{path}.{item.name}")


def _to_cpu(results: dict[str, Any]) -> dict[str, Any]:
    return {group: {name: t.detach().cpu() for name, t in tensors.items()} for group, tensors in results.items()}


def _user_frame(error: BaseException) -> str:
    """The innermost frame of the traceback outside torch and portcheck, as `file:line`."""
    frames = traceback.extract_tb(error.__traceback__)
    path, line = innermost_outside_tooling((frame.filename, frame.lineno or 0) for frame in frames)
    return f"{path}:{line}" if path else ""


if __name__ == "__main__":
    sys.exit(main())
