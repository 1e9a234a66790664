"""The blocked channel layout (NCHWc) in which a CPU graph keeps the tensors between its convolutions:
`to_channel_blocks(x, block)` takes `[N, C, H, W]` to `[N, C / block, H, W, block]` and `from_channel_blocks(x)`
takes it back. Element `(b, ch, y, x)` of the NCHW tensor lies at `[b, ch // block, y, x, ch % block]`, so that a
pixel's `block` channels are one run of memory: a convolution computing a vector of output channels a pixel stores
it whole, and the next one reads its input channels' runs (`stdlib_ops.graph.channel_blocks` chooses where). Each
is an index map (with its inverse, so that fusion moves it into a neighbouring kernel)."""

from __future__ import annotations

from typing import Any

from hidet_lang.ir.expr import Var
from stdlib_ops.compute import compute
from stdlib_ops.operators.base import apply, as_tensors, shape_str
from stdlib_ops.operators.transform import index_inverse
from stdlib_ops.tensor import Tensor


def to_channel_blocks(x: Tensor, block: int) -> Tensor:
    """NCHW `x` in blocks of `block` channels: `[N, C / block, H, W, block]` (C a multiple of `block`)."""
    (x,) = as_tensors("to_channel_blocks", x)
    if x.ndim != 4 or not isinstance(x.shape[1], int):
        raise ValueError(f"to_channel_blocks: expected an input [N, C, H, W] with C known, got shape "
                         f"{shape_str(x.shape)}")
    n, c, h, w = x.shape
    if not isinstance(block, int) or block < 1 or c % block:
        raise ValueError(f"to_channel_blocks: {c} channels do not split into blocks of {block!r}")

    def define(xv: Var) -> Any:
        return compute("out", [n, c // block, h, w, block], lambda b, k, y, u, j: xv[b, k * block + j, y, u])

    return apply("to_channel_blocks", {"block": block}, [x], define,
                 index_inverse(4, lambda a: (a[0], a[1] / block, a[2], a[3], a[1] % block)))[0]


def from_channel_blocks(x: Tensor) -> Tensor:
    """`[N, C / c, H, W, c]` `x` back in NCHW: `[N, C, H, W]`."""
    (x,) = as_tensors("from_channel_blocks", x)
    if x.ndim != 5 or not isinstance(x.shape[4], int):
        raise ValueError(f"from_channel_blocks: expected an input [N, C / c, H, W, c] with c known, got shape "
                         f"{shape_str(x.shape)}")
    n, blocks, h, w, block = x.shape

    def define(xv: Var) -> Any:
        return compute("out", [n, blocks * block, h, w], lambda b, ch, y, u: xv[b, ch / block, y, u, ch % block])

    return apply("from_channel_blocks", {}, [x], define,
                 index_inverse(5, lambda a: (a[0], a[1] * block + a[4], a[2], a[3])))[0]
