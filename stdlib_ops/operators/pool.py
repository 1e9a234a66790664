"""Pooling over the last two axes of (N, C, H, W) or (C, H, W) tensors, with torch.nn.functional's signatures:
`max_pool2d`, `avg_pool2d` (stride defaults to the kernel size; padding counted in the average unless
`count_include_pad=False`; `ceil_mode`, `divisor_override`), `adaptive_avg_pool2d`; each one task. And
`max_pool2d_blocked`, max_pool2d over the blocked channel layout the graph gives convolutions' outputs
([N, C/c, H, W, c]: the spatial axes are -3 and -2, a block of c channels is the last axis)."""

from __future__ import annotations

import math
import numbers
from typing import Any

from hidet_lang.ir.expr import Constant, Expr, IfThenElse, Intrinsic, Var
from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, shape_str
from stdlib_ops.operators.conv import all_of, float_dtypes, in_range, pair, require_static
from stdlib_ops.tensor import Tensor

NCHW_SPATIAL = (-2, -1)
"""The axes of H and W in (N, C, H, W) and (C, H, W) tensors."""
BLOCKED_SPATIAL = (-3, -2)
"""The axes of H and W in blocked (N, C/c, H, W, c) tensors."""


def _spatial_input(name: str, x: Any, spatial: tuple[int, int] = NCHW_SPATIAL) -> Tensor:
    """`x` as a tensor, checked to be (C, H, W) or (N, C, H, W) (`NCHW_SPATIAL`) or (N, C/c, H, W, c)
    (`BLOCKED_SPATIAL`), with every size but the batch known."""
    (x,) = as_tensors(name, x)
    if spatial == BLOCKED_SPATIAL:
        if x.ndim != 5:
            raise ValueError(f"{name}: expected a 5-D (N, C/c, H, W, c) input (channels in blocks of c), got shape "
                             f"{shape_str(x.shape)}")
        require_static(name, x, range(1, 5))
        return x
    if x.ndim not in (3, 4):
        raise ValueError(f"{name}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {shape_str(x.shape)}")
    require_static(name, x, range(x.ndim - 3 + 1, x.ndim))
    return x


def _window(name: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
            ceil_mode: bool, spatial: tuple[int, int] = NCHW_SPATIAL) -> tuple[tuple[int, int], ...]:
    """(kernel, stride, padding, dilation, output size) of a pooling window over the axes `spatial` of `x`, checked
    as torch checks them."""
    k = pair(name, "kernel_size", kernel_size, 1)
    s = pair(name, "stride", stride, 1) if stride is not None else k
    p = pair(name, "padding", padding, 0)
    d = pair(name, "dilation", dilation, 1)
    if p[0] * 2 > k[0] or p[1] * 2 > k[1]:
        raise ValueError(f"{name}: padding {p} should be at most half of the kernel size {k}")
    h, w = (x.shape[a] for a in spatial)
    extent = [d[a] * (k[a] - 1) + 1 for a in range(2)]
    if h + 2 * p[0] < extent[0] or w + 2 * p[1] < extent[1]:
        raise ValueError(f"{name}: the window ({extent[0]} x {extent[1]}) is larger than the padded input "
                         f"({h + 2 * p[0]} x {w + 2 * p[1]}); input shape {shape_str(x.shape)}")
    out = tuple(_output_size(n, extent[a], s[a], p[a], ceil_mode) for a, n in enumerate((h, w)))
    return k, s, p, d, out


def _output_size(n: int, extent: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """How many windows of `extent` fit along an axis of size `n` padded by `pad` on each side, rounding up with
    `ceil_mode` (a last, partial window), as long as that window starts inside the input or its left padding."""
    span = n + 2 * pad - extent
    if not ceil_mode:
        return span // stride + 1
    size = -(-span // stride) + 1
    return size - 1 if (size - 1) * stride >= n + pad else size


def _overhangs(out: tuple[int, int], d: tuple[int, int], k: tuple[int, int], s: tuple[int, int],
               p: tuple[int, int], size: tuple[int, int]) -> bool:
    """Whether the last window of `ceil_mode` reaches past the padded input on either axis."""
    return any((o - 1) * ss + dd * (kk - 1) + 1 > n + 2 * pp for o, dd, kk, ss, pp, n in zip(out, d, k, s, p, size))


def _pool(name: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
          kind: str, count_include_pad: bool = True, divisor_override: int | None = None,
          spatial: tuple[int, int] = NCHW_SPATIAL) -> Tensor:
    """The task pooling `x` (max or avg, `kind`) over its axes `spatial` (`NCHW_SPATIAL` or `BLOCKED_SPATIAL`);
    the other axes index the windows' planes."""
    x = _spatial_input(name, x, spatial)
    out_dtype, acc = float_dtypes(name, [x])
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = _window(name, x, kernel_size, stride, padding, dilation,
                                                               ceil_mode, spatial)
    h, w = (x.shape[a] for a in spatial)
    at_type = as_dtype(acc)
    overhang = _overhangs((oh, ow), (dh, dw), (kh, kw), (sh, sw), (ph, pw), (h, w))
    axis_y, axis_x = (a % x.ndim for a in spatial)
    out_shape = [*x.shape]
    out_shape[axis_y], out_shape[axis_x] = oh, ow

    def define(xv: Var) -> Any:
        def at(*i: Expr) -> Expr:
            y, xx = i[axis_y], i[axis_x]

            def term(ky: Expr, kx: Expr) -> Expr:
                iy, ix = y * sh + ky * dh - ph, xx * sw + kx * dw - pw
                index = [*i]
                index[axis_y], index[axis_x] = iy, ix
                read = cast_to(xv[tuple(index)], acc)
                if (ph, pw) == (0, 0) and not overhang:
                    return read
                pad_value = -math.inf if kind == "max" else 0.0
                return IfThenElse(all_of([*in_range(iy, h), *in_range(ix, w)]), read, Constant(pad_value, at_type))

            total = reduce([kh, kw], term, "max" if kind == "max" else "sum", acc)
            if kind == "avg":
                divisor = (Constant(float(divisor_override), at_type) if divisor_override is not None else
                           _window_count(y, xx, count_include_pad, overhang, (kh, kw), (sh, sw), (ph, pw), (h, w),
                                         acc))
                total = total / divisor
            return cast_to(total, out_dtype)

        return compute("out", out_shape, at)

    attrs = {"kernel_size": (kh, kw), "stride": (sh, sw), "padding": (ph, pw), "dilation": (dh, dw),
             "ceil_mode": ceil_mode}
    if kind == "avg":
        attrs.update(count_include_pad=count_include_pad, divisor_override=divisor_override)
    return apply(name, attrs, [x], define)[0]


def _window_count(y: Expr, x: Expr, include_pad: bool, overhang: bool, k: tuple[int, int], s: tuple[int, int],
                  p: tuple[int, int], size: tuple[int, int], acc: str) -> Expr:
    """The divisor of an average window at output (y, x), as torch's: the part of the window inside the padded
    input (`include_pad`) or inside the input."""
    if not overhang and (include_pad or p == (0, 0)):
        return Constant(float(k[0] * k[1]), as_dtype(acc))
    extents = []
    for o, kk, ss, pp, n in zip((y, x), k, s, p, size):
        lo = o * ss - pp
        limit = n + pp if include_pad else n
        hi = Intrinsic("min", (lo + kk, Constant(limit, lo.type)), lo.type)
        extents.append(hi - (lo if include_pad else Intrinsic("max", (lo, Constant(0, lo.type)), lo.type)))
    return cast_to(extents[0] * extents[1], acc)


def max_pool2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """torch.nn.functional.max_pool2d: the largest element of each `kernel_size` window (stride: the kernel size
    by default; padding never wins; `ceil_mode` adds a last, partial window where one remains). return_indices=True
    is not supported."""
    if return_indices:
        raise ValueError("max_pool2d: return_indices=True is not supported")
    return _pool("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode, "max")


def max_pool2d_blocked(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                       ceil_mode: bool = False) -> Tensor:
    """`max_pool2d` over a blocked channel layout: `x` is [N, C/c, H, W, c] (N may be symbolic, the other sizes
    are known), channel `ch` of image `b` at [b, ch // c, :, :, ch % c], and so is the result, [N, C/c, OH, OW, c]:
    `out[b, k, y, x, j]` is the largest of `x[b, k, iy, ix, j]` over the window of output (y, x), with max_pool2d's
    arguments and semantics (padding never wins, a NaN in the window gives NaN, `ceil_mode`'s last, partial
    window). The graph gives convolutions' outputs this layout, and the pooling after them reads and writes it."""
    return _pool("max_pool2d_blocked", x, kernel_size, stride, padding, dilation, ceil_mode, "max",
                 spatial=BLOCKED_SPATIAL)


def avg_pool2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """torch.nn.functional.avg_pool2d: the mean of each `kernel_size` window; the zero padding counts in the
    divisor unless `count_include_pad` is False, and `divisor_override` (a nonzero int) replaces the divisor.
    `ceil_mode` adds a last, partial window where one remains (divided by its part inside the padded input, or
    inside the input without `count_include_pad`)."""
    if divisor_override is not None and (isinstance(divisor_override, bool) or divisor_override == 0
                                         or not isinstance(divisor_override, numbers.Integral)):
        raise ValueError(f"avg_pool2d: divisor_override must be a nonzero int, got {divisor_override!r}")
    return _pool("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode, "avg", count_include_pad,
                 None if divisor_override is None else int(divisor_override))


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
