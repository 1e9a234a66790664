"""Which tensors of a CPU graph travel in blocks of channels (NCHWc), and the operators that read and write them.

A convolution that the channel vectors' template computes (`conv2d_channel_vectors_cpu`) makes, per pixel, a vector
of `nr` output channels (two vectors of the machine's width); stored to NCHW, each of those channels is a store of
its own into another row of the output, and the next convolution gathers a pixel's input channels from as many
rows. In blocks of `nr` channels (`[N, C / nr, H, W, nr]`, `stdlib_ops.operators.channel_blocks`) both are runs of
memory: ResNet-18's stem took 1.05 -> 0.92 ms that way, its 64-channel 3x3 layer 1.03 -> 0.89, its 128-channel one
0.96 -> 0.85 (batch 1, alone, in turns); at 256 channels and more the stores weigh little.

`ChannelBlocks.plan` decides it for a whole graph, before its weights are packed: a tensor travels in blocks where
its producer can write them (such a convolution, or a max pooling or an element-wise operator all of whose inputs
can travel in blocks) and a convolution reads it in blocks, or a pooling or element-wise operator that can write
blocks has it as its output or as one of its inputs (such an operator goes all in blocks or not at all: its one
output converted rather than its inputs). Every other reader gets the tensor back in NCHW, through
`from_channel_blocks`, which fusion moves into that reader's kernel where it can: the conversions lie only where a
reader needs NCHW (a ResNet's global average pooling), never between two readers of blocks. The rewrite keeps the
results' bits: a convolution sums the same products in the same order in either layout, pooling and element-wise
work are exact per element.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stdlib_ops.operators.base import Operator
from stdlib_ops.operators.channel_blocks import from_channel_blocks
from stdlib_ops.operators.elementwise import add, clip, maximum, minimum, mul, relu, sub
from stdlib_ops.operators.pool import max_pool2d_blocked
from stdlib_ops.tensor import Tensor

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph

BLOCKWISE: dict[str, Callable[..., Tensor]] = {
    "add": add, "sub": sub, "mul": mul, "maximum": maximum, "minimum": minimum, "relu": relu, "clip": clip,
    "max_pool2d": max_pool2d_blocked,
}
"""The operators that compute on tensors in blocks of channels as they do in NCHW, by name: the element-wise ones
(on operands of one shape) and max pooling, with their attributes as keyword arguments."""

ConvBlocks = Callable[[Operator, bool], "tuple[bool, bool]"]
"""`(reads, writes)` of a convolution, given whether its input can travel in blocks: whether its kernel would read
its input in blocks, and whether it can write its output in them."""


@dataclass
class ChannelBlocks:
    """A graph's choice of the tensors that travel in blocks of `block` channels (`carried`: the original graph's
    tensors, by `id`), and, while the graph is rewritten, the blocked form of each rewritten tensor that has one."""

    block: int
    carried: set[int] = field(default_factory=set)
    reads: set[int] = field(default_factory=set)
    blocked: dict[int, Tensor] = field(default_factory=dict)

    @classmethod
    def plan(cls, graph: FlowGraph, block: int, conv_blocks: ConvBlocks) -> ChannelBlocks:
        """The tensors of `graph` worth carrying in blocks of `block` channels (see the module's docstring), the
        convolutions' abilities given by `conv_blocks`."""
        able: set[int] = set()  # tensors whose producer can write blocks
        conv_reads: set[int] = set()  # convolutions that read blocks where their input is in blocks
        for op in graph.nodes:
            out = op.outputs[0]
            if op.name == "conv2d":
                reads, writes = conv_blocks(op, id(op.inputs[0]) in able)
                if reads:
                    conv_reads.add(id(op))
                if writes:
                    able.add(id(out))
            elif _blockwise(op) and all(id(t) in able for t in op.inputs):
                able.add(id(out))
        plan = cls(block)
        plan.reads = {id(op) for op in graph.nodes if id(op) in conv_reads and id(op.inputs[0]) in able}
        plan.carried = {id(op.inputs[0]) for op in graph.nodes if id(op) in plan.reads}
        blockwise = [op for op in graph.nodes if _blockwise(op) and id(op.outputs[0]) in able]
        grown = True
        while grown:  # an operator that can write blocks does where its output or an input travels in them
            grown = False
            for op in blockwise:
                ids = {id(op.outputs[0]), *(id(t) for t in op.inputs)}
                if ids & plan.carried and not ids <= plan.carried:
                    plan.carried |= ids
                    grown = True
        return plan

    def writes(self, op: Operator) -> bool:
        """Whether `op` (of the planned graph) writes its output in blocks."""
        return id(op.outputs[0]) in self.carried

    def input_of(self, op: Operator, x: Tensor) -> Tensor:
        """The input convolution `op` reads for its rewritten input `x`: its blocks where `op` reads blocks."""
        return self.blocked[id(x)] if id(op) in self.reads else x

    def result(self, blocks: Tensor) -> list[Tensor]:
        """The rewritten outputs of an operator that wrote `blocks`: the tensor in NCHW (read by whatever does not
        take blocks; dropped where nothing does), whose blocked form is remembered."""
        nchw = from_channel_blocks(blocks)
        self.blocked[id(nchw)] = blocks
        return [nchw]

    def rewrite(self, op: Operator, inputs: list[Tensor]) -> list[Tensor] | None:
        """The outputs of a pooling or element-wise `op` that writes blocks, computed on its inputs' blocks (None
        for any other operator: the caller's rule decides)."""
        if op.name == "conv2d" or not self.writes(op) or not all(id(t) in self.blocked for t in inputs):
            return None
        return self.result(BLOCKWISE[op.name](*(self.blocked[id(t)] for t in inputs), **op.task.attrs))


def _blockwise(op: Operator) -> bool:
    """Whether `op` computes the same on blocks: max pooling of a 4-D tensor, or an element-wise `BLOCKWISE`
    operator on 4-D operands of its output's shape."""
    if op.name not in BLOCKWISE or len(op.outputs) != 1 or op.outputs[0].ndim != 4:
        return False
    if op.name == "max_pool2d":
        return len(op.inputs) == 1
    return all(tuple(t.shape) == tuple(op.outputs[0].shape) for t in op.inputs)
