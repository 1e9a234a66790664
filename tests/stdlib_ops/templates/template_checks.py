"""What the template tests share: hypothesis strategies for sizes and data, and the error bounds of f32 sums."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

ODD_SIZES = (1, 7, 33, 257)


def sizes(max_size: int) -> st.SearchStrategy[int]:
    """Sizes up to `max_size`, with 1, 7, 33 and 257 (those not above it) drawn often."""
    odd = [s for s in ODD_SIZES if s <= max_size]
    return st.one_of(st.sampled_from(odd), st.integers(1, max_size))


def data(draw: st.DrawFn, shape: tuple[int, ...], dtype: str = "float32", scale: float = 1.0) -> np.ndarray:
    """An array of `shape` with values drawn from a seed (uniform in [-scale, scale]), in `dtype`."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return (rng.uniform(-scale, scale, size=shape)).astype(dtype)


F16_HALF_SUBNORMAL_STEP = 2.0**-25
"""The largest rounding error of an f16 result below f16's normal range (its values there are 2^-24 apart)."""


def assert_sum_close(actual: np.ndarray, exact: np.ndarray, magnitude: np.ndarray, terms: int,
                     unit: float = 2.0**-24, absolute: float = 0.0) -> None:
    """`actual` (sums of `terms` rounded terms, in any order) within `terms * unit * magnitude + absolute` of
    `exact`.

    `magnitude` is the sum of the terms' absolute values: a floating-point sum of n terms in any order is off
    by at most about n * unit of it (unit: the unit roundoff of the accumulation type, 2^-24 for f32); `absolute`
    covers a final rounding whose error is not relative (an f16 result in the subnormal range)."""
    err = np.abs(actual.astype(np.float64) - exact)
    bound = (terms + 1) * unit * magnitude + absolute + 1e-30
    worst = np.unravel_index(np.argmax(err - bound), err.shape) if err.size else ()
    assert (err <= bound).all(), f"error {err[worst]} above the bound {bound[worst]} at index {worst}"
