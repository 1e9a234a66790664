"""What the operator tests share: the devices, hypothesis settings that reuse each kernel across a few data draws,
data strategies, and the float64 reference comparison with tolerances stated in units in the last place."""

from __future__ import annotations

import importlib.util

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import stdlib_ops as ops
from hidet_lang.testing import example_count, with_edge_values

DEVICES = ["cpu", "cuda"]
# each test uses a few fixed shapes (one kernel each) and draws fresh data for every example
SETTINGS = settings(max_examples=example_count(3), deadline=None)
HALF_DTYPES = ["float16", *(["bfloat16"] if importlib.util.find_spec("ml_dtypes") else [])]
# (device, dtype) of the half-precision tests: bfloat16 computes on CUDA only (test_ops_errors checks the CPU refusal)
HALF_CASES = [(device, dtype) for device in DEVICES for dtype in HALF_DTYPES if (device, dtype) != ("cpu", "bfloat16")]


def data(shape: tuple, lo: float = -4.0, hi: float = 4.0, dtype: str = "float32", *,
         edges: bool = False) -> st.SearchStrategy:
    """Arrays of `shape` with finite values in [lo, hi] exactly representable in `dtype`; with `edges`, about one
    element in eight is NaN, +-inf, -0.0 or 0.0 instead (`with_edge_values`)."""
    elements = st.floats(float(np.float32(lo)), float(np.float32(hi)), width=32, allow_subnormal=False)
    if edges:
        elements = with_edge_values(elements, one_in=8)
    if dtype == "float32":
        return arrays(np.float32, shape, elements=elements)
    return arrays(np.float32, shape, elements=elements).map(lambda a: a.astype(_numpy_dtype(dtype)))


def ints(shape: tuple, lo: int, hi: int, dtype: str = "int32") -> st.SearchStrategy:
    """Integer arrays of `shape` with values in [lo, hi]."""
    return arrays(np.dtype(dtype), shape, elements=st.integers(lo, hi))


def _numpy_dtype(dtype: str) -> object:
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def run(fn: object, *arrays_: np.ndarray, device: str, **kwargs: object) -> np.ndarray:
    """`fn` applied to the arrays as tensors on `device`, back as a numpy array."""
    return fn(*[ops.asarray(a, device=device) for a in arrays_], **kwargs).numpy()


def assert_ulps(got: np.ndarray, want: np.ndarray, ulps: float, atol: float = 0.0) -> None:
    """`got` (of its dtype) within `ulps` units in the last place of the exact `want`, plus `atol`."""
    assert got.shape == want.shape, (got.shape, want.shape)
    eps = float(np.finfo(got.dtype).eps) if got.dtype.kind == "f" else 2.0**-7  # bfloat16: 8 significant bits
    want = np.asarray(want, np.float64)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=ulps * eps, atol=atol)
