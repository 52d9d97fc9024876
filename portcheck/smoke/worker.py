"""One device's side of a smoke run, in its own process: `python -m portcheck.smoke.worker JOB`.

A backend plugin can crash or hang, and TorchTPU, TorchNeuron and torch_npu share the one
PrivateUse1 slot a process has, so every device runs here, alone. The reference run builds the
model, saves its initial weights and inputs, and traces it; every other run loads those, so
both sides start from the same numbers. Results go to files in the job's folder: tensors to
`<role>.pt`, everything else to `<role>.json`; the parent reads them after the process ends.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from portcheck import targets as target_data
from portcheck.smoke.case import SmokeCase, SpecError, as_case, load_factory
from portcheck.smoke.runner import Job

INITIAL = "initial.pt"


def main(argv: list[str]) -> int:
    job = Job(**json.loads(argv[0]))
    folder = Path(job.folder)
    status: dict[str, Any] = {"versions": {"torch": torch.__version__}}
    try:
        problem = _backend_problem(job)
        if problem:
            status.update(status="backend-missing", detail=problem)
            return _finish(folder, job, status, 3)
        context = _emulation(job) if job.emulate else nullcontext(None)
        with context as log:
            tensors, extra = _run(job)
        if log is not None:
            extra["emulation"] = log.summary()
        torch.save(tensors, folder / f"{job.role}.pt")
        status.update(status="ok", **extra)
        return _finish(folder, job, status, 0)
    except SpecError as error:
        status.update(status="error", detail=str(error))
    except Exception as error:  # the user's model or the backend failed: report, do not crash
        kind = getattr(error, "kind", "")
        status.update(
            status="rejected" if kind else "error",
            kind=kind,
            detail=f"{type(error).__name__}: {error}",
            where=_user_frame(error),
            traceback=traceback.format_exc(limit=-6),
        )
    return _finish(folder, job, status, 1)


def _finish(folder: Path, job: Job, status: dict[str, Any], code: int) -> int:
    (folder / f"{job.role}.json").write_text(json.dumps(status, default=str), encoding="utf-8")
    return code


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


def _emulation(job: Job):
    from portcheck.smoke import emulate

    precision = "highest" if job.matmul_precision == "highest" else "default"
    return emulate.emulate(job.device.split(":")[0], matmul_precision=precision)


def _run(job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
    torch.set_float32_matmul_precision(job.matmul_precision)
    torch.manual_seed(job.seed)
    factory = load_factory(job.spec, Path(job.root))
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
    started = time.perf_counter()
    tensors = _execute(case, job)
    extra["seconds"] = round(time.perf_counter() - started, 6)
    extra["device"] = job.device
    return tensors, extra


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
    with torch.no_grad():
        _other_shapes(model, case, device)
    results["weights"] = {name: p.detach() for name, p in model.named_parameters()}
    return _to_cpu(results)


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
    """The innermost frame of the traceback that is the user's code, as `file:line`."""
    where = ""
    for frame in traceback.extract_tb(error.__traceback__):
        if "/torch/" not in frame.filename and "/portcheck/" not in frame.filename:
            where = f"{frame.filename}:{frame.lineno}"
    return where


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
