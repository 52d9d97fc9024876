"""Qualified-name resolution: imports and aliases resolve, locals and shadows do not."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from portcheck.resolve import Resolver
from portcheck.walk import Walker, is_reference


class _CallProbe:
    """Records what the function of every call resolves to, in source order."""

    watched_names = ()

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.calls: list[tuple[str, frozenset[str]]] = []

    def visit_Call(self, node: cst.Call) -> None:
        code = cst.Module(body=[]).code_for_node(node.func)
        self.calls.append((code, self.resolver.qualified_names(node.func)))


def calls(source: str) -> dict[str, frozenset[str]]:
    module = cst.parse_module(textwrap.dedent(source))
    resolver = Resolver(module)
    probe = _CallProbe(resolver)
    Walker([probe], resolver).walk(module)
    return dict(probe.calls)


@pytest.mark.parametrize(
    ("source", "call", "expected"),
    [
        ("import torch\ntorch.cuda.synchronize()\n", "torch.cuda.synchronize", {"torch.cuda.synchronize"}),
        ("import torch as T\nT.cuda.synchronize()\n", "T.cuda.synchronize", {"torch.cuda.synchronize"}),
        ("from torch import cuda\ncuda.synchronize()\n", "cuda.synchronize", {"torch.cuda.synchronize"}),
        ("from torch.cuda import synchronize as sync\nsync()\n", "sync", {"torch.cuda.synchronize"}),
        ("import torch.cuda\ntorch.cuda.synchronize()\n", "torch.cuda.synchronize", {"torch.cuda.synchronize"}),
        ("import torch.cuda as tc\ntc.synchronize()\n", "tc.synchronize", {"torch.cuda.synchronize"}),
        ("torch.cuda.synchronize()\n", "torch.cuda.synchronize", set()),  # never imported
        ("from . import torch\ntorch.cuda.synchronize()\n", "torch.cuda.synchronize", {".torch.cuda.synchronize"}),
        ("from .models import net\nnet.cuda()\n", "net.cuda", {".models.net.cuda"}),
        ("import torch\ntorch.randn(3).cuda()\n", "torch.randn(3).cuda", set()),  # a call in the chain
        ("import torch\ntorch.cuda.current_stream().synchronize()\n", "torch.cuda.current_stream().synchronize", set()),
        ("from torch.cuda import *\nsynchronize()\n", "synchronize", set()),
        # the SSD tutorial's detect.py: `torch` can only come from the repository's own module
        ("from utils import *\ntorch.cuda.is_available()\n", "torch.cuda.is_available", {"torch.cuda.is_available"}),
        ("from torch.nn import *\ntorch.cuda.is_available()\n", "torch.cuda.is_available", set()),
        ("from utils import *\ncuda.is_available()\n", "cuda.is_available", set()),
    ],
)
def test_import_shapes(source: str, call: str, expected: set[str]) -> None:
    assert calls(source)[call] == expected


def test_a_parameter_named_torch_is_not_the_module() -> None:
    found = calls(
        """
        import torch
        def f(torch):
            torch.cuda.synchronize()
        torch.cuda.synchronize()
        """
    )
    assert found["torch.cuda.synchronize"] == {"torch.cuda.synchronize"}  # the module-level call
    found = calls("import torch\ndef f(torch):\n    torch.cuda.synchronize()\n")
    assert found["torch.cuda.synchronize"] == set()


def test_a_local_bound_anywhere_in_a_function_shadows_it_everywhere_in_it() -> None:
    found = calls(
        """
        import torch
        def f():
            torch.cuda.synchronize()
            torch = object()
        """
    )
    assert found["torch.cuda.synchronize"] == set()


def test_import_inside_a_function_binds_there_only() -> None:
    source = """
    def f():
        import torch as T
        T.cuda.synchronize()
    def g():
        T.cuda.synchronize()
    """
    module = cst.parse_module(textwrap.dedent(source))
    resolver = Resolver(module)
    probe = _CallProbe(resolver)
    Walker([probe], resolver).walk(module)
    assert [names for _, names in probe.calls] == [{"torch.cuda.synchronize"}, set()]


def test_a_conditional_import_wins_over_a_fallback_assignment() -> None:
    found = calls(
        """
        try:
            import torch
        except ImportError:
            torch = None
        torch.cuda.synchronize()
        """
    )
    assert found["torch.cuda.synchronize"] == {"torch.cuda.synchronize"}


def test_a_function_defined_after_importing_its_name_replaces_the_import() -> None:
    """x-transformers: `from math import log`, then its own `def log(t)` for tensors; a fallback
    defined in the `except` of a guarded import keeps the import's name."""
    found = calls(
        """
        from math import log, ceil
        try:
            from apex.normalization import FusedLayerNorm
        except ImportError:
            class FusedLayerNorm:
                pass
        def log(t):
            return t.clamp(min=1e-20).log()
        def noise(t):
            return -log(ceil(t)) + FusedLayerNorm(t)
        """
    )
    assert found["log"] == set()
    assert found["ceil"] == {"math.ceil"}
    assert found["FusedLayerNorm"] == {"apex.normalization.FusedLayerNorm"}


def test_alternative_imports_give_both_names() -> None:
    found = calls(
        """
        try:
            from torch.amp import autocast
        except ImportError:
            from torch.cuda.amp import autocast
        autocast()
        """
    )
    assert found["autocast"] == {"torch.amp.autocast", "torch.cuda.amp.autocast"}


def test_class_bodies_are_invisible_to_their_methods() -> None:
    source = """
    import torch
    class Model:
        torch = None
        torch.cuda.synchronize()
        def forward(self):
            torch.cuda.synchronize()
    """
    module = cst.parse_module(textwrap.dedent(source))
    resolver = Resolver(module)
    probe = _CallProbe(resolver)
    Walker([probe], resolver).walk(module)
    assert [names for _, names in probe.calls] == [set(), {"torch.cuda.synchronize"}]


def test_global_and_nonlocal_redirect() -> None:
    found = calls(
        """
        import torch
        def f():
            global torch
            torch.cuda.synchronize()
            torch = None
        """
    )
    assert found["torch.cuda.synchronize"] == {"torch.cuda.synchronize"}
    found = calls(
        """
        def outer():
            import torch
            def inner():
                nonlocal torch
                torch.cuda.synchronize()
                torch = None
        """
    )
    assert found["torch.cuda.synchronize"] == {"torch.cuda.synchronize"}


def test_decorators_and_defaults_are_evaluated_outside_the_function() -> None:
    source = """
    import torch
    @torch.jit.script
    def f(torch, device=torch.device("cpu")):
        return torch.zeros(1)
    """
    module = cst.parse_module(textwrap.dedent(source))
    resolver = Resolver(module)
    probe = _CallProbe(resolver)
    Walker([probe], resolver).walk(module)
    assert dict(probe.calls) == {"torch.device": {"torch.device"}, "torch.zeros": set()}


def test_comprehension_and_lambda_variables_shadow() -> None:
    found = calls(
        """
        from torch import cuda
        streams = [cuda.Stream() for cuda in devices]
        fn = lambda cuda: cuda.Event()
        cuda.Event()
        """
    )
    assert found["cuda.Stream"] == set()
    assert found["cuda.Event"] == {"torch.cuda.Event"}  # the last call, at module level


def test_assigned_value_only_for_single_plain_bindings() -> None:
    module = cst.parse_module('DEV = "cuda"\nOTHER = "a"\nOTHER = "b"\nimport torch\n')
    resolver = Resolver(module)
    dev, other, torch_name = cst.Name("DEV"), cst.Name("OTHER"), cst.Name("torch")
    assert isinstance(resolver.assigned_value(dev), cst.SimpleString)
    assert resolver.assigned_value(other) is None
    assert resolver.assigned_value(torch_name) is None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("f(cuda=1)", False),  # a keyword name
        ("x.cuda", False),  # an attribute name (checked on the Name `cuda`)
        ("cuda = 1", False),  # being bound
        ("print(cuda)", True),
    ],
)
def test_is_reference_for_names(source: str, expected: bool) -> None:
    module = cst.parse_module(source)
    found = []

    class Probe:
        watched_names = ()

        def __init__(self) -> None:
            self.walker: Walker | None = None

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == "cuda":
                assert self.walker is not None
                found.append(is_reference(node, self.walker.ancestors[-1]))

    probe = Probe()
    walker = Walker([probe], Resolver(module))
    probe.walker = walker
    walker.walk(module)
    assert found == [expected]


def test_a_tuple_assigned_element_by_element_binds_each_name_to_its_value() -> None:
    module = cst.parse_module("a, (b, c) = f(), (g(), 1)\nd, e = pair\nh, *rest = 1, 2, 3\n")
    resolver = Resolver(module)
    code = {
        name: [cst.Module([]).code_for_node(v) if v is not None else None for v in values]
        for name, values in resolver.module.values.items()
    }
    assert code == {"a": ["f()"], "b": ["g()"], "c": ["1"], "d": [None], "e": [None], "h": [None], "rest": [None]}
