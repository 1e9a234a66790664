"""Constant weights packed once, when a graph is built for the CPU, into the panels its kernels read.

The implicit-GEMM convolution on the CPU (`conv2d_gemm_cpu`) reads its weights as `mr`-row panels along k; packed
by the kernel, every macro tile gathers them again on every call (strided reads of `mr` rows at a time). Where the
weights are a constant of the graph, `pack_weights_for` replaces the convolution by `conv2d_packed` on the panels
`pack_conv2d_weights` makes of them with numpy, once; the panels are a constant of the compiled graph (saved with
it) and the kernel reads them where they lie. Only the convolutions the library's implicit GEMM would compute are
replaced (not a user's template, not the direct schedule of depthwise convolutions), so the results are the same
bits: the kernel multiplies the same f32 weights in the same order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hidet_lang.target import Target
from stdlib_ops.graph.partition import partition
from stdlib_ops.graph.rewrite import replay
from stdlib_ops.operators.base import Operator
from stdlib_ops.operators.conv_packed import conv2d_packed
from stdlib_ops.templates.cpu_lanes import machine_lanes
from stdlib_ops.templates.kernels.conv2d_cpu import pack_conv2d_weights
from stdlib_ops.templates.registry import template_choice
from stdlib_ops.tensor import Tensor, asarray

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph


def pack_weights_for(graph: FlowGraph, target: Target) -> FlowGraph:
    """`graph` with each convolution that the CPU implicit GEMM computes on `target` from constant weights made a
    `conv2d_packed` on its weights' panels, partitioned again if it was partitioned (the same graph where none is)."""
    if target.is_cuda or machine_lanes() is None:
        return graph
    replaced = {id(op) for op in graph.nodes if _packable(op, target)}
    if not replaced:
        return graph

    def rule(op: Operator, inputs: list[Tensor]) -> list[Tensor] | None:
        if id(op) not in replaced:
            return None
        x, weight, *bias = inputs
        attrs = op.task.attrs
        panels = asarray(pack_conv2d_weights(weight.numpy(), attrs["groups"]), device=x.device)
        return [conv2d_packed(x, panels, bias[0] if bias else None, out_channels=weight.shape[0],
                              kernel=tuple(weight.shape[2:]), stride=attrs["stride"], padding=attrs["padding"],
                              dilation=attrs["dilation"], groups=attrs["groups"])]

    rewritten = replay(graph, rule=rule, fold=False)
    return partition(rewritten) if graph.groups is not None else rewritten


def _packable(op: Operator, target: Target) -> bool:
    """Whether `op` is a convolution with constant weights that the library's implicit GEMM computes on `target`."""
    if op.name != "conv2d" or op.inputs[1].is_symbolic:
        return False
    binding = template_choice(op.task, target).binding
    return binding is not None and binding.name == "conv2d_gemm_cpu"
