"""Finds the rules: one class per module under portcheck.rules. Selecting them by code needs no
rule class (portcheck.catalog)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache

from portcheck import rules as rules_package
from portcheck.rule import Rule


@cache
def all_rules() -> dict[str, type[Rule]]:
    """Every rule by code, sorted by code. Adding a rule means adding a file (and `make docs`,
    which writes its page and its entry in portcheck.catalog)."""
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
