"""Compare a target's tensors with the reference's, with tolerances that fit each dtype."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# torch.testing.assert_close's defaults: (rtol, atol) per dtype.
DEFAULT_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float16: (1e-3, 1e-5),
}
# float32 matmuls computed at bfloat16 precision (TPU's default) agree only to bf16 tolerances.
REDUCED_PRECISION = (1.6e-2, 1e-3)


@dataclass(frozen=True)
class TensorCheck:
    """One tensor's verdict."""

    group: str  # outputs | losses | gradients | weights
    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float
    rtol: float
    atol: float
    passed: bool
    problem: str = ""  # a shape or dtype mismatch, or a missing tensor


def tolerance(dtype: torch.dtype, rtol: float | None, atol: float | None, reduced: bool) -> tuple[float, float]:
    """The user's tolerances where given, else the dtype's (bf16-level for float32 when the
    target ran matmuls at reduced precision)."""
    default = REDUCED_PRECISION if reduced and dtype == torch.float32 else DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


def compare(
    reference: dict[str, dict[str, torch.Tensor]],
    candidate: dict[str, dict[str, torch.Tensor]],
    rtol: float | None = None,
    atol: float | None = None,
    reduced_precision: bool = False,
) -> list[TensorCheck]:
    """Every tensor the reference produced, checked against the candidate's."""
    checks = []
    for group, tensors in reference.items():
        for name, expected in tensors.items():
            actual = candidate.get(group, {}).get(name)
            checks.append(_check(group, name, expected, actual, rtol, atol, reduced_precision))
    return checks


def _check(
    group: str,
    name: str,
    expected: torch.Tensor,
    actual: torch.Tensor | None,
    rtol: float | None,
    atol: float | None,
    reduced: bool,
) -> TensorCheck:
    r, a = tolerance(expected.dtype, rtol, atol, reduced)
    shape = tuple(expected.shape)
    dtype = str(expected.dtype).removeprefix("torch.")

    def failed(problem: str) -> TensorCheck:
        return TensorCheck(group, name, dtype, shape, float("inf"), float("inf"), r, a, False, problem)

    if actual is None:
        return failed("missing on the target")
    if tuple(actual.shape) != shape:
        return failed(f"shape {tuple(actual.shape)} instead of {shape}")
    if actual.dtype != expected.dtype:
        return failed(f"dtype {str(actual.dtype).removeprefix('torch.')} instead of {dtype}")
    if not expected.is_floating_point() and not expected.is_complex():
        equal = bool(torch.equal(actual, expected))
        error = 0.0 if equal else float("inf")
        return TensorCheck(group, name, dtype, shape, error, error, 0.0, 0.0, equal)
    wide_expected, wide_actual = expected.double(), actual.double()
    finite = torch.isfinite(wide_expected) & torch.isfinite(wide_actual)
    same_nonfinite = bool(
        torch.equal(torch.isnan(wide_expected), torch.isnan(wide_actual))
        and torch.equal(wide_expected.nan_to_num(0.0)[~finite], wide_actual.nan_to_num(0.0)[~finite])
    )
    difference = torch.where(finite, (wide_actual - wide_expected).abs(), torch.zeros_like(wide_expected))
    max_abs = float(difference.max()) if difference.numel() else 0.0
    relative = difference / wide_expected.abs().clamp_min(torch.finfo(torch.float64).tiny)
    max_rel = float(relative[finite].max()) if bool(finite.any()) else 0.0
    # NaN and infinity where the reference has the same are agreement: compare the rest.
    close = bool((difference <= a + r * wide_expected.abs())[finite].all())
    if not same_nonfinite:
        problem = "NaN or infinity where the reference has none (or the reverse)"
    elif not close:
        problem = f"differs beyond the tolerance (rtol {r:g}, atol {a:g})"
    else:
        problem = ""
    return TensorCheck(group, name, dtype, shape, max_abs, max_rel, r, a, close and same_nonfinite, problem)
