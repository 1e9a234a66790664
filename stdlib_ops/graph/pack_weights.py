"""Constant weights packed once, when a graph is built for the CPU, into the panels its kernels read.

Matrix products by a constant matrix (a linear layer's weights) are packed the same way: `pack_weights_for`
replaces a matmul that the CPU matmul template computes, whose right operand is a constant f32 or f16 matrix and
whose left one has rows (not a vector), by `matmul_packed` on the panels `pack_matmul_weights` makes of it; the
template reads them where they lie instead of packing its block of them in every macro tile of every call, with
the same products in the same order.

The implicit-GEMM convolution on the CPU (`conv2d_gemm_cpu`) reads its weights as `mr`-row panels along k; packed
by the kernel, every macro tile gathers them again on every call (strided reads of `mr` rows at a time). Where the
weights are a constant of the graph, `pack_weights_for` replaces the convolution by `conv2d_packed` on the panels
`pack_conv2d_weights` makes of them with numpy, once; the panels are a constant of the compiled graph (saved with
it) and the kernel reads them where they lie. Only the convolutions the library's implicit GEMM would compute are
replaced (not a user's template, not the direct schedule of depthwise convolutions). The panels' height picks the
kernel: two vectors of channels for the direct template `conv2d_channel_vectors_cpu` where it suits the
convolution (`suits_channel_vectors`: 1.3 to 1.6 times faster on ResNet-18's 3x3 layers), else the GEMM's `mr`.
Either way the results are the same bits as the eager convolution's: each output is one chain of fused
multiply-adds of the same f32 values over the taps in order, from zero, the bias added last.

The same pass chooses the tensors that travel in blocks of `nr` channels between the channel vectors' convolutions
(`stdlib_ops.graph.channel_blocks`), since that choice and the panels' height depend on each other: a 1x1
convolution, the GEMM's in NCHW, is the channel vectors' where its input comes in blocks (whose runs of channels its
slab copies whole).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hidet_lang.target import Target
from stdlib_ops.graph.channel_blocks import ChannelBlocks
from stdlib_ops.graph.partition import partition
from stdlib_ops.graph.rewrite import replay
from stdlib_ops.operators.base import Operator
from stdlib_ops.operators.conv_packed import conv2d_packed
from stdlib_ops.operators.matmul_packed import matmul_packed
from stdlib_ops.templates.cpu_lanes import machine_lanes
from stdlib_ops.templates.kernels.conv2d_cpu import pack_conv2d_weights
from stdlib_ops.templates.kernels.conv2d_cpu_channels import (
    band_rows,
    blocks_fit,
    panel_channels,
    suits_channel_vectors,
)
from stdlib_ops.templates.kernels.matmul_cpu import pack_matmul_weights
from stdlib_ops.templates.registry import template_choice
from stdlib_ops.tensor import Tensor, asarray

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph


def pack_weights_for(graph: FlowGraph, target: Target) -> FlowGraph:
    """`graph` with each convolution that the CPU implicit GEMM computes on `target` from constant weights made a
    `conv2d_packed` on its weights' panels (reading and writing blocks of channels where `ChannelBlocks.plan`
    says), and each matmul by a constant matrix that the CPU matmul template computes a `matmul_packed` on the
    matrix's panels, partitioned again if it was partitioned (the same graph where none is)."""
    lanes = machine_lanes()
    if target.is_cuda or lanes is None:
        return graph
    replaced = {id(op) for op in graph.nodes if _packable(op, target)}
    if not replaced:
        return graph

    matrices: dict[int, Tensor] = {}
    nr = panel_channels(lanes)
    blocks = ChannelBlocks.plan(graph, nr, lambda op, able: _conv_blocks(op, able, nr, lanes)
                                if id(op) in replaced else (False, False))

    def rule(op: Operator, inputs: list[Tensor]) -> list[Tensor] | None:
        if id(op) not in replaced:
            return blocks.rewrite(op, inputs)
        if op.name == "matmul":
            x, weight = inputs
            if id(weight) not in matrices:  # a matrix that several matmuls read is packed once
                matrices[id(weight)] = asarray(pack_matmul_weights(weight.numpy()), device=x.device)
            return [matmul_packed(x, matrices[id(weight)], n=weight.shape[1])]
        x, weight, *bias = inputs
        attrs = op.task.attrs
        writes = blocks.writes(op)  # only a convolution of the channel vectors' template writes blocks
        rows = nr if id(op) in blocks.reads or _channel_vectors(op, lanes) else None  # (a 1x1 one reads them)
        panels = asarray(pack_conv2d_weights(weight.numpy(), attrs["groups"], rows=rows), device=x.device)
        out = conv2d_packed(blocks.input_of(op, x), panels, bias[0] if bias else None, out_channels=weight.shape[0],
                            kernel=tuple(weight.shape[2:]), stride=attrs["stride"], padding=attrs["padding"],
                            dilation=attrs["dilation"], groups=attrs["groups"], out_block=nr if writes else 0)
        return blocks.result(out) if writes else [out]

    rewritten = replay(graph, rule=rule, fold=False)
    return partition(rewritten) if graph.groups is not None else rewritten


def _geometry(op: Operator) -> tuple:
    """`(channels, height, width, out_channels, kernel, stride, padding, dilation, groups)` of convolution `op`."""
    (_, c, h, w), (o, _, kh, kw), attrs = op.inputs[0].shape, op.inputs[1].shape, op.task.attrs
    return c, h, w, o, (kh, kw), attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"]


def _channel_vectors(op: Operator, lanes: int) -> bool:
    """Whether convolution `op` on NCHW is the channel vectors' template's (`suits_channel_vectors`)."""
    return suits_channel_vectors(*_geometry(op), lanes)


def _conv_blocks(op: Operator, able: bool, block: int, lanes: int) -> tuple[bool, bool]:
    """`(reads, writes)` blocks of `block` channels for convolution `op` (`ChannelBlocks.plan`), its input `able`
    to come in blocks: the channel vectors' template computes it (as on NCHW, or a 1x1 kernel whose input comes in
    blocks) with its groups' channels in whole blocks on either side."""
    c, h, w, o, kernel, stride, padding, dilation, groups = _geometry(op)
    reads = blocks_fit(c, o, groups, block, 0, lanes)
    one_tap = (kernel == (1, 1) and able and reads
               and band_rows(c // groups, h, w, kernel, stride, padding, dilation) >= 1)
    if not (_channel_vectors(op, lanes) or one_tap):
        return False, False
    return reads, blocks_fit(c, o, groups, 0, block, lanes)


def _packable(op: Operator, target: Target) -> bool:
    """Whether `op` is a convolution with constant weights that the library's implicit GEMM computes on `target`,
    or a matmul of rows by a constant f32 or f16 matrix that the library's matmul template computes there."""
    if op.name not in PACKED_TEMPLATES or op.inputs[1].is_symbolic:
        return False
    if op.name == "matmul" and (op.inputs[1].ndim != 2 or op.inputs[1].dtype not in ("float32", "float16")
                                or op.inputs[0].ndim < 2 or op.task.attrs.get("vector_operands")):
        return False
    binding = template_choice(op.task, target).binding
    return binding is not None and binding.name == PACKED_TEMPLATES[op.name]


PACKED_TEMPLATES = {"conv2d": "conv2d_gemm_cpu", "matmul": "matmul_cpu"}
"""The operators whose constant weights are packed, and the library template that reads the panels."""
