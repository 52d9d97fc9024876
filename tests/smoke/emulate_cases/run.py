"""The cases of tests/smoke/test_emulate.py for one target: `python run.py tpu|neuron`.

PrivateUse1 can be renamed once per process, so each target runs in a process of its own.
Prints what the cases observed as one JSON object.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from portcheck.smoke.emulate import emulate


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))


def train_step(device: str) -> dict[str, torch.Tensor]:
    """Forward, backward and one SGD step; every tensor that comes out of it, by name."""
    model = mlp().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    inputs = torch.linspace(-1, 1, 20).reshape(5, 4).to(device)
    output = model(inputs)
    loss = output.square().mean()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        after = model(inputs)
    grads = {f"grad {name}": p.grad for name, p in model.named_parameters()}
    weights = {f"weight {name}": p.detach() for name, p in model.state_dict().items()}
    return {"output": output.detach(), "loss": loss.detach(), "after": after, **grads, **weights}


class Positives(nn.Module):
    """Keeps the positive entries: an output whose size depends on the data."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[torch.nonzero(x > 0)[:, 0]]


class PaddedPositives(nn.Module):
    """The same with a static shape: indices padded to a fixed count."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[torch.nonzero_static(x > 0, size=x.numel(), fill_value=0)[:, 0]]


class MeanScale(nn.Module):
    """Scales by its input's mean, read back as a Python float: a host sync (PC503), not a shape."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(x.mean())
        return x * scale


def raised(call: Callable[[], Any]) -> dict[str, str]:
    try:
        call()
    except Exception as error:
        found = {"type": type(error).__name__, "kind": getattr(error, "kind", ""), "message": str(error)}
        return {**found, "op": getattr(error, "op", ""), "rule": getattr(error, "rule", "")}
    return {}


def recompilations(batch_sizes: list[int]) -> dict[str, Any]:
    with emulate("tpu") as log:
        model = mlp().to("tpu")
        for size in batch_sizes:
            model(torch.ones(size, 4, device="tpu"))
    return {"recompilations": log.recompilations, "graphs": log.summary()["graphs"]}


class Positioned(torch.nn.Module):
    """llama's attention in small: written and read at the integer position the caller passes."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 8, 4))

    def forward(self, x: torch.Tensor, start_pos: int) -> torch.Tensor:
        self.cache[:, start_pos : start_pos + 1] = x
        return self.cache.sum()


def positions(starts: list[int]) -> dict[str, Any]:
    """A forward given a Python integer: a compiler with dynamic=False specialises on it."""
    with emulate("tpu") as log:
        model = Positioned().to("tpu")
        for start in starts:
            model(torch.ones(1, 1, 4, device="tpu"), start)
    return {"recompilations": log.recompilations, "graphs": log.summary()["graphs"]}


def scaled(target: str) -> dict[str, Any]:
    """Three forwards of MeanScale: three host syncs, no data-dependent op."""
    with emulate(target) as log:
        model, x = MeanScale().to(target), torch.arange(4.0).to(target)
        error = raised(lambda: [model(x) for _ in range(3)])
    return {"error": error, "summary": log.summary()}


def bounds(target: str) -> dict[str, Any]:
    """Device values read on the host: as the bound of a device tensor's slice (a data-dependent
    shape), and as numbers, counts and list indices (host syncs)."""
    with emulate(target) as log:
        x, lengths = torch.arange(6.0).to(target), torch.tensor([2, 4]).to(target)

        def assign() -> None:
            x[lengths.min() :] = 0.0

        result = {
            "slice": raised(lambda: x[: lengths.max()]),
            "assign": raised(assign),
            "range": raised(lambda: range(lengths.max())),
            "list_index": raised(lambda: ["a", "b", "c"][lengths.min()]),
            "numbers": raised(lambda: (float(x.mean()), int(lengths.max()), lengths.max().item(), bool(lengths.min()))),
            "printed": raised(lambda: (lengths.tolist(), f"{x.mean():.2f}", str(x))),
            "tensor_of": raised(lambda: torch.tensor([lengths.max(), lengths.min()])),  # elements, not bounds
        }
    return {**result, "summary": log.summary()}


def indexing(target: str) -> dict[str, Any]:
    """A CPU tensor indexed by device indices (refused, and left as it was), and the reverse (fine)."""
    with emulate(target):
        table, index = torch.arange(5.0), torch.tensor([0, 2]).to(target)

        def put() -> None:
            table[index] = torch.ones(2)

        return {
            "index": raised(lambda: table[index]),
            "put": raised(put),
            "index_put_": raised(lambda: table.index_put_((index,), torch.ones(2), accumulate=True)),
            "unchanged": table.tolist(),
            "device_table": raised(lambda: table.to(target)[index.cpu()]),
        }


def checkpoints(target: str) -> dict[str, Any]:
    """A state dict saved from the device and loaded back as saved, to the CPU and onto the
    device, and a CPU checkpoint loaded onto the device (what a fixed `map_location="cuda"`
    becomes); the saved bytes, for a process without the emulator to load."""
    with emulate(target):
        buffer, cpu_buffer = io.BytesIO(), io.BytesIO()
        torch.save({"w": torch.arange(3.0).to(target), "step": 7}, buffer)
        torch.save({"w": torch.arange(3.0)}, cpu_buffer)

        def loaded(data: bytes, map_location: Any) -> list[Any]:
            tensor = torch.load(io.BytesIO(data), map_location=map_location)["w"]
            return [str(tensor.device), tensor.cpu().tolist()]

        return {
            "as_saved": loaded(buffer.getvalue(), None),
            "to_cpu": loaded(buffer.getvalue(), "cpu"),
            "to_device": loaded(buffer.getvalue(), target),
            "to_device_object": loaded(buffer.getvalue(), torch.device(target)),
            "cpu_to_device": loaded(cpu_buffer.getvalue(), target),
            "cpu_by_dict": loaded(cpu_buffer.getvalue(), {"cpu": target}),
            "saved": base64.b64encode(buffer.getvalue()).decode(),
        }


def tpu() -> dict[str, Any]:
    with emulate("tpu") as log:
        reference, emulated = train_step("cpu"), train_step("tpu")
        mlp_case = {
            "device_types": sorted({tensor.device.type for tensor in emulated.values()}),
            "back_on_cpu": sorted({tensor.cpu().device.type for tensor in emulated.values()}),
            "identical": [name for name in reference if torch.equal(reference[name], emulated[name].cpu())],
            "names": list(reference),
            "accelerator": [torch.accelerator.is_available(), str(torch.accelerator.current_accelerator())],
            "synchronize": raised(torch.accelerator.synchronize),
        }
        legacy = raised(torch.tpu.synchronize)
        cuda = raised(torch.cuda.synchronize)
        nonzero = raised(lambda: Positives().to("tpu")(torch.tensor([1.0, -1.0, 2.0], device="tpu")))
        torch.ones(2, device="tpu").double().sum()
        pinned = torch.ones(2).pin_memory().to("tpu", non_blocking=True)
        with torch.autocast("tpu", dtype=torch.bfloat16):
            autocast_dtype = str((pinned[None] @ pinned[:, None]).dtype)
        with torch.autocast("cpu", enabled=False):
            pass
    return {
        "pinned": str(pinned.device),
        "autocast_dtype": autocast_dtype,
        "mlp": mlp_case,
        "legacy": legacy,
        "cuda": cuda,
        "nonzero": nonzero,
        "summary": log.summary(),
        "three_shapes": recompilations([2, 3, 5]),
        "one_shape": recompilations([3, 3, 3]),
        "positions": positions([0, 1, 2, 1]),
        "scaled": scaled("tpu"),
        "bounds": bounds("tpu"),
        "indexing": indexing("tpu"),
        "checkpoints": checkpoints("tpu"),
    }


def neuron() -> dict[str, Any]:
    with emulate("neuron") as log:
        x = torch.tensor([1.0, -1.0, 2.0]).to("neuron")
        result = {
            "nonzero": raised(lambda: Positives().to("neuron")(x)),
            "mask": raised(lambda: x[x > 0]),
            "static": raised(lambda: PaddedPositives().to("neuron")(x)),
            "legacy": raised(torch.neuron.synchronize),  # TorchNeuron keeps its device module working
        }
    return {
        **result,
        "summary": log.summary(),
        "scaled": scaled("neuron"),
        "bounds": bounds("neuron"),
        "indexing": indexing("neuron"),
        "second_target": raised(lambda: emulate("tpu").__enter__()),
    }


if __name__ == "__main__":
    print(json.dumps({"tpu": tpu, "neuron": neuron}[sys.argv[1]]()))
