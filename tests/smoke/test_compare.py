"""Smoke's tensor comparison: what agrees, and that every failing row says what failed."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from portcheck.smoke.compare import compare  # noqa: E402

NAN, INF = float("nan"), float("inf")


def check(expected, actual, **tolerances):
    expected, actual = torch.as_tensor(expected), torch.as_tensor(actual)
    (result,) = compare({"outputs": {"y": expected}}, {"outputs": {"y": actual}}, **tolerances)
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


def test_small_gradients_with_flipped_signs_fail() -> None:
    gradient = torch.tensor([1e-6, -2e-6, 3e-6, -1.5e-6])
    result = check(gradient, -gradient)
    assert not result.passed and result.problem.startswith("differs beyond the tolerance")
    assert "rtol 1.3e-06" in result.problem


def test_float32_noise_near_zero_among_unit_values_passes() -> None:
    result = check([1.0, -2.0, 3.0, 0.0, 1e-9], [1.0, -2.0, 3.0, 3e-7, -2e-7])
    assert result.passed and result.problem == ""


def test_a_matmul_summed_in_another_order_passes() -> None:
    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(32, 512, generator=generator), torch.randn(512, 32, generator=generator)
    order = torch.randperm(512, generator=generator)
    result = check(x @ w, x[:, order] @ w[order])
    assert result.passed and result.max_abs_error > 0


def test_a_float32_error_of_one_part_in_a_thousand_fails() -> None:
    values = torch.linspace(-3.0, 3.0, 7)
    assert not check(values, values * 1.001).passed


def test_the_relative_error_near_zero_is_relative_to_the_tensor_scale() -> None:
    result = check([0.0, 1.0, -2.0], [1e-7, 1.0, -2.0])
    assert result.passed and math.isfinite(result.max_rel_error)
    assert result.max_rel_error == pytest.approx(1e-7 / 2.0)


def test_an_all_zero_reference_must_stay_zero() -> None:
    assert check([0.0, 0.0], [0.0, 0.0]).passed
    assert not check([0.0, 0.0], [0.0, 1e-12]).passed


def test_a_pass_only_at_bfloat16_tolerance_says_so_under_reduced_precision() -> None:
    expected = torch.linspace(-1.0, 1.0, 64)
    rounded = expected.to(torch.bfloat16).float()
    reduced = check(expected, rounded, reduced_precision=True)
    assert reduced.passed and reduced.note == "within bfloat16 matmul noise: it would fail at float32 tolerances"
    assert not check(expected, rounded).passed and check(expected, rounded).note == ""
    assert check(expected, expected, reduced_precision=True).note == ""


def test_the_users_atol_and_rtol_are_honoured() -> None:
    small = torch.tensor([1e-6, -2e-6])
    result = check(small, -small, atol=1e-5)
    assert result.passed and result.atol == 1e-5
    assert check([1.0, 2.0], [1.01, 2.0], rtol=0.1).passed
    assert not check([1.0, 2.0], [1.01, 2.0], rtol=1e-3, atol=0.0).passed


def test_integers_must_be_equal() -> None:
    assert check([1, 2, 3], [1, 2, 3]).passed
    assert not check([1, 2, 3], [1, 2, 4]).passed


def test_smoke_case_is_importable_from_the_package() -> None:
    from portcheck.smoke import SmokeCase
    from portcheck.smoke.case import SmokeCase as Defined

    assert SmokeCase is Defined
