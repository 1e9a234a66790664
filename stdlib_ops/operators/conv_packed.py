"""`conv2d_packed`: a convolution whose weights were packed once into the panels a GEMM micro-kernel reads.

`conv2d_packed(x, panels, bias, out_channels=..., kernel=..., ...)` computes what `conv2d(x, weight, bias, ...)`
computes, with `panels` the f32 array `[groups * ceil(og / rows), cg * kh * kw, rows]` made of `weight`
(`og = out_channels / groups`, `cg = channels / groups`, `rows` the panels' height): output channel `oc` of group
`g = oc / og` is row `(oc % og) % rows` of panel `g * ceil(og / rows) + (oc % og) / rows`, and its weight for
`(ci, ky, kx)` lies at `k = (ci * kh + ky) * kw + kx` of that row (zeros past the last channel). The graph makes it
from a convolution with constant weights where a CPU template reads such panels (`stdlib_ops.graph.pack_weights`),
so the weights are packed when the graph is built instead of on every call; its compute definition is the
convolution's, reading the panels, so that any scheduler computes it.

Either side may be in the blocked channel layout (`stdlib_ops.operators.channel_blocks`): a 5-D `x`
`[N, C / c, H, W, c]` is read in blocks of its `c` channels, and `out_block` > 0 gives the output in blocks of as
many, `[N, out_channels / out_block, OH, OW, out_block]` (the graph's choice: `stdlib_ops.graph.channel_blocks`).
"""

from __future__ import annotations

from typing import Any

from hidet_lang.ir.expr import Constant, Expr, IfThenElse, Var
from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, shape_str
from stdlib_ops.operators.conv import all_of, float_dtypes, in_range, pair
from stdlib_ops.tensor import Tensor


def conv2d_packed(x: Tensor, panels: Tensor, bias: Tensor | None, *, out_channels: int, kernel: Any,
                  stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1, out_block: int = 0) -> Tensor:
    """The convolution of `x` (NCHW, or 5-D in blocks of channels) by the weights packed in `panels` (see the
    module's docstring), plus `bias` ([out_channels]) when given: out [N, out_channels, OH, OW], or in blocks of
    `out_block` channels when it is positive, in `x`'s dtype, accumulated in f32 for half precisions."""
    name = "conv2d_packed"
    inputs = as_tensors(name, *[t for t in (x, panels, bias) if t is not None])
    x, panels = inputs[0], inputs[1]
    kh, kw = pair(name, "kernel", kernel, 1)
    (sh, sw), (ph, pw), (dh, dw) = (pair(name, "stride", stride, 1), pair(name, "padding", padding, 0),
                                    pair(name, "dilation", dilation, 1))
    if x.ndim not in (4, 5) or any(isinstance(d, str) for d in x.shape[1:]):
        raise ValueError(f"{name}: expected an input [N, C, H, W] or [N, C / c, H, W, c] whose sizes other than N "
                         f"are known, got shape {shape_str(x.shape)}")
    in_block = x.shape[4] if x.ndim == 5 else 0
    n, c, h, w = x.shape[0], x.shape[1] * max(in_block, 1), x.shape[2], x.shape[3]
    if groups < 1 or c % groups or out_channels % groups:
        raise ValueError(f"{name}: {c} channels and {out_channels} output channels do not split into {groups} "
                         f"groups")
    cg, og = c // groups, out_channels // groups
    rows = panels.shape[-1] if panels.ndim == 3 else 0
    if panels.dtype != "float32" or rows < 1 or tuple(panels.shape) != (groups * -(-og // rows), cg * kh * kw, rows):
        raise ValueError(f"{name}: panels of shape {shape_str(panels.shape)} ({panels.dtype}) do not hold the "
                         f"weights of {out_channels} output channels, {cg} input channels a group and a {kh}x{kw} "
                         f"kernel as float32 [groups * panels, {cg * kh * kw}, rows]")
    if bias is not None and tuple(inputs[2].shape) != (out_channels,):
        raise ValueError(f"{name}: bias of shape {shape_str(inputs[2].shape)} does not match the {out_channels} "
                         f"output channels")
    if not isinstance(out_block, int) or out_block < 0 or (out_block and out_channels % out_block):
        raise ValueError(f"{name}: {out_channels} output channels do not split into blocks of {out_block!r}")
    out_dtype, acc = float_dtypes(name, [x])
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"{name}: the dilated {kh}x{kw} kernel is larger than the padded input "
                         f"{shape_str(x.shape)}")
    group_panels = -(-og // rows)

    def define(xv: Var, wv: Var, *bv: Var) -> Any:
        def read_x(b: Expr, ch: Expr, iy: Expr, ix: Expr) -> Expr:
            return xv[b, ch / in_block, iy, ix, ch % in_block] if in_block else xv[b, ch, iy, ix]

        def at(b: Expr, oc: Expr, y: Expr, xx: Expr) -> Expr:
            local = oc % og
            panel = (oc / og) * group_panels + local / rows

            def term(ci: Expr, ky: Expr, kx: Expr) -> Expr:
                iy, ix = y * sh + ky * dh - ph, xx * sw + kx * dw - pw
                read = cast_to(read_x(b, (oc / og) * cg + ci, iy, ix), acc)
                inside = all_of([*in_range(iy, h), *in_range(ix, w)])
                value = read if (ph, pw) == (0, 0) else IfThenElse(inside, read, Constant(0.0, as_dtype(acc)))
                return value * cast_to(wv[panel, (ci * kh + ky) * kw + kx, local % rows], acc)

            total = reduce([cg, kh, kw], term, "sum", acc)
            if bv:
                total = total + cast_to(bv[0][oc], acc)
            return cast_to(total, out_dtype)

        if out_block:
            return compute("out", [n, out_channels // out_block, oh, ow, out_block],
                           lambda b, k, y, xx, j: at(b, k * out_block + j, y, xx))
        return compute("out", [n, out_channels, oh, ow], at)

    attrs = {"out_channels": out_channels, "kernel": (kh, kw), "stride": (sh, sw), "padding": (ph, pw),
             "dilation": (dh, dw), "groups": groups, "out_block": out_block}
    return apply(name, attrs, inputs, define)[0]
