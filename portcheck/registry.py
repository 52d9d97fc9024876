"""Finds the rules (one class per module under portcheck.rules) and selects them by code prefix."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterable
from functools import cache

from portcheck import rules as rules_package
from portcheck.rule import Rule


@cache
def all_rules() -> dict[str, type[Rule]]:
    """Every rule by code, sorted by code. Adding a rule means adding a file, nothing else."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.walk_packages(rules_package.__path__, rules_package.__name__ + "."):
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                if not inspect.isabstract(obj) and hasattr(obj, "code"):
                    if obj.code in found:
                        raise RuntimeError(f"duplicate rule code {obj.code}: {found[obj.code]} and {obj}")
                    found[obj.code] = obj
    return dict(sorted(found.items()))


def get(code: str) -> type[Rule]:
    rules = all_rules()
    if code not in rules:
        raise ValueError(f"unknown rule {code!r}; known rules: {', '.join(rules)}")
    return rules[code]


def expand(selectors: Iterable[str]) -> set[str]:
    """Codes matching each selector: `ALL`, a prefix such as `PC` or `PC2`, or a full code. An
    empty selector (`--select ""`, `"PC2,"`) is refused: it would select nothing, silently."""
    codes = all_rules()
    result: set[str] = set()
    for selector in selectors:
        wanted = selector.strip().upper()
        if not wanted:
            raise ValueError(
                f"empty rule selector {selector!r}; give a code such as PC203, a prefix such as PC2, or ALL"
            )
        matched = set(codes) if wanted == "ALL" else {c for c in codes if c.startswith(wanted)}
        if not matched:
            raise ValueError(
                f"unknown rule selector {selector!r}; valid codes: {', '.join(codes)} "
                "(or a prefix of them such as PC2, or ALL)"
            )
        result |= matched
    return result


def select(
    select: Iterable[str] | None,
    extend_select: Iterable[str] = (),
    ignore: Iterable[str] = (),
) -> tuple[str, ...]:
    """Ruff's resolution: `select` (default ALL), plus `extend-select`, minus `ignore`."""
    chosen = expand(["ALL"] if select is None else select) | expand(extend_select)
    return tuple(sorted(chosen - expand(ignore)))
