"""What a smoke factory returns, and how a SPEC names the factory.

A factory is any callable taking no arguments. It returns `(model, inputs)`, or a `SmokeCase`
(or a dict with the same keys) when it has more to say: a loss for `--train`, an optimizer,
inputs of other shapes for the recompilation check. This module does not import torch, so
user code can build a `SmokeCase` with nothing but the types it already has.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class SmokeCase:
    """A model, its example inputs, and (optionally) how to train it for a few steps.

    `inputs` is one tensor or a tuple of positional arguments. `loss_fn(outputs, inputs)`
    returns a scalar tensor (default for `--train`: the sum of every floating output).
    `optimizer(parameters)` builds the optimizer (default: SGD, lr 0.01).
    `alternate_inputs` are inputs of other shapes: each new shape costs a recompilation on
    targets that compile per shape.
    """

    model: Any
    inputs: Any
    loss_fn: Callable[[Any, tuple[Any, ...]], Any] | None = None
    optimizer: Callable[[Any], Any] | None = None
    alternate_inputs: Sequence[Any] = field(default_factory=tuple)


class SpecError(ValueError):
    """A SPEC that names nothing callable, or a factory that returns something unusable."""


def as_case(made: object) -> SmokeCase:
    """Accept what a factory returns: a SmokeCase, a dict of its fields, or (model, inputs)."""
    if isinstance(made, SmokeCase):
        return made
    if isinstance(made, dict):
        unknown = set(made) - {f.name for f in fields(SmokeCase)}
        if unknown:
            raise SpecError(f"the factory's dict has unknown keys: {', '.join(sorted(unknown))}")
        try:
            return SmokeCase(**made)
        except TypeError as error:
            raise SpecError(f"the factory's dict is incomplete: {error}") from None
    if isinstance(made, tuple) and len(made) == 2:
        return SmokeCase(model=made[0], inputs=made[1])
    raise SpecError(f"a factory must return (model, inputs), a dict or a SmokeCase, not {type(made).__name__}")


def check_spec(spec: str, root: Path) -> tuple[str, str]:
    """(where the factory is, its name) for `path/to/file.py:factory` or
    `package.module:factory`; SpecError for what can be told wrong without running anything."""
    location, _, name = spec.rpartition(":")
    if not location or not name.isidentifier():
        raise SpecError(f"{spec!r}: expected FILE.py:FACTORY or MODULE:FACTORY")
    if location.endswith(".py"):
        if not (root / location).is_file():
            raise SpecError(f"{spec!r}: no such file {(root / location).resolve()}")
    elif not all(part.isidentifier() for part in location.split(".")):
        raise SpecError(f"{spec!r}: {location!r} is neither a .py file nor a module name")
    return location, name


def load_factory(spec: str, root: Path) -> Callable[[], object]:
    """`path/to/file.py:factory` or `package.module:factory`, relative to `root`."""
    location, name = check_spec(spec, root)
    _importable(root)
    if location.endswith(".py"):
        path = (root / location).resolve()
        _importable(path.parent)
        loader_spec = importlib.util.spec_from_file_location(path.stem, path)
        assert loader_spec is not None and loader_spec.loader is not None
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[path.stem] = module
        loader_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(location)
        except ImportError as error:
            raise SpecError(f"{spec!r}: cannot import {location}: {error}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise SpecError(f"{spec!r}: {location} has no callable {name!r}")
    return factory


def _importable(folder: Path) -> None:
    """Put `folder` first on sys.path, once: a worker loads many cases."""
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
