"""Per-target facts, kept as versioned TOML data beside this module.

Rules and fixes read these facts instead of branching on target names, so adding a target or
correcting a fact is a data change. Each file carries `schema` (the shape of the file, checked
here) and `data-version` (when its facts were last verified against sources).
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCHEMA = 1
TARGET_ORDER = ("tpu", "neuron", "xla", "mps", "xpu", "npu", "hpu", "rocm", "cpu")
DEFAULT_TARGETS = tuple(t for t in TARGET_ORDER if t != "rocm")


@dataclass(frozen=True, slots=True)
class Target:
    """What portcheck knows about one accelerator target."""

    name: str
    title: str
    data_version: str
    device_type: str  # the string torch uses as device type ("cuda" on ROCm)
    package: str  # the backend plugin, empty when built into torch
    torch_versions: str  # PEP 440 specifier of the torch releases the plugin supports; "" if unconstrained
    python_versions: str  # PEP 440 specifier of the Python releases the plugin installs on; "" if unconstrained
    numpy_versions: str  # PEP 440 specifier of the NumPy releases the plugin requires; "" if unconstrained
    one_device_per_process: bool
    keeps_cuda_api: bool  # ROCm: torch.cuda and "cuda" are the right spellings
    accelerator_api: bool  # torch.accelerator.* works (raises on a host with none)
    runs_without_accelerator: bool  # fixed code must also run on a host with no accelerator
    rejects_legacy_device_api: bool  # TorchTPU raises on torch.<dev>.synchronize() & co.
    distributed_backend: str
    distributed_init_method: str
    # what the parent process calls before it starts distributed workers (`torch.multiprocessing.spawn`,
    # torchrun's elastic_launch); "" where nothing is needed
    launch_setup: str
    # What `torch.get_device_module(device)` refuses from user code (RuntimeError), and the
    # functions it lacks (AttributeError): empty where nothing is known to differ from torch.cuda
    device_module_raises: tuple[str, ...]
    device_module_missing: tuple[str, ...]
    # The `torch.nn.attention.SDPBackend` members scaled_dot_product_attention runs there; empty
    # where not known
    sdpa_backends: tuple[str, ...]
    # What nn.SyncBatchNorm does in distributed training there: runs | unverified (the device
    # passes its check, but no source says the backend has its kernels) | raises (ValueError)
    sync_batchnorm: str
    # What sparse tensors (to_sparse(), torch.sparse_coo_tensor, torch.sparse.mm...) do there:
    # runs | unverified (no source says the backend has sparse kernels) | raises
    sparse_tensors: str
    autocast_default_dtype: str  # what torch.autocast(dev) picks without dtype= (torch 2.13)
    amp_dtype: str  # the dtype autocast should use there
    needs_grad_scaler: bool
    # What Hugging Face Accelerate, and so the Trainer, does with fp16 mixed precision there:
    # raises (ValueError, the device is not among those it allows) | ignored (no autocast, no
    # scaler: float32) | runs
    fp16_mixed_precision: str
    lightning_accelerator: str  # Lightning's accelerator name for this device; "" where Lightning has none
    float64: str  # native | slow | unsupported
    cuda_graphs: str  # what replaces CUDA graph capture
    compile_backend: str  # empty: torch.compile's default is right
    compile_rejects_inductor: bool  # an explicit backend="inductor" raises or is unsupported
    compile_picks_backend: bool  # torch.compile(m) without a backend selects the target's own
    compile_modes: tuple[str, ...]
    compile_dynamic: str  # torch.compile(dynamic=True): raises | rejected | experimental | accepted
    bounded_dynamism: str  # how to bound a varying dim instead of padding; empty if none
    dynamic_shapes: str  # free | recompile | unsupported
    triton: bool
    kernel_languages: tuple[str, ...]
    visibility_env: str
    notes: tuple[str, ...]

    @property
    def bf16_native(self) -> bool:
        return self.amp_dtype == "bfloat16" and not self.needs_grad_scaler


def api_table(file: str) -> dict[str, dict[str, Any]]:
    """The `[api."<qualified name>"]` tables of one of this package's data files, its schema
    checked."""
    raw = tomllib.loads(resources.files(__package__).joinpath(file).read_text(encoding="utf-8"))
    if raw.get("schema") != SCHEMA:
        raise ValueError(f"targets/{file}: expected schema = {SCHEMA}")
    return dict(raw["api"])


def _load(name: str) -> Target:
    text = resources.files(__package__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    if raw.pop("schema", None) != SCHEMA:
        raise ValueError(f"targets/{name}.toml: expected schema = {SCHEMA}")
    values = {key.replace("-", "_"): value for key, value in raw.items()}
    expected = {f.name for f in fields(Target)}
    if set(values) != expected:
        missing, extra = expected - set(values), set(values) - expected
        raise ValueError(f"targets/{name}.toml: missing {sorted(missing)}, unknown {sorted(extra)}")
    for key, value in values.items():
        if isinstance(value, list):
            values[key] = tuple(value)
    return Target(**values)


@cache
def all_targets() -> dict[str, Target]:
    """Every known target, in the order reports list them."""
    return {name: _load(name) for name in TARGET_ORDER}


def get(name: str) -> Target:
    try:
        return all_targets()[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r} (expected one of: {', '.join(TARGET_ORDER)})") from None


AUTO = "auto"
FIX_TARGETS = (*(t for t in TARGET_ORDER if t != "rocm"), AUTO)


@cache
def fix_target(name: str) -> Target:
    """A target `fix` writes for: any scan target but rocm, or `auto` (device-agnostic code)."""
    if name not in FIX_TARGETS:
        raise ValueError(f"unknown fix target {name!r} (expected one of: {', '.join(FIX_TARGETS)})")
    return _load(AUTO) if name == AUTO else get(name)


def judged_as(name: str) -> str:
    """The scan target whose findings a fix for `name` must clear: itself, or for `auto` the
    CPU, the one host every device-agnostic program must also run on."""
    return "cpu" if name == AUTO else get(name).name


@cache
def data_fingerprint() -> str:
    """A hash of every data file, so caches and reports can say which facts they used."""
    digest = hashlib.sha256()
    for entry in sorted(resources.files(__package__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            digest.update(entry.name.encode() + b"\0" + entry.read_bytes())
    return digest.hexdigest()[:16]
