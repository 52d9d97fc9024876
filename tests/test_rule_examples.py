"""Every rule's VALID and INVALID examples, run through the real engine: a rule's first tests.

An INVALID example's `fixed` form is checked with only that rule enabled, as `portcheck fix`
would apply it; an example without one must come out of the fixer unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from portcheck import registry
from portcheck import targets as target_data
from portcheck.api import scan_source
from portcheck.config import Config
from portcheck.fixer import fix_source
from portcheck.rule import Invalid, Rule, Valid
from portcheck.targets import TARGET_ORDER


def _cases():
    for code, rule in registry.all_rules().items():
        for index, example in enumerate(rule.VALID):
            yield pytest.param(rule, example, id=f"{code}-valid-{index}")
        for index, example in enumerate(rule.INVALID):
            yield pytest.param(rule, example, id=f"{code}-invalid-{index}")


def findings_for(rule: type[Rule], example: Valid | Invalid):
    """Run an example with every rule enabled on every target, keep this rule's findings."""
    config = Config(targets=TARGET_ORDER).with_overrides(**example.options)
    return [f for f in scan_source(example.code, path=example.path, config=config) if f.code == rule.code]


def fixed_by(rule: type[Rule], example: Invalid, source: bytes) -> bytes:
    """What fixing `source` for the example's device does with only this rule enabled."""
    judged = (target_data.judged_as(example.device),)
    config = replace(Config(targets=judged).with_overrides(**example.options), rules=(rule.code,))
    outcome = fix_source(source, example.path, config, target_data.fix_target(example.device), unsafe=example.unsafe)
    assert not outcome.error, outcome.error
    return outcome.source


@pytest.mark.parametrize(("rule", "example"), list(_cases()))
def test_example(rule: type[Rule], example: Valid | Invalid) -> None:
    found = findings_for(rule, example)
    if isinstance(example, Valid):
        assert found == [], "\n".join(f"{f.line}:{f.column} {f.message}" for f in found)
        return
    assert found, f"{rule.code} reported nothing"
    if example.lines is not None:
        assert sorted(f.line for f in found) == sorted(example.lines)
    for finding in found:
        assert example.message in finding.message


@pytest.mark.parametrize(("rule", "example"), [case for case in _cases() if isinstance(case.values[1], Invalid)])
def test_fixed_form(rule: type[Rule], example: Invalid) -> None:
    source = example.code if isinstance(example.code, bytes) else example.code.encode()
    fixed = fixed_by(rule, example, source)
    expected = source if example.fixed is None else example.fixed.encode()
    assert fixed.decode(errors="surrogateescape") == expected.decode(errors="surrogateescape")
    assert fixed_by(rule, example, fixed) == fixed, "a second run must change nothing"
