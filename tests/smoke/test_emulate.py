"""The CPU-hosted stand-in for tpu and neuron (`portcheck.smoke.emulate`).

PrivateUse1 can be renamed once per process, so each target's cases run in a child process
(emulate_cases/run.py), both children at once; the tests read what they report.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

HERE = Path(__file__).parent
TARGETS = ("tpu", "neuron")


@pytest.fixture(scope="module")
def observed() -> dict[str, Any]:
    children = {
        target: subprocess.Popen(
            [sys.executable, str(HERE / "emulate_cases" / "run.py"), target],
            cwd=HERE.parent.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for target in TARGETS
    }
    results = {}
    for target, child in children.items():
        stdout, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr
        results[target] = json.loads(stdout.splitlines()[-1])
    return results


def test_an_mlp_trains_on_an_emulated_tpu_exactly_as_on_the_cpu(observed: dict[str, Any]) -> None:
    case = observed["tpu"]["mlp"]
    assert case["device_types"] == ["tpu"]  # outputs, loss, gradients and weights all report the device
    assert case["back_on_cpu"] == ["cpu"]
    assert case["identical"] == case["names"]  # forward, backward and SGD step: bit for bit
    assert case["accelerator"] == [True, "tpu"]
    assert case["synchronize"] == {}


def test_emulated_neuron_rejects_data_dependent_shapes(observed: dict[str, Any]) -> None:
    neuron = observed["neuron"]
    assert neuron["nonzero"]["type"] == "EmulationError"
    assert neuron["nonzero"]["kind"] == "data-dependent-shape"
    assert "aten::nonzero" in neuron["nonzero"]["message"]
    assert (neuron["nonzero"]["op"], neuron["nonzero"]["rule"]) == ("aten::nonzero", "PC501")
    assert (neuron["mask"]["op"], neuron["mask"]["rule"]) == ("aten::index.Tensor", "PC502")  # x[x > 0]
    assert neuron["static"] == {}  # nonzero_static has a fixed shape
    assert observed["tpu"]["nonzero"] == {}  # TorchTPU runs it; the log notes it
    assert observed["tpu"]["summary"]["data_dependent_ops"] == {"aten::nonzero": 1}


def test_emulated_tpu_counts_a_compilation_per_input_shape(observed: dict[str, Any]) -> None:
    tpu = observed["tpu"]
    assert tpu["three_shapes"]["recompilations"] == 2
    assert tpu["three_shapes"]["graphs"] == {"Sequential": [[[[n, 4], "float32"]] for n in (2, 3, 5)]}
    assert tpu["one_shape"]["recompilations"] == 0


def test_emulated_tpu_counts_a_compilation_per_python_number_given(observed: dict[str, Any]) -> None:
    """llama's `forward(tokens, start_pos)`: torch.compile(dynamic=False) specialises on the
    integer, so each new position is a graph (on torch 2.13: 12 positions, 12 graphs)."""
    positioned = observed["tpu"]["positions"]
    assert positioned["recompilations"] == 2  # positions 0, 1, 2, then 1 again
    assert positioned["graphs"] == {"Positioned": [[[[1, 1, 4], "float32"], [[], f"int {n}"]] for n in (0, 1, 2)]}


def test_legacy_device_calls_raise_where_the_target_rejects_them(observed: dict[str, Any]) -> None:
    legacy = observed["tpu"]["legacy"]
    assert (legacy["type"], legacy["kind"]) == ("EmulationError", "legacy-device-api")
    assert "torch.accelerator.synchronize" in legacy["message"]
    assert observed["neuron"]["legacy"] == {}


def test_cuda_calls_raise(observed: dict[str, Any]) -> None:
    cuda = observed["tpu"]["cuda"]
    assert (cuda["type"], cuda["kind"]) == ("Refusal", "cuda-only-api")
    assert cuda["message"].startswith("torch.cuda.synchronize: Torch not compiled with CUDA enabled")
    assert (cuda["op"], cuda["rule"]) == ("torch.cuda.synchronize", "PC203")
    legacy = observed["tpu"]["legacy"]
    assert (legacy["op"], legacy["rule"]) == ("torch.tpu.synchronize", "PC203")  # the CUDA call it replaced


def test_float64_is_flagged(observed: dict[str, Any]) -> None:
    summary = observed["tpu"]["summary"]
    assert summary["float64_ops"] == {"aten::_to_copy": 1, "aten::sum": 1}
    assert summary["emulated"] and "not measured on hardware" in summary["note"]


def test_a_process_emulates_one_target(observed: dict[str, Any]) -> None:
    second = observed["neuron"]["second_target"]
    assert second["type"] == "RuntimeError"
    assert "once per process" in second["message"]


def test_pinned_host_memory_moves_to_the_device(observed: dict[str, Any]) -> None:
    assert observed["tpu"]["pinned"] == "tpu:0"  # torch's own pin_memory needs a C++ allocator for PrivateUse1


def test_autocast_entries_are_counted_by_device_type_and_dtype(observed: dict[str, Any]) -> None:
    assert observed["tpu"]["autocast_dtype"] == "torch.bfloat16"
    assert observed["tpu"]["summary"]["autocast"] == [
        {"device_type": "cpu", "dtype": "bfloat16", "enabled": False, "count": 1},
        {"device_type": "tpu", "dtype": "bfloat16", "enabled": True, "count": 1},
    ]


def test_a_slice_bound_read_from_the_device_is_a_data_dependent_shape(observed: dict[str, Any]) -> None:
    neuron = observed["neuron"]["bounds"]
    for case in ("slice", "assign"):  # x[: lengths.max()], x[lengths.min() :] = 0
        refusal = neuron[case]
        assert (refusal["type"], refusal["kind"]) == ("EmulationError", "data-dependent-shape")
        assert (refusal["op"], refusal["rule"]) == ("Tensor.__getitem__", "PC505")
        assert "compiles only static shapes" in refusal["message"]
    assert neuron["range"] == neuron["list_index"] == {}  # a count or a list index is a host read, not a shape
    tpu = observed["tpu"]["bounds"]
    assert tpu["slice"] == tpu["assign"] == {}  # TorchTPU runs them; the log notes them
    assert tpu["summary"]["data_dependent_ops"] == {"Tensor.__getitem__": 2}


def test_a_value_read_on_the_host_is_a_host_sync_not_a_shape(observed: dict[str, Any]) -> None:
    for target in TARGETS:
        bounds, scaled = observed[target]["bounds"], observed[target]["scaled"]
        assert bounds["numbers"] == bounds["printed"] == bounds["tensor_of"] == scaled["error"] == {}
        assert scaled["summary"]["data_dependent_ops"] == {}
        assert scaled["summary"]["host_syncs"] == {"aten::_local_scalar_dense": 3}  # float(x.mean()) per forward
    printed = {"Tensor.tolist": 1, "Tensor.__format__": 1, "Tensor.__repr__": 1}
    # numbers 4, torch.tensor of two, the range and the list index, and the two slice bounds (read
    # before neuron refuses the slice)
    for target in TARGETS:
        assert observed[target]["bounds"]["summary"]["host_syncs"] == {"aten::_local_scalar_dense": 10, **printed}


def test_a_cpu_tensor_indexed_by_device_indices_is_a_device_mismatch(observed: dict[str, Any]) -> None:
    for target in TARGETS:
        indexing = observed[target]["indexing"]
        for case in ("index", "put", "index_put_"):  # table[index], table[index] = v, table.index_put_(...)
            refusal = indexing[case]
            assert (refusal["type"], refusal["kind"]) == ("EmulationError", "device-mismatch")
            assert "indices should be either on cpu or on the same device as the indexed tensor" in refusal["message"]
            assert ".to(device)" in refusal["message"] and ".cpu()" in refusal["message"]
        assert indexing["unchanged"] == [0.0, 1.0, 2.0, 3.0, 4.0]  # refused before the write
        assert indexing["device_table"] == {}  # a device tensor indexed by CPU indices, as on CUDA


def test_a_checkpoint_saved_on_the_device_holds_plain_tensors(observed: dict[str, Any]) -> None:
    """Loaded back as saved, to the CPU or onto the device (the process used to crash on
    `map_location="tpu"`), and outside the emulator, where only `map_location` moves it."""
    seen = observed["tpu"]["checkpoints"]
    values = [0.0, 1.0, 2.0]
    assert seen["as_saved"] == ["tpu:0", values]
    assert seen["to_cpu"] == ["cpu", values]
    assert seen["to_device"] == seen["to_device_object"] == ["tpu:0", values]
    assert seen["cpu_to_device"] == seen["cpu_by_dict"] == ["tpu:0", values]
    saved = base64.b64decode(seen["saved"])
    loaded = torch.load(io.BytesIO(saved), map_location="cpu")  # weights_only: no class of portcheck's
    assert loaded["step"] == 7 and type(loaded["w"]) is torch.Tensor and loaded["w"].tolist() == values
    with pytest.raises(RuntimeError, match="tpu"):
        torch.load(io.BytesIO(saved))  # a TPU checkpoint, on a host without TPU
