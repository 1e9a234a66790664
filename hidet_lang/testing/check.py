"""``check_kernel``: run a kernel and a numpy reference on copies of the same inputs and compare."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["check_kernel", "default_tolerances"]

# (rtol, atol) by dtype. Integer and bool results must match exactly. For floats the tolerance allows a
# kernel to round differently from numpy (another summation order, fused multiply-add, a wider
# accumulator, a different libm), which changes the last few bits, while still catching wrong results:
# - float64 (eps 2.2e-16): 1e-12 leaves room for thousands of ulps of reordering and nothing more;
# - float32 (eps 1.2e-7): 1e-5 is about 80 ulps, enough for reductions over the modest sizes tests use;
# - float16 (eps 9.8e-4): 1e-3 is about one ulp -- enough for elementwise kernels; kernels that
#   accumulate in float16 (or compare against a float16 numpy reduction) should pass looser rtol/atol.
# atol covers results near zero, where a relative tolerance is meaningless after cancellation.
_FLOAT_TOLERANCES: dict[int, tuple[float, float]] = {
    2: (1e-3, 1e-3),  # float16
    4: (1e-5, 1e-6),  # float32
    8: (1e-12, 1e-12),  # float64
}


def default_tolerances(dtype: Any) -> tuple[float, float]:
    """The default ``(rtol, atol)`` of ``check_kernel`` for ``dtype``: ``(0, 0)`` for ints, bools and other
    non-float dtypes; see the module source for the float values and the reasons for them."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return _FLOAT_TOLERANCES.get(dt.itemsize, (1e-12, 1e-12))
    return (0.0, 0.0)


def _mismatches(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """A boolean array, True where ``got`` and ``want`` differ (NaN matches NaN, nothing else)."""
    if got.dtype.kind == "f":
        return ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if rtol == 0 and atol == 0:
        return got != want
    if got.dtype.kind in "iub":
        wide_got, wide_want = got.astype(np.float64), want.astype(np.float64)
        return ~np.isclose(wide_got, wide_want, rtol=rtol, atol=atol)
    return got != want


def _describe(index: int, names: Any) -> str:
    try:
        name = names[index]
    except (TypeError, IndexError, KeyError):
        name = None
    return f"args[{index}]" + (f" ({name!r})" if isinstance(name, str) else "")


def check_kernel(
    module: Callable[..., Any],
    reference: Callable[..., Any],
    *args: Any,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """Runs ``module`` and ``reference`` on copies of ``args`` and checks that they leave the same arrays.

    Every numpy-array argument is copied twice; ``module(*copies_a)`` and ``reference(*copies_b)`` are
    called (other arguments, e.g. sizes, are passed as they are). The reference is a Python/numpy function
    with the kernel's signature that writes its outputs into its array arguments in place, as the kernel
    does; return values are ignored. Then every array argument is compared pairwise -- inputs too, so a
    kernel that overwrites an input is caught.

    Tolerances default by dtype (``default_tolerances``): exact for ints and bools, ``rtol=1e-5`` for
    float32, ``1e-12`` for float64, ``1e-3`` for float16. NaN equals NaN; NaN against a number is a mismatch.

    On a mismatch, raises ``AssertionError`` naming the argument (its position, and its name when
    ``module`` has a ``param_names`` sequence, as built modules do), the first mismatching index in
    row-major order, both values, and how many elements differ. Returns ``None`` on success.
    """
    copies_a = [np.copy(a, order="K") if isinstance(a, np.ndarray) else a for a in args]
    copies_b = [np.copy(a, order="K") if isinstance(a, np.ndarray) else a for a in args]
    module(*copies_a)
    reference(*copies_b)
    names = getattr(module, "param_names", None)
    for position, (original, got, want) in enumerate(zip(args, copies_a, copies_b, strict=True)):
        if not isinstance(original, np.ndarray):
            continue
        what = _describe(position, names)
        if got.shape != want.shape or got.dtype != want.dtype:
            raise AssertionError(
                f"{what}: the kernel left an array of shape {got.shape} and dtype {got.dtype}, the reference "
                f"one of shape {want.shape} and dtype {want.dtype}"
            )
        default_rtol, default_atol = default_tolerances(got.dtype)
        r = default_rtol if rtol is None else rtol
        a = default_atol if atol is None else atol
        bad = _mismatches(got, want, r, a)
        count = int(np.count_nonzero(bad))
        if count == 0:
            continue
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        message = (
            f"{what} differs from the reference at index {first}: kernel {got[first]}, "
            f"reference {want[first]}; {count} of {got.size} element(s) differ"
        )
        if got.dtype.kind == "f":
            with np.errstate(invalid="ignore", over="ignore"):
                diff = np.abs(got.astype(np.float64) - want)
            finite = diff[bad & np.isfinite(diff)]
            if finite.size:
                message += f" (largest finite abs difference {finite.max():.6g})"
        message += f" [rtol={r:g}, atol={a:g}, dtype {got.dtype}]"
        raise AssertionError(message)
    return None
