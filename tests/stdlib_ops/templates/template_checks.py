"""What the template tests share: hypothesis strategies for sizes and data, the error bounds of f32 sums, the
softmax reference with its bound, and numpy's spelling of the blocked channel layout."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

ODD_SIZES = (1, 7, 33, 257)
U = 2.0**-24  # f32's unit roundoff
H = 2.0**-11  # f16's unit roundoff
SUBNORMAL = 2.0**-146  # f32 results below 2^-126 are subnormal, spaced 2^-149: a few of those spacings


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


def softmax_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 softmax of the rows, the shifted inputs x - max, and log of the sums of exp."""
    shifted = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    log_total = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return np.exp(shifted - log_total), shifted, log_total


def assert_softmax_close(y: np.ndarray, x: np.ndarray, extra_rtol: float = 0.0, atol: float = SUBNORMAL) -> None:
    """`y` within f32's error of softmax(x): the shift x - max rounds by 2^-24 of its size, which exp turns into
    that much relative error; exp adds a few ulps, and the sum of `cols` positive terms cols * 2^-24."""
    expected, shifted, _ = softmax_reference(x)
    cols = x.shape[1]
    bound = expected * ((cols + 8) * U + 2 * U * np.abs(shifted) + extra_rtol) + atol
    worst = np.unravel_index(np.argmax(np.abs(y - expected) - bound), y.shape)
    assert (np.abs(y - expected) <= bound).all(), f"{y[worst]} != {expected[worst]} at {worst}"


def to_blocks(a: np.ndarray, block: int) -> np.ndarray:
    """NCHW `a` in blocks of `block` channels: `[N, C / block, H, W, block]`."""
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def from_blocks(a: np.ndarray) -> np.ndarray:
    """`[N, C / c, H, W, c]` `a` back in NCHW."""
    n, blocks, h, w, block = a.shape
    return np.ascontiguousarray(a.transpose(0, 1, 4, 2, 3).reshape(n, blocks * block, h, w))
