"""Pooling over the last two axes of (N, C, H, W) or (C, H, W) tensors, as torch.nn.functional: `max_pool2d`,
`avg_pool2d` (stride defaults to the kernel size; padding counted in the average unless
`count_include_pad=False`), `adaptive_avg_pool2d`; each one task."""

from __future__ import annotations

import math
from typing import Any

from hidet_lang.ir.expr import Constant, Expr, IfThenElse, Intrinsic, Var
from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, shape_str
from stdlib_ops.operators.conv import all_of, float_dtypes, in_range, pair, require_static
from stdlib_ops.tensor import Tensor


def _spatial_input(name: str, x: Any) -> Tensor:
    (x,) = as_tensors(name, x)
    if x.ndim not in (3, 4):
        raise ValueError(f"{name}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {shape_str(x.shape)}")
    require_static(name, x, range(x.ndim - 3 + 1, x.ndim))
    return x


def _window(name: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any,
            dilation: Any) -> tuple[tuple[int, int], ...]:
    """(kernel, stride, padding, dilation, output size) of a pooling window, checked as torch checks them."""
    k = pair(name, "kernel_size", kernel_size, 1)
    s = pair(name, "stride", stride, 1) if stride is not None else k
    p = pair(name, "padding", padding, 0)
    d = pair(name, "dilation", dilation, 1)
    if p[0] * 2 > k[0] or p[1] * 2 > k[1]:
        raise ValueError(f"{name}: padding {p} should be at most half of the kernel size {k}")
    h, w = x.shape[-2:]
    extent = [d[a] * (k[a] - 1) + 1 for a in range(2)]
    if h + 2 * p[0] < extent[0] or w + 2 * p[1] < extent[1]:
        raise ValueError(f"{name}: the window ({extent[0]} x {extent[1]}) is larger than the padded input "
                         f"({h + 2 * p[0]} x {w + 2 * p[1]}); input shape {shape_str(x.shape)}")
    out = ((h + 2 * p[0] - extent[0]) // s[0] + 1, (w + 2 * p[1] - extent[1]) // s[1] + 1)
    return k, s, p, d, out


def _pool(name: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any, kind: str,
          count_include_pad: bool = True) -> Tensor:
    x = _spatial_input(name, x)
    out_dtype, acc = float_dtypes(name, [x])
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = _window(name, x, kernel_size, stride, padding, dilation)
    h, w = x.shape[-2:]
    at_type = as_dtype(acc)

    def define(xv: Var) -> Any:
        def at(*i: Expr) -> Expr:
            lead, y, xx = i[:-2], i[-2], i[-1]

            def term(ky: Expr, kx: Expr) -> Expr:
                iy, ix = y * sh + ky * dh - ph, xx * sw + kx * dw - pw
                read = cast_to(xv[(*lead, iy, ix)], acc)
                if (ph, pw) == (0, 0):
                    return read
                pad_value = -math.inf if kind == "max" else 0.0
                return IfThenElse(all_of([*in_range(iy, h), *in_range(ix, w)]), read, Constant(pad_value, at_type))

            total = reduce([kh, kw], term, "max" if kind == "max" else "sum", acc)
            if kind == "avg":
                total = total / _window_count(y, xx, count_include_pad, (kh, kw), (sh, sw), (ph, pw), (h, w), acc)
            return cast_to(total, out_dtype)

        return compute("out", [*x.shape[:-2], oh, ow], at)

    attrs = {"kernel_size": (kh, kw), "stride": (sh, sw), "padding": (ph, pw), "dilation": (dh, dw)}
    if kind == "avg":
        attrs["count_include_pad"] = count_include_pad
    return apply(name, attrs, [x], define)[0]


def _window_count(y: Expr, x: Expr, include_pad: bool, k: tuple[int, int], s: tuple[int, int],
                  p: tuple[int, int], size: tuple[int, int], acc: str) -> Expr:
    """The divisor of an average window at output (y, x): the whole window, or the part inside the input."""
    if include_pad or p == (0, 0):
        return Constant(float(k[0] * k[1]), as_dtype(acc))
    extents = []
    for o, kk, ss, pp, n in zip((y, x), k, s, p, size):
        lo, hi = o * ss - pp, o * ss - pp + kk
        extents.append(Intrinsic("min", (hi, Constant(n, hi.type)), hi.type)
                       - Intrinsic("max", (lo, Constant(0, lo.type)), lo.type))
    return cast_to(extents[0] * extents[1], acc)


def max_pool2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1) -> Tensor:
    """The largest element of each `kernel_size` window (stride: the kernel size by default; padding never wins)."""
    return _pool("max_pool2d", x, kernel_size, stride, padding, dilation, "max")


def avg_pool2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               count_include_pad: bool = True) -> Tensor:
    """The mean of each `kernel_size` window; zero padding counts in the divisor unless `count_include_pad`
    is False (torch's default counts it)."""
    return _pool("avg_pool2d", x, kernel_size, stride, padding, 1, "avg", count_include_pad)


def adaptive_avg_pool2d(x: Tensor, output_size: Any) -> Tensor:
    """The mean over the bins that split H and W into `output_size` (an int, or a pair whose None entries keep
    the input's size), bin i spanning [floor(i * H / OH), ceil((i + 1) * H / OH)) as torch."""
    name = "adaptive_avg_pool2d"
    x = _spatial_input(name, x)
    out_dtype, acc = float_dtypes(name, [x])
    h, w = x.shape[-2:]
    sizes = (output_size, output_size) if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(sizes) != 2:
        raise ValueError(f"{name}: output_size must be an int or a pair, got {output_size!r}")
    oh, ow = (h if sizes[0] is None else sizes[0]), (w if sizes[1] is None else sizes[1])
    if not (isinstance(oh, int) and isinstance(ow, int) and oh >= 1 and ow >= 1):
        raise ValueError(f"{name}: output_size must be positive ints, got {output_size!r}")

    def bins(n: int, m: int) -> int:
        """The largest bin splitting n into m."""
        return max(-(-(i + 1) * n // m) - (i * n // m) for i in range(m))

    bh, bw = bins(h, oh), bins(w, ow)

    def define(xv: Var) -> Any:
        def at(*i: Expr) -> Expr:
            lead, y, xx = i[:-2], i[-2], i[-1]
            y0, y1 = (y * h) / oh, ((y + 1) * h + oh - 1) / oh
            x0, x1 = (xx * w) / ow, ((xx + 1) * w + ow - 1) / ow

            def term(ky: Expr, kx: Expr) -> Expr:
                iy, ix = y0 + ky, x0 + kx
                read = cast_to(xv[(*lead, iy, ix)], acc)
                return IfThenElse(all_of([iy < y1, ix < x1]), read, Constant(0.0, as_dtype(acc)))

            total = reduce([bh, bw], term, "sum", acc)
            return cast_to(total / cast_to((y1 - y0) * (x1 - x0), acc), out_dtype)

        return compute("out", [*x.shape[:-2], oh, ow], at)

    return apply(name, {"output_size": (oh, ow)}, [x], define)[0]
