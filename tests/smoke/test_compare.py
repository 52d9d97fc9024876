"""Smoke's tensor comparison: what agrees, and that every failing row says what failed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from portcheck.smoke.compare import compare  # noqa: E402

NAN, INF = float("nan"), float("inf")


def check(expected: list[float], actual: list[float]):
    (result,) = compare({"outputs": {"y": torch.tensor(expected)}}, {"outputs": {"y": torch.tensor(actual)}})
    return result


@pytest.mark.parametrize("values", [[NAN, 1.0, INF], [NAN, NAN, NAN], [-INF, 0.0, 2.5]])
def test_nan_and_infinity_at_the_same_places_agree(values: list[float]) -> None:
    result = check(values, values)
    assert result.passed and result.problem == ""


def test_nan_where_the_reference_has_none_fails_and_says_so() -> None:
    result = check([1.0, 2.0], [NAN, 2.0])
    assert not result.passed and "NaN or infinity" in result.problem


def test_a_difference_beyond_the_tolerance_says_so() -> None:
    result = check([NAN, 1.0], [NAN, 1.5])
    assert not result.passed and result.problem.startswith("differs beyond the tolerance")
    assert result.max_abs_error == pytest.approx(0.5)


def test_smoke_case_is_importable_from_the_package() -> None:
    from portcheck.smoke import SmokeCase
    from portcheck.smoke.case import SmokeCase as Defined

    assert SmokeCase is Defined
