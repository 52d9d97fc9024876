"""Which expressions are NumPy arrays of float64, by how they were made.

NumPy computes in float64 unless told otherwise, and `torch.from_numpy` keeps the dtype: the
diffusion schedules of guided-diffusion and its descendants (`betas = np.array(betas,
dtype=np.float64)`, `np.sqrt(np.cumprod(1.0 - betas))`) become float64 tensors on the device
when `th.from_numpy(arr).to(device)` comes before the cast. Only what is known is followed:
a dtype spelled float64, NumPy's float64 factories, and what NumPy computes from those,
through names, the module's `self.` attributes, its functions' parameters and returns, and
(in the second pass) the returns of the repository's other modules' functions.
"""

from __future__ import annotations

from functools import partial

import libcst as cst

from portcheck import patterns
from portcheck.flow import across_scopes, is_self_attribute
from portcheck.rule import FileContext
from portcheck.walk import descendants

_FLOAT64 = frozenset({"numpy.float64", "numpy.double", "numpy.float_"})
_FLOAT64_SPELLINGS = frozenset({"float64", "double", "f8", "float"})
# Factories that make float64 without a dtype.
_FACTORIES = frozenset(
    f"numpy.{name}"
    for name in (
        "linspace",
        "logspace",
        "geomspace",
        "eye",
        "identity",
        "zeros",
        "ones",
        "empty",
        "random.rand",
        "random.randn",
        "random.random",
        "random.uniform",
        "random.normal",
    )
)
# NumPy's random generators, and what their draws make in float64 (`RandomState(seed).randn(1, 512)`,
# `np.random.default_rng(seed).standard_normal(n)`), unless a `dtype=` says otherwise.
_GENERATORS = frozenset({"numpy.random.RandomState", "numpy.random.default_rng", "numpy.random.Generator"})
_DRAWS = frozenset(
    {"rand", "randn", "random", "random_sample", "uniform", "normal", "standard_normal", "exponential", "laplace"}
)
# Where those take their dtype by position (`np.zeros(n, np.float32)`).
_DTYPE_POSITION = {"numpy.zeros": 1, "numpy.ones": 1, "numpy.empty": 1, "numpy.identity": 1, "numpy.eye": 3}
_DTYPE_POSITION.update({"numpy.linspace": 5, "numpy.logspace": 5, "numpy.geomspace": 4})
# Functions whose result keeps the float64 of what they are given.
_KEEPING = frozenset(
    f"numpy.{name}"
    for name in (
        "array",
        "asarray",
        "copy",
        "sqrt",
        "square",
        "power",
        "exp",
        "expm1",
        "log",
        "log1p",
        "log2",
        "log10",
        "sin",
        "cos",
        "tan",
        "arcsin",
        "arccos",
        "arctan",
        "arctan2",
        "abs",
        "clip",
        "maximum",
        "minimum",
        "cumprod",
        "cumsum",
        "diff",
        "append",
        "concatenate",
        "stack",
        "hstack",
        "vstack",
        "flip",
        "roll",
        "pad",
        "tile",
        "repeat",
        "reshape",
        "transpose",
        "outer",
        "interp",
        "zeros_like",
        "ones_like",
        "linalg.qr",
    )
)
# NumPy's floating-point functions, which turn a Python number into a float64 scalar
# (score_sde's `np.log(self.sigma_max)`, with `sigma_max=50`).
_FLOATING = frozenset(
    f"numpy.{name}"
    for name in (
        *("sqrt", "exp", "expm1", "log", "log1p", "log2", "log10"),
        *("sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2"),
    )
)
_KEEPING_METHODS = frozenset(
    {"copy", "reshape", "flatten", "ravel", "squeeze", "transpose", "clip", "cumprod", "cumsum", "repeat"}
)
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power, cst.MatrixMultiply)
_DEPTH = 12


def float64_array(
    ctx: FileContext, node: cst.BaseExpression, depth: int = 0, seen: frozenset[str] = frozenset()
) -> bool:
    """Whether `node`, asked in the scope the walk is in (or `flow.in_scope`), is a float64
    NumPy array (or one of its elements) by how it was made: on either side of an `if`
    expression, as any call of the module gives a parameter (the call that passes it moves it).
    A name or attribute must be bound to float64 throughout."""
    if depth > _DEPTH:
        return False
    if isinstance(node, cst.Call):
        return _made_float64(ctx, node, depth, seen)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
        return float64_array(ctx, node.left, depth + 1, seen) or float64_array(ctx, node.right, depth + 1, seen)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return float64_array(ctx, node.expression, depth + 1, seen)
    if isinstance(node, cst.IfExp):
        return float64_array(ctx, node.body, depth + 1, seen) or float64_array(ctx, node.orelse, depth + 1, seen)
    if isinstance(node, cst.Subscript):
        return float64_array(ctx, node.value, depth + 1, seen)
    if isinstance(node, cst.Name):
        return _name_float64(ctx, node, depth, seen)
    if is_self_attribute(node):
        assert isinstance(node, cst.Attribute)
        return _attribute_float64(ctx, node.attr.value, depth, seen)
    return False


def _made_float64(ctx: FileContext, call: cst.Call, depth: int, seen: frozenset[str]) -> bool:
    names = ctx.qualified_names(call.func)
    dtype = patterns.keyword(call, "dtype")
    method = patterns.method_name(call)
    if method == "astype" and not names and call.args:
        return _float64_dtype(ctx, call.args[0].value)
    numpy = {name for name in names if name.startswith("numpy.")}
    if dtype is None:
        dtype = next(
            (patterns.positional(call, _DTYPE_POSITION[name]) for name in numpy & _DTYPE_POSITION.keys()), None
        )
    if numpy and dtype is not None:
        return _float64_dtype(ctx, dtype.value)
    if numpy & _FACTORIES:
        return True
    if numpy & _FLOATING and any(_python_number(ctx, arg.value, depth + 1) for arg in call.args if not arg.keyword):
        return True
    if numpy & _KEEPING:
        return any(float64_array(ctx, _listed(arg.value), depth + 1, seen) for arg in call.args if not arg.keyword)
    if method in _KEEPING_METHODS and not names and isinstance(call.func, cst.Attribute):
        return float64_array(ctx, call.func.value, depth + 1, seen)
    if method in _DRAWS and not names and isinstance(call.func, cst.Attribute) and _generator(ctx, call.func.value):
        return dtype is None or _float64_dtype(ctx, dtype.value)
    if ctx.project.float64_returns and {ctx.module.absolute(name) for name in names} & ctx.project.float64_returns:
        return True  # another module's function that returns one (known in the second pass)
    flow = ctx.flow
    key = f"return:{patterns.dotted(call.func)}"
    if names or flow is None or key in seen:
        return False
    seen = across_scopes(seen) | {key}
    return any(
        flow.in_scope(scope, partial(float64_array, ctx, value, depth + 1, seen))
        for value, scope in flow.returned_values(call)
    )


def _generator(ctx: FileContext, node: cst.BaseExpression) -> bool:
    """A NumPy random generator: made here (`np.random.RandomState(seed)`) or bound to a name
    once (`rng = np.random.default_rng(seed)`)."""
    made = ctx.assigned_value(node) if isinstance(node, cst.Name) else node
    return isinstance(made, cst.Call) and bool(ctx.qualified_names(made.func) & _GENERATORS)


def _listed(node: cst.BaseExpression) -> cst.BaseExpression:
    """The first element of a list or tuple literal (`np.concatenate([a, b])`), else the node."""
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        return node.elements[0].value
    return node


def _float64_dtype(ctx: FileContext, node: cst.BaseExpression) -> bool:
    if ctx.qualified_names(node) & _FLOAT64:
        return True
    if isinstance(node, cst.Name) and node.value == "float" and not ctx.qualified_names(node):
        return True
    return patterns.string_value(node) in _FLOAT64_SPELLINGS


def _name_float64(ctx: FileContext, node: cst.Name, depth: int, seen: frozenset[str]) -> bool:
    """All that `=` binds the name to (`matrix = np.eye(3)`, then `matrix = -matrix`: what reads
    the name itself keeps what the others give it; a parameter rebound, `betas =
    np.array(betas, dtype=np.float64)`, reads the parameter); else, for a parameter, any
    call's value."""
    flow = ctx.flow
    if flow is None:
        return False
    if node.value in seen:
        return True  # being decided: `-matrix` is float64 where `matrix` is
    values = flow.resolver.rebound_values(node)
    if values and flow.resolver.bindings(node) > len(values):  # a parameter, rebound
        return all(float64_array(ctx, value, depth + 1, seen) for value in values)
    if values:
        first = [value for value in values if not _reads(value, node.value)]
        seen = seen | {node.value}
        return bool(first) and all(float64_array(ctx, value, depth + 1, seen) for value in values)
    function = flow.resolver.parameter_of(node)
    passed = flow.passed_arguments(function, node.value) if function is not None else None
    key = f"{id(function)}:{node.value}"
    if not passed or key in seen:
        return False
    seen = across_scopes(seen) | {key}
    return any(flow.in_scope(scope, partial(float64_array, ctx, arg, depth + 1, seen)) for arg, scope in passed)


def _python_number(ctx: FileContext, node: cst.BaseExpression, depth: int) -> bool:
    """A number literal, or a name or `self.` attribute that only numbers are given: the
    module's `=` values, else, for a parameter, its default and what the module's calls pass."""
    flow = ctx.flow
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _python_number(ctx, node.expression, depth + 1)
    if flow is None or depth > _DEPTH:
        return False
    if is_self_attribute(node):
        assert isinstance(node, cst.Attribute)
        values = flow.self_attribute_values(node.attr.value)
        return bool(values) and all(
            flow.in_scope(scope, partial(_python_number, ctx, value, depth + 1)) for value, scope in values
        )
    if not isinstance(node, cst.Name):
        return False
    values = flow.resolver.rebound_values(node)
    if values:
        return all(_python_number(ctx, value, depth + 1) for value in values)
    function = flow.resolver.parameter_of(node)
    param = next((p for p in function.params.params if p.name.value == node.value), None) if function else None
    if function is None or param is None or param.default is None or not _python_number(ctx, param.default, depth):
        return False
    passed = flow.passed_arguments(function, node.value) or []
    return all(flow.in_scope(scope, partial(_python_number, ctx, arg, depth + 1)) for arg, scope in passed)


def _reads(value: cst.BaseExpression, name: str) -> bool:
    return any(isinstance(node, cst.Name) and node.value == name for node in (value, *descendants(value)))


def _attribute_float64(ctx: FileContext, attribute: str, depth: int, seen: frozenset[str]) -> bool:
    flow = ctx.flow
    key = f"self:{attribute}"
    if flow is None or key in seen:
        return False
    values = flow.self_attribute_values(attribute)
    seen = across_scopes(seen) | {key}
    return bool(values) and all(
        flow.in_scope(scope, partial(float64_array, ctx, value, depth + 1, seen)) for value, scope in values
    )
