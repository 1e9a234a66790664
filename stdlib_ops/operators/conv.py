"""Convolutions with torch.nn.functional's names and semantics: `conv2d` and `conv_transpose2d` (stride, padding,
dilation, groups, optional bias), each one task; half-precision inputs accumulate in f32.

The tensors are NCHW, torch's. `conv2d(..., layout='NHWC')` takes channels-last tensors instead: x
`[N, H, W, C]`, weight `[O, KH, KW, C / groups]` and out `[N, OH, OW, O]` (the order in which torch's
`channels_last` tensors lie in memory: `x.permute(0, 2, 3, 1)` of such a tensor and of its weight are these
arrays), as the task `conv2d_nhwc`, whose GEMM gathers read channels that lie next to each other."""

from __future__ import annotations

from typing import Any

from hidet_lang.ir.expr import BinaryOp, Constant, Expr, IfThenElse, Var
from hidet_lang.ir.types import int32
from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, result_dtype, shape_str
from stdlib_ops.tensor import Tensor


def _c(v: int) -> Constant:
    return Constant(v, int32)


def pair(name: str, what: str, value: Any, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints (torch's `_pair`), each at least `minimum`."""
    values = (value, value) if isinstance(value, int) else tuple(value)
    if len(values) != 2 or not all(isinstance(v, int) for v in values):
        raise ValueError(f"{name}: {what} must be an int or a pair of ints, got {value!r}")
    if any(v < minimum for v in values):
        raise ValueError(f"{name}: {what} must be at least {minimum}, got {value!r}")
    return values[0], values[1]


def float_dtypes(name: str, tensors: list[Tensor]) -> tuple[str, str]:
    """(result dtype, accumulator dtype) of a network operator on floating-point `tensors`."""
    for t in tensors:
        if not as_dtype(t.dtype).is_float:
            raise TypeError(f"{name}: unsupported dtype {t.dtype!r} (shape {shape_str(t.shape)}); "
                            f"floating-point tensors only")
    out = result_dtype(*[t.dtype for t in tensors])
    return out, ("float32" if as_dtype(out).nbytes == 2 else out)


def require_static(name: str, x: Tensor, axes: range) -> None:
    """Raise unless the dimensions `axes` of `x` are known when the operator is made (only the batch may vary)."""
    if any(isinstance(x.shape[a], str) for a in axes):
        raise ValueError(f"{name}: only the batch dimension may be symbolic, got input shape {shape_str(x.shape)}")


def all_of(conditions: list[Expr]) -> Expr:
    """The conjunction of `conditions` (at least one)."""
    cond = conditions[0]
    for more in conditions[1:]:
        cond = BinaryOp("&&", cond, more)
    return cond


def in_range(index: Expr, size: int) -> list[Expr]:
    """The conditions `0 <= index < size`."""
    return [index >= 0, index < size]


def _check_operands(name: str, x: Tensor, w: Tensor, bias: Tensor | None, groups: int, in_axis: int,
                    out_channels: int, layout: str = "NCHW") -> None:
    """torch's checks of a convolution's input, weight and bias shapes (`in_axis`: the weight's input-channel
    axis, whose size times `groups` must be the input's channels; `out_channels`: the output's; `layout`: where
    the channels are, axis 1 of NCHW tensors, the last of NHWC ones)."""
    if x.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input ({', '.join(layout)}), got shape {shape_str(x.shape)}")
    if w.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D weight, got shape {shape_str(w.shape)}")
    require_static(name, x, range(1, 4))
    if groups < 1:
        raise ValueError(f"{name}: groups must be positive, got {groups}")
    in_channels = w.shape[0] if in_axis == 0 else w.shape[in_axis] * groups
    channels = x.shape[layout.index("C")]
    if channels != in_channels or w.shape[0] % groups:
        raise ValueError(f"{name}: given groups={groups}, weight of shape {shape_str(w.shape)} expects an input "
                         f"with {in_channels} channels divisible into the groups, got input of shape "
                         f"{shape_str(x.shape)}")
    if channels % groups:
        raise ValueError(f"{name}: {channels} input channels do not split into {groups} groups "
                         f"(input shape {shape_str(x.shape)})")
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise ValueError(f"{name}: bias of shape {shape_str(bias.shape)} does not match the {out_channels} output "
                         f"channels (weight shape {shape_str(w.shape)})")


def _padding(name: str, padding: Any, kernel: tuple[int, int], dilation: tuple[int, int],
             stride: tuple[int, int]) -> tuple[int, int]:
    """torch's padding: an int, a pair, 'valid' (none) or 'same' (stride 1 only; output as large as the input)."""
    if padding == "valid":
        return 0, 0
    if padding == "same":
        if stride != (1, 1):
            raise ValueError(f"{name}: padding='same' is not supported for strided convolutions (stride {stride})")
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        if any(t % 2 for t in total):
            raise ValueError(f"{name}: padding='same' needs an even total padding, kernel {kernel} with dilation "
                             f"{dilation} gives {tuple(total)}")
        return total[0] // 2, total[1] // 2
    return pair(name, "padding", padding, 0)


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1, layout: str = "NCHW") -> Tensor:
    """2-D convolution (cross-correlation, as torch): x [N, C, H, W], weight [O, C / groups, KH, KW], bias [O];
    out [N, O, OH, OW] with OH = (H + 2 * padding - dilation * (KH - 1) - 1) // stride + 1. With
    `layout='NHWC'`: x [N, H, W, C], weight [O, KH, KW, C / groups], out [N, OH, OW, O] (the task `conv2d_nhwc`)."""
    name = "conv2d"
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"{name}: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    nhwc = layout == "NHWC"
    given = [t for t in (x, weight, bias) if t is not None]
    inputs = as_tensors(name, *given)
    x, weight = inputs[0], inputs[1]
    bias = inputs[2] if bias is not None else None
    _check_operands(name, x, weight, bias, groups, 3 if nhwc else 1, weight.shape[0] if weight.ndim == 4 else 0,
                    layout)
    out_dtype, acc = float_dtypes(name, inputs)
    sh, sw = pair(name, "stride", stride, 1)
    dh, dw = pair(name, "dilation", dilation, 1)
    n, c, h, w = (x.shape[0], x.shape[3], x.shape[1], x.shape[2]) if nhwc else x.shape
    o, cg, kh, kw = (weight.shape[0], weight.shape[3], weight.shape[1], weight.shape[2]) if nhwc else weight.shape
    ph, pw = _padding(name, padding, (kh, kw), (dh, dw), (sh, sw))
    if h + 2 * ph < dh * (kh - 1) + 1 or w + 2 * pw < dw * (kw - 1) + 1:
        raise ValueError(f"{name}: padded input size per channel ({h + 2 * ph} x {w + 2 * pw}) is smaller than "
                         f"the dilated kernel ({dh * (kh - 1) + 1} x {dw * (kw - 1) + 1}); input shape "
                         f"{shape_str(x.shape)}, weight shape {shape_str(weight.shape)}")
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    og = o // groups

    def define(xv: Var, wv: Var, *bv: Var) -> Any:
        def at(b: Expr, oc: Expr, y: Expr, xx: Expr) -> Expr:
            def term(ci: Expr, ky: Expr, kx: Expr) -> Expr:
                iy = y * sh + ky * dh - ph
                ix = xx * sw + kx * dw - pw
                channel = (oc / og) * cg + ci
                read = cast_to(xv[b, iy, ix, channel] if nhwc else xv[b, channel, iy, ix], acc)
                inside = all_of([*in_range(iy, h), *in_range(ix, w)])
                value = read if (ph, pw) == (0, 0) else IfThenElse(inside, read, Constant(0.0, as_dtype(acc)))
                return value * cast_to(wv[oc, ky, kx, ci] if nhwc else wv[oc, ci, ky, kx], acc)

            total = reduce([cg, kh, kw], term, "sum", acc)
            if bv:
                total = total + cast_to(bv[0][oc], acc)
            return cast_to(total, out_dtype)

        if nhwc:
            return compute("out", [n, oh, ow, o], lambda b, y, xx, oc: at(b, oc, y, xx))
        return compute("out", [n, o, oh, ow], at)

    attrs = {"stride": (sh, sw), "padding": (ph, pw), "dilation": (dh, dw), "groups": groups}
    return apply("conv2d_nhwc" if nhwc else name, attrs, inputs, define)[0]


def conv_transpose2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """The transposed 2-D convolution (the gradient of `conv2d` with respect to its input), as torch:
    x [N, C, H, W], weight [C, O / groups, KH, KW], bias [O]; out [N, O, OH, OW] with
    OH = (H - 1) * stride - 2 * padding + dilation * (KH - 1) + output_padding + 1."""
    name = "conv_transpose2d"
    given = [t for t in (x, weight, bias) if t is not None]
    inputs = as_tensors(name, *given)
    x, weight = inputs[0], inputs[1]
    bias = inputs[2] if bias is not None else None
    _check_operands(name, x, weight, bias, groups, 0, weight.shape[1] * groups if weight.ndim == 4 else 0)
    out_dtype, acc = float_dtypes(name, inputs)
    sh, sw = pair(name, "stride", stride, 1)
    dh, dw = pair(name, "dilation", dilation, 1)
    ph, pw = pair(name, "padding", padding, 0)
    oph, opw = pair(name, "output_padding", output_padding, 0)
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise ValueError(f"{name}: output_padding {(oph, opw)} must be smaller than either stride {(sh, sw)} or "
                         f"dilation {(dh, dw)}")
    n, c, h, w = x.shape
    _, og, kh, kw = weight.shape
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"{name}: the output size ({oh} x {ow}) is not positive; input shape {shape_str(x.shape)}, "
                         f"weight shape {shape_str(weight.shape)}, padding {(ph, pw)}")
    cg = c // groups

    def define(xv: Var, wv: Var, *bv: Var) -> Any:
        def at(b: Expr, oc: Expr, y: Expr, xx: Expr) -> Expr:
            def term(ci: Expr, ky: Expr, kx: Expr) -> Expr:
                ty = y + ph - ky * dh  # = iy * stride for the input row iy that reaches output row y
                tx = xx + pw - kx * dw
                iy, ix = ty / sh, tx / sw
                channel = (oc / og) * cg + ci
                hits = [ty >= 0, tx >= 0, iy < h, ix < w]
                if sh > 1:
                    hits.append(BinaryOp("==", ty % sh, _c(0)))
                if sw > 1:
                    hits.append(BinaryOp("==", tx % sw, _c(0)))
                read = cast_to(xv[b, channel, iy, ix], acc) * cast_to(wv[channel, oc % og, ky, kx], acc)
                return IfThenElse(all_of(hits), read, Constant(0.0, as_dtype(acc)))

            total = reduce([cg, kh, kw], term, "sum", acc)
            if bv:
                total = total + cast_to(bv[0][oc], acc)
            return cast_to(total, out_dtype)

        return compute("out", [n, og * groups, oh, ow], at)

    attrs = {"stride": (sh, sw), "padding": (ph, pw), "output_padding": (oph, opw), "dilation": (dh, dw),
             "groups": groups}
    return apply(name, attrs, inputs, define)[0]
