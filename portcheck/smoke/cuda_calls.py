"""torch.cuda in a run without CUDA: the smoke reference on the CPU, an emulated target.

Inside `watch(target)` torch.cuda behaves as on a host without CUDA, each call of a `torch.cuda` function or class made from outside torch
is recorded with the rule that reports it in source, and a call that fails for want of a GPU
raises a `Refusal` naming the call, the rule and what to write instead, where torch says only
"Torch not compiled with CUDA enabled". Recording the calls that succeed matters as much:
without CUDA, `torch.cuda.empty_cache()` does nothing, `memory_allocated()` returns 0 and
`torch.cuda.amp.autocast()` turns itself off with a warning, so a run passes while its port is
unfinished. Names bound before the watch opens (`from torch.cuda import empty_cache` at import)
are not seen; the smoke worker loads the user's module inside it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import linecache
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import torch

from portcheck import targets
from portcheck.smoke.frames import is_tooling
from portcheck.targets.api import lookup

_NAMESPACES = ("torch.cuda", "torch.cuda.amp", "torch.cuda.nvtx")
# Placing a tensor on CUDA (`.cuda()`, `device="cuda"`, `.to("cuda")`) reaches torch.cuda's lazy
# initialisation from C++, with the user's frame as the caller: the call is named by its line.
TENSOR_CUDA, CUDA_DEVICE = "Tensor.cuda", 'device "cuda"'
_PLACEMENT_RULES = {TENSOR_CUDA: "PC102", CUDA_DEVICE: "PC101"}
_PLACEMENT_INSTEAD = {TENSOR_CUDA: ".to(device)", CUDA_DEVICE: "the target's device, {device!r}"}
_CALLING: list[str] = []  # the watched calls under way, outermost first


class Refusal(RuntimeError):
    """What the target would have raised, in its words. `kind` says what was refused, `op`
    names the operator or call, and `rule` the static rule that reports it in source ("" if
    none), so a refusal at run time reads like the finding `scan` gives for the same line."""

    def __init__(self, kind: str, detail: str, *, op: str = "", rule: str = "") -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.op = op
        self.rule = rule


@dataclass(frozen=True)
class CudaCall:
    """One place that called torch.cuda (or put a tensor on CUDA), and the rule for it."""

    name: str  # torch.cuda.empty_cache, torch.cuda.amp.autocast, Tensor.cuda, device "cuda"
    path: str
    line: int
    rule: str

    def to_json(self, target: str, count: int) -> dict[str, Any]:
        """A finding as smoke and run reports show it, with what to write instead on `target`."""
        return {
            "kind": "cuda-call",
            "op": self.name,
            "detail": f"{self.name}: without CUDA it {_effect(self.name)}; instead: {instead(self.name, target)}",
            "path": self.path,
            "line": self.line,
            "rule": self.rule,
            "count": count,
        }


def instead(name: str, target: str) -> str:
    """What replaces a CUDA call on `target`."""
    if name in _PLACEMENT_INSTEAD:
        return _PLACEMENT_INSTEAD[name].format(device=targets.get(target).device_type)
    found = lookup(name)
    return found[1].replacement_text(target) if found else "a torch.accelerator call, or drop it"


def _effect(name: str) -> str:
    found = lookup(name)
    return found[1].off_cuda.replace(found[1].name, name) if found else "raises"


@contextmanager
def watch(target: str, calls: Counter[CudaCall] | None = None) -> Iterator[Counter[CudaCall]]:
    """Record torch.cuda calls from outside torch into `calls` (a new Counter by default), and
    refuse those that need a GPU, while open. `target` is the port's target: the refusals name
    its replacements."""
    calls = Counter() if calls is None else calls
    with ExitStack() as stack:
        stack.enter_context(
            patched(
                torch.cuda,
                is_available=_returning(torch.cuda.is_available, False),  # also on a machine with a GPU
                device_count=_returning(torch.cuda.device_count, 0),
                _lazy_init=functools.partial(_absent, target),
            )
        )
        for owner, attribute, name in _watched():
            original = vars(owner)[attribute]
            wrapped = _recording(name, target, calls, getattr(original, "__func__", original))
            stack.enter_context(
                patched(owner, **{attribute: staticmethod(wrapped) if isinstance(original, staticmethod) else wrapped})
            )
        yield calls


def _returning(function: Callable[..., Any], value: object) -> Callable[..., Any]:
    """`function` as on a host without CUDA; it keeps its name and module, so it is watched too."""

    @functools.wraps(function)
    def absent(*args: Any, **kwargs: Any) -> object:
        return value

    return absent


def _watched() -> Iterator[tuple[object, str, str]]:
    """(owner, attribute, qualified name) of each public function and class of torch.cuda: a
    function is replaced in its namespace, a class keeps its identity (isinstance checks) and
    gets its own __init__ or __new__ replaced."""
    seen: set[int] = set()
    for namespace in _NAMESPACES:
        module = importlib.import_module(namespace)
        for attribute, value in vars(module).items():
            if attribute.startswith("_") or id(value) in seen or not _defined_in_torch_cuda(value):
                continue
            seen.add(id(value))
            if inspect.isfunction(value):
                yield module, attribute, f"{namespace}.{attribute}"
            elif type(value) is type and not issubclass(value, BaseException):
                method = next((m for m in ("__init__", "__new__") if m in vars(value)), None)
                if method:
                    yield value, method, f"{namespace}.{attribute}"


def _defined_in_torch_cuda(value: object) -> bool:
    return (getattr(value, "__module__", None) or "").startswith("torch.cuda")


def _recording(name: str, target: str, calls: Counter[CudaCall], function: Callable[..., Any]) -> Callable[..., Any]:
    found = lookup(name)
    rule = found[1].rule if found else ""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1)
        if is_tooling(caller.f_code.co_filename):
            return function(*args, **kwargs)
        calls[CudaCall(name, caller.f_code.co_filename, caller.f_lineno, rule)] += 1
        _CALLING.append(name)
        try:
            return function(*args, **kwargs)
        except Refusal:
            raise
        except Exception as error:  # torch.cuda without CUDA: AssertionError, RuntimeError...
            raise _refusal(name, rule, target, f"{type(error).__name__}: {error}") from error
        finally:
            _CALLING.pop()

    return call


def _absent(target: str, *args: Any, **kwargs: Any) -> NoReturn:
    """Replaces torch.cuda._lazy_init, which every torch.cuda call that needs a GPU goes through."""
    frame = sys._getframe(1)
    name = _CALLING[0] if _CALLING else ""  # the user's call, not what it calls (get_device_properties)
    while not name and frame is not None and frame.f_globals.get("__name__", "").startswith("torch.cuda"):
        name, frame = f"torch.cuda.{frame.f_code.co_name}", frame.f_back  # the outermost torch.cuda call
    if not name:  # from C++: the tensor is being placed on CUDA
        source = linecache.getline(frame.f_code.co_filename, frame.f_lineno) if frame is not None else ""
        name = TENSOR_CUDA if ".cuda(" in source else CUDA_DEVICE
    found = lookup(name)
    rule = _PLACEMENT_RULES.get(name) or (found[1].rule if found else "")
    raise _refusal(name, rule, target, "Torch not compiled with CUDA enabled")


def _refusal(name: str, rule: str, target: str, cause: str) -> Refusal:
    facts = targets.get(target)
    return Refusal(
        "cuda-only-api",
        f"{name}: {cause}; {facts.title} has no CUDA; use {instead(name, target)}",
        op=name,
        rule=rule,
    )


@contextmanager
def patched(owner: object, **values: Any) -> Iterator[None]:
    """`owner`'s attributes set to `values` while the context is open; an attribute it only
    inherited is deleted again afterwards, not copied into it."""
    own = vars(owner)
    saved = {name: own[name] for name in values if name in own}
    for name, value in values.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for name in values:
            if name in saved:
                setattr(owner, name, saved[name])
            else:
                delattr(owner, name)
