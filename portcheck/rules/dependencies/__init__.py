"""PC7: dependencies and environment: CUDA-only packages imported or declared, CUDA package indexes, torch versions."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from portcheck import patterns

SETUP_CALLS = frozenset({"setuptools.setup", "distutils.core.setup"})
_REQUIREMENT_KEYWORDS = ("install_requires", "setup_requires")


def setup_requirements(call: cst.Call) -> Iterator[tuple[cst.CSTNode, str]]:
    """The literal requirement strings of a `setup(...)` call, with their nodes: install and
    setup requirements and every extra. Computed values are not evaluated (nothing runs)."""
    for arg in call.args:
        if arg.keyword is None:
            continue
        if arg.keyword.value in _REQUIREMENT_KEYWORDS:
            yield from _strings(arg.value)
        elif arg.keyword.value == "extras_require" and isinstance(arg.value, cst.Dict):
            for element in arg.value.elements:
                yield from _strings(element.value)


def _strings(node: cst.BaseExpression) -> Iterator[tuple[cst.CSTNode, str]]:
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        for element in node.elements:
            value = patterns.string_value(element.value)
            if value is not None:
                yield element.value, value
