"""Hypothesis profiles for the fuzz tests (tests/test_fuzz.py).

`fuzz-ci` (the default) is bounded and deterministic, so `make test` stays short and a red run
can be repeated; `fuzz-long` is the long random run: 3,400 cases for each of the three fuzz
tests. Choose one with `--hypothesis-profile=NAME` or HYPOTHESIS_PROFILE=NAME. No example
database: nothing is written into the repository.
"""

from __future__ import annotations

import os

from hypothesis import Phase, settings

# Without the explain phase Hypothesis does not trace a failing case line by line while it
# shrinks it: a fuzz failure in CI is reported in minutes, not after an hour.
_NO_EXPLAIN = tuple(phase for phase in Phase if phase is not Phase.explain)
settings.register_profile(
    "fuzz-ci", max_examples=150, deadline=None, database=None, derandomize=True, phases=_NO_EXPLAIN
)
settings.register_profile("fuzz-long", max_examples=3_400, deadline=None, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fuzz-ci"))
