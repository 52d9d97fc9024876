"""What every rule must declare, checked for all of them at once."""

from __future__ import annotations

import inspect
import re

import pytest

from portcheck import filekinds, registry
from portcheck.findings import FixSafety
from portcheck.rule import CODE_PATTERN, DOC_SECTIONS, NAME_PATTERN, Rule, doc_sections
from portcheck.targets import TARGET_ORDER
from portcheck.walk import node_types

RULES = list(registry.all_rules().values())
VISITING = [rule for rule in RULES if not rule.engine_reported]
PYTHON_VISITING = [rule for rule in VISITING if filekinds.PYTHON in rule.file_kinds]
FAMILIES = {
    "0": "tool",
    "1": "placement",
    "2": "runtime",
    "3": "precision",
    "4": "distributed",
    "5": "shapes",
    "6": "kernels",
    "7": "dependencies",
    "8": "compile",
}

# The import shapes every name-resolving rule's examples must exercise (DESIGN.md, issue #2).
IMPORT_SHAPES = {
    "import torch": re.compile(r"^import torch$", re.M),
    "import torch as T": re.compile(r"^import torch as \w+$", re.M),
    "from torch import x": re.compile(r"^from torch import \w+", re.M),
    "from torch.x import y as z": re.compile(r"^from torch\.[\w.]+ import .*\bas \w+", re.M),
    "import torch.x": re.compile(r"^import torch\.[\w.]+", re.M),
}
LOCAL_SHADOW = re.compile(r"def \w+\([^)]*\b(torch|cuda)\b|^(torch|cuda) = |^class (GradScaler|DataParallel)\b", re.M)


def _source(example) -> str:
    return example.code if isinstance(example.code, str) else example.code.decode("latin-1")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_identity_is_well_formed(rule: type[Rule]) -> None:
    assert CODE_PATTERN.match(rule.code)
    assert NAME_PATTERN.match(rule.name)
    assert rule.message
    assert rule.__module__.split(".")[-2] == FAMILIES[rule.code[2]], "one family per code digit"
    assert rule.__module__.split(".")[-1] == rule.name.replace("-", "_"), "the file is named after the rule"


def test_codes_and_names_are_unique() -> None:
    assert len({rule.code for rule in RULES}) == len(RULES)
    assert len({rule.name for rule in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_docstring_has_every_section_in_order(rule: type[Rule]) -> None:
    sections = doc_sections(rule)
    assert list(sections) == list(DOC_SECTIONS)
    assert all(body.strip() for body in sections.values())
    assert rule.summary()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_severity_is_declared_for_every_target(rule: type[Rule]) -> None:
    assert set(rule.severity) == set(TARGET_ORDER)
    assert rule.worst_severity() > 0, "a rule that is off everywhere can never fire"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_examples_exist_both_ways(rule: type[Rule]) -> None:
    assert len(rule.VALID) >= 2
    assert len(rule.INVALID) >= 2


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_fix_safety_is_claimed_exactly_when_an_example_shows_a_fix(rule: type[Rule]) -> None:
    fixed = [example for example in rule.INVALID if example.fixed is not None]
    assert (rule.fix_safety is FixSafety.NONE) == (not fixed)
    if rule.fix_safety is FixSafety.SAFE:
        assert any(not example.unsafe for example in fixed), "a safe fix needs an example without --unsafe-fixes"


@pytest.mark.parametrize("rule", VISITING, ids=lambda r: r.code)
def test_visiting_rules_declare_triggers_that_their_examples_contain(rule: type[Rule]) -> None:
    if (rule.has_second_pass() and not rule.triggers) or filekinds.PYTHON not in rule.file_kinds:
        return  # runs only in the second pass, or reads only text files (never prefiltered)
    assert rule.triggers, "without trigger words the engine could never skip a file"
    for example in rule.INVALID:
        if filekinds.kind_of(example.path) != filekinds.PYTHON:
            continue
        data = example.code if isinstance(example.code, bytes) else example.code.encode()
        assert any(trigger in data for trigger in rule.triggers), _source(example)


@pytest.mark.parametrize("rule", VISITING, ids=lambda r: r.code)
def test_handlers_name_real_libcst_nodes(rule: type[Rule]) -> None:
    types = node_types()
    for name, _ in inspect.getmembers(rule, inspect.isfunction):
        kind, _, node = name.partition("_")
        if kind in ("visit", "leave") and name != "visit_watched_name":
            assert node in types, f"{rule.code}.{name}: libcst has no node {node}"


@pytest.mark.parametrize("rule", PYTHON_VISITING, ids=lambda r: r.code)
def test_examples_cover_every_import_shape_and_a_shadowing_local(rule: type[Rule]) -> None:
    text = "\n".join(_source(example) for example in (*rule.VALID, *rule.INVALID))
    missing = [shape for shape, pattern in IMPORT_SHAPES.items() if not pattern.search(text)]
    assert not missing, f"{rule.code} examples lack: {missing}"
    assert any(LOCAL_SHADOW.search(_source(example)) for example in rule.VALID), (
        f"{rule.code} needs a VALID example where `torch` or `cuda` (or the API's name) is a local"
    )
