"""PC7: dependencies and environment: CUDA-only packages imported or declared, CUDA package indexes, torch versions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import libcst as cst

from portcheck import flow, patterns, walk
from portcheck.rule import FileContext
from portcheck.targets import packages

SETUP_CALLS = frozenset({"setuptools.setup", "distutils.core.setup"})
# Functions that tell whether a package is installed (Transformers' `is_flash_attn_2_available`).
_AVAILABILITY_NAME = re.compile(r"is_\w+_available")
_FIND_SPEC = frozenset({"importlib.util.find_spec"})
# Function names that say the function exports the model: the word `export`, or an export format.
_EXPORT_NAME = re.compile(r"(^|_)(export|exporter|onnx|tensorrt|trt|coreml|tflite|openvino)(_|$)")
_REQUIREMENT_KEYWORDS = ("install_requires", "setup_requires")


def setup_requirements(call: cst.Call, ctx: FileContext) -> Iterator[tuple[cst.CSTNode, str]]:
    """The requirement strings of a `setup(...)` call, with their nodes: install and setup
    requirements and every extra, written in the call, through names bound once and lists
    added up, and Hugging Face's table lookups (`deps["bitsandbytes"]`, where the key is the
    requirement's name). Other computed values are not evaluated (nothing runs)."""
    for arg in call.args:
        if arg.keyword is None:
            continue
        if arg.keyword.value in _REQUIREMENT_KEYWORDS:
            yield from _strings(arg.value, ctx)
        elif arg.keyword.value == "extras_require" and isinstance(arg.value, cst.Dict):
            for element in arg.value.elements:
                yield from _strings(element.value, ctx)


def _strings(node: cst.BaseExpression, ctx: FileContext, depth: int = 0) -> Iterator[tuple[cst.CSTNode, str]]:
    if depth > 3:
        return
    if isinstance(node, cst.Name):
        bound = ctx.assigned_value(node)
        if bound is not None:
            yield from _strings(bound, ctx, depth + 1)
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        yield from _strings(node.left, ctx, depth + 1)
        yield from _strings(node.right, ctx, depth + 1)
    elif isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        for element in node.elements:
            value = element.value
            if isinstance(value, cst.Subscript) and len(value.slice) == 1:
                index = value.slice[0].slice
                value = index.value if isinstance(index, cst.Index) else value
            text = patterns.string_value(value)
            if text is not None:
                yield element.value, text


def optional_import(
    ancestors: Sequence[cst.CSTNode],
    ctx: FileContext,
    package: packages.Package,
    statement: cst.Import | cst.ImportFrom | None = None,
) -> str:
    """Why an import the walk is at is optional (the program runs on without the package), or
    empty: guarded by a `try` whose handler catches ImportError and carries on (only logging
    there where the module reads none of the names the import `statement` binds; not by
    importing the package again, another version's name for the same thing), by an
    availability check (`if is_flash_attn_2_available():`, `if find_spec("apex"):`) or a test
    that selects the package (`if args.deepspeed:`, `if isinstance(strategy, DeepSpeedStrategy):`),
    or inside a function named for exporting."""
    path = list(ancestors)
    for parent, child in zip(path, path[1:]):
        if (
            isinstance(parent, cst.Try)
            and child is parent.body
            and any(
                patterns.carries_on_without_import(h)
                and (not _only_logs(h) or _unread(statement, path[0]))
                and not _imports_package(h, package)
                for h in parent.handlers
            )
        ):
            return "guarded by try/except ImportError"
        if isinstance(parent, cst.If) and child is parent.body and _checks_availability(parent.test, ctx):
            return f"only under `if {cst.Module([]).code_for_node(parent.test)}:`"
        if isinstance(parent, cst.If) and child is parent.body and _selects(parent.test, package):
            return f"{_SELECTED} `if {cst.Module([]).code_for_node(parent.test)}:` selects it"
    for node in reversed(path):
        if isinstance(node, cst.FunctionDef) and _EXPORT_NAME.search(node.name.value.lower()):
            return f"{_EXPORTING} `{node.name.value}`"
    return ""


_SELECTED, _EXPORTING = "only where", "only in the export function"


def by_choice(optional: str) -> bool:
    """Whether an optional import (`optional_import`'s reason) runs only where the user picks
    the package or exports the model: a port leaves it, where one behind a try or an
    availability check is a CUDA-only fast path that the target silently goes without."""
    return optional.startswith((_SELECTED, _EXPORTING))


def _selects(test: cst.BaseExpression, package: packages.Package) -> bool:
    """A test that names the package, as an option or a choice of it does (`args.deepspeed`,
    `use_flash_attn`, `DeepSpeedStrategy`): the import runs only where the user picked it."""
    wanted = {_squeezed(name.split(".")[0]) for name in package.imports} | {_squeezed(package.key)}
    for node in (test, *walk.descendants(test)):
        named = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""
        if named and any(each in _squeezed(named) for each in wanted):
            return True
    return False


def _squeezed(name: str) -> str:
    return name.replace("_", "").lower()


def _unread(statement: cst.Import | cst.ImportFrom | None, module: cst.CSTNode) -> bool:
    """Whether the module reads none of the names an import binds (ConvNeXt's `try: import apex
    except: print(...)`, apex never used): going on without them breaks nothing."""
    if statement is None or isinstance(statement.names, cst.ImportStar):
        return False
    bound = frozenset(
        patterns.dotted(alias.asname.name) if alias.asname else patterns.dotted(alias.name).split(".")[0]
        for alias in statement.names
    )
    return next(flow.name_reads(module, bound, apart=(cst.Import, cst.ImportFrom)), None) is None


def _imports_package(handler: cst.ExceptHandler, package: packages.Package) -> bool:
    """A handler that imports the package again, by another name (`except ImportError: from
    flash_attn.flash_attn_interface import flash_attn_varlen_qkvpacked_func as ...`): a
    fallback between its versions, which needs the package all the same."""
    for node in walk.descendants(handler.body, ()):
        if type(node) is cst.Import and any(
            packages.by_import(patterns.dotted(alias.name)) == package for alias in node.names
        ):
            return True
        if type(node) is cst.ImportFrom and node.module is not None and not node.relative:
            if packages.by_import(patterns.dotted(node.module)) == package:
                return True
    return False


def _only_logs(handler: cst.ExceptHandler) -> bool:
    """A handler whose every statement is a call of a logger, `print` or `warnings.warn`: it
    binds no fallback, so the module goes on without the names the `try` imports."""
    statements = patterns.simple_statements(handler.body)
    return bool(statements) and all(
        isinstance(statement, cst.Expr)
        and isinstance(statement.value, cst.Call)
        and patterns.is_logging_call(statement.value)
        for statement in statements
    )


def _checks_availability(test: cst.BaseExpression, ctx: FileContext) -> bool:
    """`is_apex_available()`, `find_spec("apex")` (alone or in an `and`): a test that holds only
    where a package is installed."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _checks_availability(test.left, ctx) or _checks_availability(test.right, ctx)
    if not isinstance(test, cst.Call):
        return False
    if ctx.qualified_names(test.func) & _FIND_SPEC:
        return True
    name = patterns.target_name(test.func) if isinstance(test.func, (cst.Name, cst.Attribute)) else None
    return name is not None and _AVAILABILITY_NAME.fullmatch(name) is not None
