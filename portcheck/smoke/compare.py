"""Compare a target's tensors with the reference's, with tolerances that fit each dtype and each
tensor's own scale."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Per dtype: (rtol, atol per unit of the tensor's scale). rtol is torch.testing.assert_close's. The
# atol (float64's is torch's) covers what a model's forward and backward pass leaves near zero
# when only the summation order changes (the batch permuted, on the CPU), about 4x over: float32
# 2.7e-5 (gradients through BatchNorm, which cancel), bfloat16 2.6e-2, float16 3e-3 (a
# transformer block). Below those, a verdict would flag round-off; bugs err by far more.
DEFAULT_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-4),
    torch.bfloat16: (1.6e-2, 1e-1),
    torch.float16: (1e-3, 1e-2),
}
# float32 matmuls computed at bfloat16 precision (TPU's default) agree only to bf16 tolerances.
REDUCED_PRECISION = DEFAULT_TOLERANCES[torch.bfloat16]
BF16_NOISE = "within bfloat16 matmul noise: it would fail at float32 tolerances"


@dataclass(frozen=True)
class TensorCheck:
    """One tensor's verdict."""

    group: str  # outputs | losses | gradients | weights
    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float  # max |a - e| / (|e| + the reference's scale)
    rtol: float
    atol: float  # the user's, or the dtype's times the reference's scale
    passed: bool
    problem: str = ""  # a shape or dtype mismatch, a missing tensor, or the tolerance exceeded
    note: str = ""  # a pass that float32 tolerances would fail, under reduced matmul precision


def scale_of(expected: torch.Tensor) -> float:
    """The reference's largest finite magnitude, floored at its dtype's smallest normal number.

    Round-off in a sum is proportional to the size of its terms, not of its result, so an
    element near zero carries the error of its tensor's large values: judged against its own
    size, a matmul summed in another order fails. The maximum rather than the RMS, because
    exact zeros (unused embedding rows, ReLU) shrink the RMS but not the other elements'
    round-off. The floor keeps an all-zero tensor zero."""
    if not expected.is_floating_point():
        return 0.0
    magnitude = expected.double().abs()
    finite = magnitude[torch.isfinite(magnitude)]
    largest = float(finite.max()) if finite.numel() else 0.0
    return max(largest, torch.finfo(expected.dtype).tiny)


def tolerance(
    dtype: torch.dtype, rtol: float | None, atol: float | None, reduced: bool, scale: float
) -> tuple[float, float]:
    """(rtol, atol): the user's where given, else the dtype's (bf16's for float32 when the target
    ran matmuls at reduced precision), the dtype's atol multiplied by the reference's scale.

    Each element passes within atol + rtol x |e|, torch.testing's rule. With the atol scaled,
    a tensor whose values are all small is judged against its own magnitude (a fixed 1e-5 let
    sign-flipped 1e-6 gradients pass), and one of large values gets the atol its round-off
    needs near zero (a fixed 1e-5 failed a float32 matmul reordered). A user's atol is absolute
    and replaces the scaled one: the user's pair is then torch.testing's rule exactly."""
    default = REDUCED_PRECISION if reduced and dtype == torch.float32 else DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    return (default[0] if rtol is None else rtol, default[1] * scale if atol is None else atol)


def compare(
    reference: dict[str, dict[str, torch.Tensor]],
    candidate: dict[str, dict[str, torch.Tensor]],
    rtol: float | None = None,
    atol: float | None = None,
    reduced_precision: bool = False,
) -> list[TensorCheck]:
    """Every tensor the reference produced, checked against the candidate's.

    Each element is judged, with no tensor-level check on ||a - e|| / ||e||: the element rule
    already bounds every error by atol + rtol x max |e|, and a norm dilutes an error confined
    to a few elements (a wrong row, a mask's edge) by the square root of their share."""
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
    scale = scale_of(expected)
    r, a = tolerance(expected.dtype, rtol, atol, reduced, scale)
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
    # NaN and infinity where the reference has the same are agreement: compare the rest.
    difference, magnitude = (wide_actual - wide_expected)[finite].abs(), wide_expected[finite].abs()
    max_abs = float(difference.max()) if difference.numel() else 0.0
    max_rel = float((difference / (magnitude + scale)).max()) if difference.numel() else 0.0
    close = _within(difference, magnitude, r, a)
    if not same_nonfinite:
        problem = "NaN or infinity where the reference has none (or the reverse)"
    elif not close:
        derived = f" = {a / scale:g} x the reference's max |value| {scale:g}" if atol is None else ""
        problem = f"differs beyond the tolerance (rtol {r:g}, atol {a:g}{derived})"
    else:
        problem = ""
    passed = close and same_nonfinite
    # A float32 pass owed to the bf16 tolerance says nothing finer than bf16 noise: say so.
    loosened = reduced and rtol is None and expected.dtype == torch.float32
    strict = tolerance(expected.dtype, rtol, atol, False, scale)
    note = BF16_NOISE if passed and loosened and not _within(difference, magnitude, *strict) else ""
    return TensorCheck(group, name, dtype, shape, max_abs, max_rel, r, a, passed, problem, note)


def _within(difference: torch.Tensor, magnitude: torch.Tensor, rtol: float, atol: float) -> bool:
    """Every element within atol + rtol x |e|."""
    return bool((difference <= atol + rtol * magnitude).all())
