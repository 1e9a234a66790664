"""The numpy references and f32 error bounds that several operator test files use."""

from __future__ import annotations

import math

import numpy as np

U = 2.0**-24  # the unit roundoff of f32

_erf = np.vectorize(math.erf)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


# name: (float64 reference, data range); log, sqrt and rsqrt take positive data
UNARY = {
    "relu": (lambda x: np.maximum(x, 0), (-4, 4)),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), (-4, 4)),
    "silu": (lambda x: x * _sigmoid(x), (-4, 4)),
    "sigmoid": (_sigmoid, (-4, 4)),
    "tanh": (np.tanh, (-4, 4)),
    "exp": (np.exp, (-4, 4)),
    "log": (np.log, (0.01, 8)),
    "sqrt": (np.sqrt, (0, 8)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 8)),
    "abs": (np.abs, (-4, 4)),
    "neg": (np.negative, (-4, 4)),
    "erf": (_erf, (-4, 4)),
    "sin": (np.sin, (-4, 4)),
    "cos": (np.cos, (-4, 4)),
    "floor": (np.floor, (-4, 4)),
    "ceil": (np.ceil, (-4, 4)),
    "round": (np.round, (-4, 4)),
}
# f32 libm results are within 2 ulp of the exact value; a function built from several (gelu, silu, sigmoid)
# adds one rounding per step. Near a zero of the function (sin, cos, erf, gelu's 1 + erf(x) for x < 0, silu)
# the error is relative to the inputs' magnitude (4), not the result's: an absolute tolerance of a few ulp of 4.
ULPS = {"gelu": 8, "silu": 6, "sigmoid": 6}
ATOL = {"sin": 2e-6, "cos": 2e-6, "erf": 1e-6, "gelu": 2e-6, "silu": 2e-6}


def reduction_tolerance(name: str, x: np.ndarray, axis: object) -> float:
    """An absolute error bound: a sum of n terms in f32, in any order, is within n * u * sum(|x|) of the exact
    sum; a mean divides that by n; a variance sums n squared deviations (each at most max|x|^2 * 4); a standard
    deviation's error is at most the square root of the variance's."""
    n = x.size if axis is None else int(np.prod([x.shape[a] for a in np.atleast_1d(axis)]))
    if name in ("max", "min"):
        return 0.0
    if name in ("sum", "mean"):
        return n * U * float(np.abs(x).sum()) / (n if name == "mean" else 1)
    var_bound = 4 * n * U * 4 * float(np.square(x).max()) + 1e-30
    return var_bound if name == "var" else float(np.sqrt(var_bound))


def assert_normalized_close(got: np.ndarray, want: np.ndarray, x: np.ndarray, axes: tuple, scale: float) -> None:
    """A normalization's f32 error: the mean of n values is off by up to n * u * max|x|, and x - mean (then the
    whole row) is divided by sqrt(var + eps), which is as small as sqrt(eps) for a nearly constant row; `scale`
    bounds the affine weight. Per row: 2 * n * u * max|x| / sqrt(var + eps) * scale, plus a few ulp."""
    x64 = x.astype(np.float64)
    n = int(np.prod([x.shape[a] for a in axes]))
    spread = np.sqrt(x64.var(axes, keepdims=True) + 1e-5)
    bound = 2 * n * U * np.abs(x64).max(axes, keepdims=True) / spread * scale + 8 * U * np.abs(want) + 1e-6
    excess = np.abs(got.astype(np.float64) - want) - bound
    worst = int(np.argmax(excess))
    assert (excess <= 0).all(), f"element {worst}: got {got.flat[worst]}, want {want.flat[worst]}"


def conv2d_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple, padding: tuple,
                     dilation: tuple, groups: int) -> np.ndarray:
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dilation[0], kx * dilation[1]
                patch = xs[:, :, y0:y0 + stride[0] * (oh - 1) + 1:stride[0], x0:x0 + stride[1] * (ow - 1) + 1:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, ky, kx])
    return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)
