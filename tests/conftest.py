"""Hypothesis profiles for the fuzz tests (tests/test_fuzz.py), and the SARIF schema the reports
are validated against.

`fuzz-ci` (the default) is bounded and deterministic, so `make test` stays short and a red run
can be repeated; `fuzz-long` is the long random run: 3,400 cases for each of the three fuzz
tests. Choose one with `--hypothesis-profile=NAME` or HYPOTHESIS_PROFILE=NAME. No example
database: nothing is written into the repository.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from hypothesis import Phase, settings

# The OASIS SARIF 2.1.0 schema, kept beside the checkout (never copied into the repository).
SARIF_SCHEMA = Path(__file__).resolve().parents[2] / "shared" / "schemas" / "sarif-schema-2.1.0.json"

# Without the explain phase Hypothesis does not trace a failing case line by line while it
# shrinks it: a fuzz failure in CI is reported in minutes, not after an hour.
_NO_EXPLAIN = tuple(phase for phase in Phase if phase is not Phase.explain)
settings.register_profile(
    "fuzz-ci", max_examples=150, deadline=None, database=None, derandomize=True, phases=_NO_EXPLAIN
)
settings.register_profile("fuzz-long", max_examples=3_400, deadline=None, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fuzz-ci"))


def sarif_log_schema(schema: dict) -> dict:
    """The schema that a whole SARIF log must match.

    The OASIS file puts the log's constraints (`version`, `runs`, ...) at its root; some copies
    move them to `definitions/Root` and leave the root without any constraint, which would
    accept every document. Validate against `#/definitions/Root` then, in memory.
    """
    if any(key in schema for key in ("type", "properties", "required", "$ref")):
        return schema
    if "Root" in schema.get("definitions", {}):
        return {**schema, "$ref": "#/definitions/Root"}
    pytest.fail(f"{SARIF_SCHEMA} constrains nothing at its root and has no definitions/Root")


@pytest.fixture(scope="session")
def sarif_validator() -> jsonschema.Draft7Validator:
    if not SARIF_SCHEMA.is_file():
        pytest.skip(f"SARIF 2.1.0 schema not found at {SARIF_SCHEMA} (expected in shared/schemas beside the checkout)")
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(
        sarif_log_schema(schema), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
