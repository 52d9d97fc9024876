"""A CPU-hosted stand-in for an accelerator, for `portcheck smoke --device tpu --emulate`.

CI machines have no TPU or Trainium, yet a port should still run with the target's device
string and meet the target's constraints. Inside `emulate("tpu")` tensors report `tpu:0`,
placement calls and `torch.accelerator` work, and the target's rules, read from
`portcheck.targets`, are enforced or logged; but every op computes on the CPU, so the numbers
are the CPU's: emulated, never measured on hardware.

Design: PrivateUse1 is renamed to the target's device type and registered as a Python backend
(device module, hooks, device guard), so torch itself parses "tpu", moves modules and runs
autograd on that device as for any out-of-tree backend. A tensor on the device is a wrapper
subclass holding a CPU tensor; `__torch_dispatch__` runs each op, forward and backward, on the
CPU tensors and checks the target's constraints there. Allocations that name the device
(`torch.zeros(3, device="tpu")`, `.to("tpu")`) reach the PrivateUse1 kernels registered below;
autocast and the few ops torch implements differently off the CPU get kernels of their own.
A TorchFunctionMode that only maps device strings was not enough: it cannot make a CPU
tensor's `.device` say "tpu", and gradients and optimizer state made by autograd and C++ code
would escape it.

PrivateUse1 can be renamed once per process and the registration cannot be undone, so a
process emulates one target, ever; the smoke runner gives each device its own worker process.
Not covered: regions compiled with torch.compile run on the CPU tensors unchecked, and
`data_ptr()` and storages of device tensors are empty.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch.utils._python_dispatch import return_and_correct_aliasing
from torch.utils._pytree import tree_flatten, tree_map, tree_map_only
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

from portcheck import targets
from portcheck.smoke.cuda_calls import CudaCall, Refusal, patched, watch
from portcheck.targets import Target
from portcheck.targets.api import lookup

aten = torch.ops.aten

# TorchTPU's legacy device calls that raise RuntimeError from user code, each with what to call
# instead (targets.md §0 item 1).
LEGACY_DEVICE_API = {
    "is_available": "torch.accelerator.is_available",
    "device_count": "torch.accelerator.device_count",
    "current_device": "torch.accelerator.current_device_index",
    "set_device": "torch.accelerator.set_device_index",
    "synchronize": "torch.accelerator.synchronize",
    "current_stream": "torch.accelerator.current_stream",
    "set_stream": "torch.accelerator.set_stream",
    "device": "torch.accelerator.device_index",
    "initial_seed": "torch.initial_seed",
    "get_rng_state": "torch.get_rng_state",
}
# Ops that may take a CPU tensor beside device tensors: copies, and the index and length tensors
# CUDA accepts on the CPU.
_CROSS_DEVICE = {
    aten.copy_.default,
    aten._to_copy.default,
    aten.index.Tensor,
    aten.index_put.default,
    aten.index_put_.default,
    aten._index_put_impl_.default,
    aten._pack_padded_sequence.default,
    aten._pad_packed_sequence.default,
    aten._ctc_loss.Tensor,
}
# The advanced-indexing ops among them, (self, indices, ...): CPU indices may index a device
# tensor, but device indices may not index a CPU tensor.
_INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
# Positions of the multiplied operands of float32 matmuls, rounded to bfloat16 at TPU's default precision.
_MATMUL_OPERANDS = {
    aten.mm.default: (0, 1),
    aten.bmm.default: (0, 1),
    aten.mv.default: (0, 1),
    aten.dot.default: (0, 1),
    aten.addmm.default: (1, 2),
    aten.baddbmm.default: (1, 2),
    aten.addbmm.default: (1, 2),
    aten.addmv.default: (1, 2),
    aten.convolution.default: (0, 1),
}
# What device allocations decompose into, plus what torch.tensor runs with the Python dispatch
# key excluded: copy_ for torch.tensor(..., device=), _local_scalar_dense for torch.tensor([t, u])
# of device scalars.
_DEVICE_KERNELS = ("empty.memory_format", "empty_strided", "copy_", "_local_scalar_dense")
# What autocast runs at lower precision on CPU and CUDA alike (TorchTPU's own list is not
# published); other ops run at the precision they are given.
_AUTOCAST_OPS = (
    *("mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "prelu", "scaled_dot_product_attention"),
    *("conv1d", "conv2d", "conv3d", "conv1d.padding", "conv2d.padding", "conv3d.padding"),
    *("conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input"),
)
_AUTOCAST_KEY = torch._C.DispatchKey.AutocastPrivateUse1
# Ops torch implements by device type: off the CPU, SDPA takes its math path and the RNNs fused
# cells the CPU lacks. They run on CPU copies (differentiable), so the numbers are the CPU's.
_CPU_ROUTED = (
    "scaled_dot_product_attention",
    "lstm.input",
    "lstm.data",
    "gru.input",
    "gru.data",
    "lstm_cell",
    "gru_cell",
)

Signature = tuple[tuple[tuple[int, ...], str], ...]


class EmulationError(Refusal):
    """What the real target would have raised. `kind`: data-dependent-shape, float64,
    legacy-device-api, device-mismatch or one-device-per-process (a torch.cuda call is refused
    as cuda-only-api by portcheck.smoke.cuda_calls, whose Refusal this is too)."""


@dataclass(frozen=True)
class EmulationLog:
    """What the stand-in observed; its tables fill while the `emulate` context is open."""

    target: str
    matmul_precision: str
    graphs: dict[str, list[Signature]] = field(default_factory=dict)  # outermost module -> input signatures
    float64_ops: Counter[str] = field(default_factory=Counter)
    data_dependent_ops: Counter[str] = field(default_factory=Counter)
    host_syncs: Counter[str] = field(default_factory=Counter)  # device values read on the host, by what read them
    cuda_calls: Counter[CudaCall] = field(default_factory=Counter)  # torch.cuda calls, also those that pass silently
    autocast: Counter[tuple[str, str, bool]] = field(default_factory=Counter)  # (device type, dtype, enabled) entries

    @property
    def compilations(self) -> int:
        """One per distinct input signature of each outermost module call: what a compiler
        that specialises on shapes and Python numbers builds (`dynamic=False`)."""
        return sum(len(seen) for seen in self.graphs.values())

    @property
    def recompilations(self) -> int:
        return sum(len(seen) - 1 for seen in self.graphs.values())

    def summary(self) -> dict[str, Any]:
        """JSON-ready, for the smoke report."""
        return {
            "target": self.target,
            "emulated": True,
            "note": f"numerics computed on the CPU by a stand-in for {targets.get(self.target).title}; "
            "emulated, not measured on hardware",
            "matmul_precision": self.matmul_precision,
            "compilations": self.compilations,
            "recompilations": self.recompilations,
            "graphs": {
                name: [[[list(shape), dtype] for shape, dtype in sig] for sig in seen]
                for name, seen in self.graphs.items()
            },
            "float64_ops": dict(self.float64_ops),
            "data_dependent_ops": dict(self.data_dependent_ops),
            "host_syncs": dict(self.host_syncs),
            "cuda_calls": [
                call.to_json(self.target, count)
                for call, count in sorted(self.cuda_calls.items(), key=lambda item: (item[0].path, item[0].line))
            ],
            "autocast": [
                {"device_type": device_type, "dtype": dtype, "enabled": enabled, "count": count}
                for (device_type, dtype, enabled), count in sorted(self.autocast.items())
            ],
        }


@contextmanager
def emulate(target: str, *, matmul_precision: Literal["highest", "default"] = "highest") -> Iterator[EmulationLog]:
    """Run the body as if on `target`, on the CPU, and yield what the stand-in observes.

    Raises EmulationError where the target would fail: a data-dependent output shape or a slice
    bound read from device data where dynamic shapes are unsupported (neuron), float64
    where unsupported, torch.cuda calls, legacy `torch.<device>.*` calls where rejected (tpu),
    tensors left on the CPU (also a CPU tensor indexed by device indices), a second device index.
    Elsewhere it logs: compilations per input shape, float64 ops, data-dependent ops (tpu), and
    host syncs (`.item()`, `float(t)`, `.tolist()`, printing), which no target refuses.
    `matmul_precision="default"` rounds float32 matmul operands to bfloat16, as TPU does unless
    asked for "highest"; "highest" keeps the numbers identical to the CPU's. One target per
    process (see the module docstring)."""
    global _SESSION
    if matmul_precision not in ("highest", "default"):
        raise ValueError(f"matmul_precision must be 'highest' or 'default', not {matmul_precision!r}")
    if _SESSION is not None:
        raise RuntimeError("emulate() is already active in this process")
    facts = targets.get(target)
    _install(facts)
    session = _Session(facts, EmulationLog(facts.name, matmul_precision), matmul_precision == "default")
    with ExitStack() as stack:
        stack.enter_context(watch(facts.name, session.log.cuda_calls))
        stack.enter_context(
            patched(
                torch.accelerator,
                synchronize=_check_index,
                set_device_index=_check_index,
                current_device_index=_index,  # torch's guard for a Python backend always says 0
            )
        )
        stack.enter_context(patched(torch.Tensor, pin_memory=_pin_memory))
        loading = _loading(torch.serialization.load)
        stack.enter_context(patched(torch, load=loading))
        stack.enter_context(patched(torch.serialization, load=loading))
        stack.enter_context(patched(torch.amp.autocast_mode.autocast, __enter__=_autocast_entered(session)))
        # Backward runs on this thread, not on an autograd device thread: that one would take the GIL
        # to release device tensors, and abort a process exiting meanwhile.
        stack.enter_context(torch.autograd.set_multithreading_enabled(False))
        for handle in (
            torch.nn.modules.module.register_module_forward_pre_hook(session.enter_module),
            torch.nn.modules.module.register_module_forward_hook(
                session.leave_module, with_kwargs=True, always_call=True
            ),
        ):
            stack.callback(handle.remove)
        _SESSION = session
        try:
            yield session.log
        finally:
            _SESSION = None


class _Hosted(torch.Tensor):
    """A tensor on the emulated device: its metadata says `tpu:0`, its data is the CPU tensor `host`."""

    host: torch.Tensor
    __torch_function__ = torch._C._disabled_torch_function_impl  # outputs stay what dispatch made them

    @staticmethod
    def __new__(cls, host: torch.Tensor) -> _Hosted:
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls,
            host.shape,
            strides=host.stride(),
            storage_offset=host.storage_offset(),
            dtype=host.dtype,
            layout=host.layout,
            device=_DEVICE,
            requires_grad=False,  # autograd tracks the wrapper, above dispatch
            dispatch_sizes_strides_policy="sizes",  # sizes are read from `host`, so out= ops may resize it
        )
        wrapper.host = host
        return wrapper

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Saved as torch saves a tensor of a device without storage: its values on the CPU and its
        # device's name, so a checkpoint holds plain tensors and loads as a real one does (back on
        # the device, or where map_location says), not this class.
        rebuild = torch._utils._rebuild_device_tensor_from_cpu_tensor
        return rebuild, (self.host, self.dtype, str(self.device), self.requires_grad)

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["host"], None

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, torch.Tensor], meta: None, size: Any, stride: Any) -> _Hosted:
        return _Hosted(inner["host"])

    def tolist(self) -> Any:  # refused for subclasses, like printing
        _host_sync("Tensor.tolist")
        return self.host.tolist()

    def __format__(self, spec: str) -> str:
        if self.dim():
            return super().__format__(spec)  # through __repr__
        _host_sync("Tensor.__format__")
        return format(self.host, spec)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        # torch's printer refuses subclasses (.tolist()): format the host tensor's values instead
        _host_sync("Tensor.__repr__")
        contents = tensor_contents or torch._tensor_str._tensor_str(self.host, indent=len("tensor("))
        return "tensor(" + super().__repr__(tensor_contents=contents).removeprefix(f"{type(self).__name__}(")

    def __index__(self) -> int:
        # Python asks for an integer here for a slice bound (x[: n.max()]), range(t), a list
        # index. Only the slice makes a shape: the value is noted, and the slice op that follows
        # at once with it as a bound is the data-dependent one (see _Session.before). int(t),
        # float(t) and t.item() do not come here: they are host syncs, counted at dispatch.
        # (Overriding __getitem__ instead would make device scalars Python sequences, which
        # torch.tensor([t, u]) then fails to read.)
        value = super().__index__()
        if _SESSION is not None:
            _SESSION.values_read.append(value)
        return value

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        return _run(func, args, kwargs or {})


def _run(func: Any, args: tuple, kwargs: dict) -> Any:
    """Run one op on the host tensors; what it returns is on the device unless it asked for another."""
    session = _SESSION
    if session is not None:
        session.before(func, args, kwargs)
    host_args, host_kwargs = tree_map(_to_host, (args, kwargs))
    if session is not None and session.round_matmuls:
        host_args = _rounded(func, host_args)
    out = func(*host_args, **host_kwargs)
    made = _tensors(out)
    if not made:
        return out  # metadata queries (sizes, strides), .item()
    if session is not None:
        session.after(func, _tensors((args, kwargs)), made)
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != _DEVICE.type:
        return out  # .cpu(), .to("cpu")
    return return_and_correct_aliasing(func, args, kwargs, tree_map_only(torch.Tensor, _on_device, out))


def _to_host(value: Any) -> Any:
    if isinstance(value, _Hosted):
        return value.host
    if isinstance(value, torch.device) and value.type == _DEVICE.type:
        _check_index(value)
        return torch.device("cpu")
    return value


def _tensors(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in tree_flatten(value)[0] if isinstance(leaf, torch.Tensor)]


def _on_device(tensor: torch.Tensor) -> _Hosted:
    return tensor if isinstance(tensor, _Hosted) else _Hosted(tensor)


def _rounded(func: Any, args: tuple) -> tuple:
    """The float32 operands of a matmul rounded to bfloat16: one MXU pass, TPU's default precision."""
    positions = _MATMUL_OPERANDS.get(func, ())
    return tuple(
        arg.to(torch.bfloat16).to(torch.float32) if index in positions and arg.dtype == torch.float32 else arg
        for index, arg in enumerate(args)
    )


def _host_sync(name: str) -> None:
    """Count a read of device values on the host that does not pass through dispatch."""
    if _SESSION is not None:
        _SESSION.log.host_syncs[name] += 1


def _data_dependent(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the op's output shape depends on tensor values (torch tags these ops)."""
    if torch.Tag.dynamic_output_shape not in func.tags:
        return False
    if func is aten.index.Tensor:  # only boolean masks select a data-dependent count
        return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in args[1])
    if func is aten.repeat_interleave.Tensor:
        return kwargs.get("output_size") is None
    if func is aten.one_hot.default:
        return (args[1] if len(args) > 1 else kwargs.get("num_classes", -1)) < 0
    return True


class _Session:
    """The open `emulate` context: the target's facts, the log, and the checks the ops pass through."""

    def __init__(self, target: Target, log: EmulationLog, round_matmuls: bool) -> None:
        self.target = target
        self.log = log
        self.round_matmuls = round_matmuls
        self.depth = 0  # nesting of module calls, to find the outermost
        self.values_read: list[int] = []  # device values just read as integers (Tensor.__index__)

    def before(self, func: Any, args: tuple, kwargs: dict) -> None:
        """Refusals that come before the op runs, as in a compiler (and before an in-place op
        writes), and the host syncs: torch tags the ops that read a value back (.item())."""
        if func in _INDEXING:
            self.check_indices(func, args)
        if func is aten.slice.Tensor and any(isinstance(b, int) and b in self.values_read for b in args[2:5]):
            self.bound_read()
        if torch.Tag.data_dependent_output in func.tags:
            self.log.host_syncs[func.name()] += 1
        if _data_dependent(func, args, kwargs):
            self.data_dependent(func)

    def check_indices(self, func: Any, args: tuple) -> None:
        """Device indices into a CPU tensor: torch's index kernels and the targets' reject them."""
        indexed, indices = args[0], args[1]
        if isinstance(indexed, _Hosted) or not any(isinstance(index, _Hosted) for index in indices):
            return
        raise EmulationError(
            "device-mismatch",
            f"{func.name()}: indices should be either on cpu or on the same device as the indexed tensor (cpu), "
            f"but they are on {_DEVICE} and the indexed tensor of shape {tuple(indexed.shape)} is on the CPU "
            f"(emulated {self.target.name}); move the indexed tensor with .to(device), or the indices with .cpu()",
            op=func.name(),
        )

    def data_dependent(self, func: Any) -> None:
        """An op whose output shape depends on the data: refused where shapes must be static, else logged."""
        if self.target.dynamic_shapes == "unsupported":
            raise EmulationError(
                "data-dependent-shape",
                f"{func.name()}: its output shape depends on the data, and {self.target.title} compiles only "
                "static shapes (emulated); pad to a fixed size: torch.nonzero_static, torch.where(mask, x, 0), "
                "repeat_interleave(..., output_size=N)",
                op=func.name(),
                rule="PC502" if func is aten.index.Tensor else "PC501",  # boolean-mask indexing, or another op
            )
        self.log.data_dependent_ops[func.name()] += 1

    def bound_read(self) -> None:
        """A slice bound read from device data (see _Hosted.__index__): the shape that follows
        depends on the data, refused where shapes must be static, else logged."""
        op = "Tensor.__getitem__"
        if self.target.dynamic_shapes == "unsupported":
            raise EmulationError(
                "data-dependent-shape",
                f"slicing at a bound read from the device (x[:n] with n a tensor) makes a data-dependent shape, "
                f"and {self.target.title} compiles only static shapes (emulated); slice to a fixed size and mask "
                "the rest (torch.arange(N) < n), or pad to a few bucket sizes",
                op=op,
                rule="PC505",
            )
        self.log.data_dependent_ops[op] += 1

    def after(self, func: Any, inputs: list[torch.Tensor], made: list[torch.Tensor]) -> None:
        """Checks of an op that made tensors (not of metadata queries): placement, float64."""
        self.values_read.clear()  # a slice at a value read earlier is not bounded by that read
        if func not in _CROSS_DEVICE:
            for tensor in inputs:
                if not isinstance(tensor, _Hosted) and tensor.dim() > 0:  # CPU scalars mix, as on any device
                    raise EmulationError(
                        "device-mismatch",
                        f"{func.name()}: expected all tensors on {_DEVICE}, but one of shape {tuple(tensor.shape)} "
                        f"is on {tensor.device} (emulated {self.target.name}); move it with .to(device)",
                        op=func.name(),
                    )
        if not any(t.dtype == torch.float64 for t in (*inputs, *made)):
            return
        self.log.float64_ops[func.name()] += 1
        if self.target.float64 == "unsupported":
            raise EmulationError(
                "float64",
                f"{func.name()}: {self.target.title} does not support float64 (emulated); use float32",
                op=func.name(),
                rule="PC307",
            )

    def enter_module(self, module: torch.nn.Module, args: tuple) -> None:
        self.depth += 1

    def leave_module(self, module: torch.nn.Module, args: tuple, *rest: Any) -> None:
        """Record the input signature of an outermost call on the device: a compiler that
        specialises on shapes and on the Python numbers given (llama's `forward(tokens,
        start_pos)`) builds one graph per distinct signature. `rest` is (kwargs, output), or
        (output,) when the forward raised."""
        self.depth -= 1
        inputs = _tensors((args, rest[0] if len(rest) == 2 else {}))
        if self.depth or not any(isinstance(t, _Hosted) for t in inputs):
            return
        signature = tuple((tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in inputs)
        kwargs = rest[0] if len(rest) == 2 else {}
        numbers = [value for value in (*args, *kwargs.values()) if type(value) in (int, float, bool)]
        # torch.compile specialises on Python numbers: with dynamic=False each new value is a new graph
        signature += tuple(((), f"{type(value).__name__} {value!r}") for value in numbers)
        seen = self.log.graphs.setdefault(type(module).__qualname__, [])
        if signature not in seen:
            seen.append(signature)


class _DeviceModule:
    """`torch.<device>`: what torch needs from a backend module, and the legacy calls, which
    raise from user code where the target rejects them (TorchTPU)."""

    def __init__(self, target: Target) -> None:
        self._target = target

    def _legacy(self, name: str) -> None:
        caller = sys._getframe(2).f_globals.get("__name__", "")
        if self._target.rejects_legacy_device_api and caller != "torch" and not caller.startswith("torch."):
            found = lookup(f"torch.cuda.{name}")  # the CUDA call a port turned into this one
            raise EmulationError(
                "legacy-device-api",
                f"torch.{self._target.device_type}.{name} is internal to {self._target.package} and can only be "
                f"called by the PyTorch framework (emulated); use {LEGACY_DEVICE_API[name]} instead",
                op=f"torch.{self._target.device_type}.{name}",
                rule=found[1].rule if found else "",
            )

    def is_available(self) -> bool:
        self._legacy("is_available")
        return True

    def device_count(self) -> int:
        self._legacy("device_count")
        return 1 if self._target.one_device_per_process else int(os.environ.get("LOCAL_WORLD_SIZE", "1"))

    def current_device(self) -> int:
        self._legacy("current_device")
        return _index()

    def set_device(self, device: Any) -> None:
        self._legacy("set_device")
        _check_index(device)

    def synchronize(self, device: Any = None) -> None:
        self._legacy("synchronize")
        _check_index(device)

    def current_stream(self, device: Any = None) -> torch.Stream:
        self._legacy("current_stream")
        return torch.accelerator.current_stream()

    def set_stream(self, stream: torch.Stream) -> None:
        self._legacy("set_stream")

    def device(self, device: Any) -> Any:
        self._legacy("device")
        _check_index(device)
        return torch.accelerator.device_index(_index())

    def initial_seed(self) -> int:
        self._legacy("initial_seed")
        return torch.initial_seed()

    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        self._legacy("get_rng_state")
        return torch.get_rng_state()  # ops on the device draw from the CPU generator

    def set_rng_state(self, state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    def is_initialized(self) -> bool:
        return True

    def _is_in_bad_fork(self) -> bool:
        return False

    def manual_seed_all(self, seed: int) -> None:
        """Nothing to seed: ops draw from the CPU generator, which torch.manual_seed seeds."""

    manual_seed = manual_seed_all

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16, torch.float32]


_TARGET: Target | None = None  # what PrivateUse1 stands for in this process, once installed
_DEVICE = torch.device("cpu")  # and the device this process computes on (see _install)
_KERNELS: list[torch.library.Library] = []  # keeps the PrivateUse1 registrations alive
_SESSION: _Session | None = None  # the open emulate() context


def _index() -> int:
    return _DEVICE.index or 0


def _check_index(device: Any = None) -> None:
    """A process computes on one device of the stand-in: index 0 where the target binds one
    device per process (that is also the rule there), else its LOCAL_RANK, as torchrun jobs
    choose theirs."""
    device = torch.device(device) if isinstance(device, str) else device
    index = device.index if isinstance(device, torch.device) else device
    if index is None or index == _index():
        return
    target = _TARGET
    assert target is not None
    if target.one_device_per_process:
        raise EmulationError(
            "one-device-per-process",
            f"device index {index}: {target.title} binds one device per process; "
            "changing the active device within a process is not supported (emulated)",
            op=f"{target.device_type}:{index}",
            rule="PC202",
        )
    raise RuntimeError(
        f"device index {index}: this process of the emulated {target.name} computes on device {_index()} "
        "(its LOCAL_RANK) only"
    )


def _install(target: Target) -> None:
    """Make PrivateUse1 the target's device, once per process."""
    global _TARGET, _DEVICE
    if _TARGET == target:
        return
    current = torch._C._get_privateuse1_backend_name()
    if current != "privateuseone":
        raise RuntimeError(
            f"PrivateUse1 is already {current!r} in this process and can be renamed only once per process; "
            f"emulate {target.name} in a process of its own"
        )
    try:
        torch.device(target.device_type)
    except RuntimeError:
        pass  # not built into torch: free to claim
    else:
        raise ValueError(f"{target.name}: torch has its own {target.device_type!r} device, which cannot be emulated")
    _setup_privateuseone_for_python_backend(rename=target.device_type, backend_module=_DeviceModule(target))
    index = 0 if target.one_device_per_process else int(os.environ.get("LOCAL_RANK", "0"))
    _TARGET, _DEVICE = target, torch.device(target.device_type, index)
    library = torch.library.Library("aten", "IMPL")
    for name in _DEVICE_KERNELS:
        library.impl(name, _kernel(_op(name)), "PrivateUse1")
    for name in _AUTOCAST_OPS:
        library.impl(name, _autocast_kernel(_op(name)), _AUTOCAST_KEY.name)
    for name in _CPU_ROUTED:
        library.impl(name, _cpu_routed_kernel(_op(name)), "AutogradPrivateUse1")
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, _AUTOCAST_KEY.name)
    _KERNELS.extend((library, fallthrough))


def _op(name: str) -> Any:
    packet, _, overload = name.partition(".")
    return getattr(getattr(aten, packet), overload or "default")


def _kernel(func: Any) -> Callable[..., Any]:
    return lambda *args, **kwargs: _run(func, args, kwargs)


def _cpu_routed_kernel(func: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = tree_map_only(_Hosted, torch.Tensor.cpu, (args, kwargs))
        return tree_map_only(torch.Tensor, lambda t: t.to(_DEVICE), func(*args, **kwargs))

    return kernel


def _autocast_kernel(func: Any) -> Callable[..., Any]:
    """Cast floating device tensors (not float64) to the autocast dtype, as autocast does, then run."""

    def cast(tensor: torch.Tensor) -> torch.Tensor:
        eligible = tensor.is_floating_point() and tensor.dtype != torch.float64 and tensor.device == _DEVICE
        return tensor.to(torch.get_autocast_dtype(_DEVICE.type)) if eligible else tensor

    def kernel(*args: Any, **kwargs: Any) -> Any:
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_AUTOCAST_KEY)):
            args, kwargs = tree_map_only(torch.Tensor, cast, (args, kwargs))
            return func(*args, **kwargs)

    return kernel


def _loading(load: Callable[..., Any]) -> Callable[..., Any]:
    """torch.load that restores to the device where `map_location` names it (`"tpu"`,
    `torch.device("tpu")`, or a dict's values): it loads on the CPU, then moves the tensors and
    modules it loaded. Storages of a Python backend cannot be made, and torch's own restore of
    one crashes the process. A dict that maps some locations elsewhere still gets every tensor
    that lands on the CPU moved."""

    def on_device(location: Any) -> bool:
        return isinstance(location, (str, torch.device)) and torch.device(location).type == _DEVICE.type

    def loaded(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(map_location, dict) and any(on_device(value) for value in map_location.values()):
            on_cpu: Any = {key: "cpu" if on_device(value) else value for key, value in map_location.items()}
        elif on_device(map_location):
            on_cpu = "cpu"
        else:
            return load(f, map_location, *args, **kwargs)
        return tree_map(_moved, load(f, on_cpu, *args, **kwargs))

    return loaded


def _moved(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        return value.to(_DEVICE)
    if isinstance(value, torch.nn.Module):
        return value.to(_DEVICE)
    return value


def _pin_memory(tensor: torch.Tensor, device: Any = None) -> torch.Tensor:
    """Tensor.pin_memory: every accelerator pins host memory for itself, and the stand-in's host
    is the CPU, so a pinned copy is a plain one. Python's hooks for PrivateUse1 have no pinned
    allocator, so torch's own raises NotImplementedError."""
    if tensor.device.type != "cpu":
        raise RuntimeError(f"cannot pin '{tensor.device}' memory: only dense CPU tensors can be pinned")
    return tensor.clone()


def _autocast_entered(session: _Session) -> Callable[..., Any]:
    """torch.autocast.__enter__ that counts each entry by (device type, dtype, enabled): whether
    a port's autocast regions run on the device, and at which precision."""
    enter = torch.amp.autocast_mode.autocast.__enter__

    def entered(region: torch.amp.autocast_mode.autocast) -> Any:
        dtype = str(region.fast_dtype).removeprefix("torch.")
        session.log.autocast[(region.device, dtype, bool(region._enabled))] += 1
        return enter(region)

    return entered
