"""Every rule's VALID and INVALID examples, run through the real engine: a rule's first tests."""

from __future__ import annotations

import pytest

from portcheck import registry
from portcheck.api import scan_source
from portcheck.config import Config
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
