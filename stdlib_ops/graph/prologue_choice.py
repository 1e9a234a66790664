"""Where a prologue would move an anchor off its fastest template, whether to fuse it or run it as kernels of its
own: a cost model of the two choices, and the note the compiled graph's printout gives for the one taken.

A kernel that reads an input whole through a tensor map (the Hopper matmul's TMA copies) has no element read for a
prologue to ride; fusing the prologue means taking the template's fallback (the tensor-core template that reads
elements), which is slower on the same arithmetic. Running the prologue on its own costs a write and a read of each
tensor it computes instead. With `F` the anchor's arithmetic, `B` those bytes:

    fused:    F / (PEAK_FLOPS * FALLBACK_SPEED)
    detached: F / PEAK_FLOPS + 2 * B / BANDWIDTH

and the cheaper one is taken. The peak and the bandwidth are an H100's or H200's (dense f16 tensor cores, HBM3);
`FALLBACK_SPEED` is the fallback's speed relative to the fast template's as their goals put it (0.7x against 1.0x
cuBLAS). Symbolic sizes count as `SYMBOLIC_SIZE`. A binding that states no arithmetic (`TemplateBinding.flops`)
keeps its prologue fused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hidet_lang.ir.types import dtype_from_name
from hidet_lang.target import Target
from stdlib_ops.graph.partition import FusionGroup
from stdlib_ops.templates.registry import prologue_alternatives
from stdlib_ops.tensor import Tensor

PEAK_FLOPS = 989e12  # an H100's or H200's dense f16/bf16 tensor-core peak, in operations a second
BANDWIDTH = 4.8e12  # an H200's memory bandwidth, in bytes a second
FALLBACK_SPEED = 0.7  # the element-reading fallback's throughput relative to the fast template's
SYMBOLIC_SIZE = 4096  # what a size unknown at build time counts as


@dataclass(frozen=True)
class PrologueChoice:
    """The choice for a group's prologues: `detach` them (kernels of their own) or fuse them; `note` says why, for
    the compiled graph's printout."""

    detach: bool
    note: str


def choose_prologue_path(group: FusionGroup, target: Target) -> PrologueChoice | None:
    """Whether `group`'s prologues are fused into its anchor or run on their own on `target`; None where fusing
    them keeps the anchor on the template it takes without them (nothing to choose)."""
    if not group.prologues:
        return None
    alternatives = prologue_alternatives(group.anchor.task, target)
    if alternatives is None:
        return None
    fast, fallback = alternatives
    if fast.flops is None:
        return PrologueChoice(False, f"prologue fused: {fast.name} reads its inputs whole, so the kernel is "
                                     f"{fallback.name}")
    flops = fast.flops({name: _size(dim) for name, dim in fast.sizes.items()})
    written = sum(_bytes(t) for op in group.prologues for t in op.outputs)
    fused_s = flops / (PEAK_FLOPS * FALLBACK_SPEED)
    detached_s = flops / PEAK_FLOPS + 2 * written / BANDWIDTH
    if detached_s < fused_s:
        return PrologueChoice(True, f"prologue run as its own kernel: {fast.name} reads its inputs whole "
                                    f"(estimated {fused_s / detached_s:.2f}x faster than fusing it into "
                                    f"{fallback.name})")
    return PrologueChoice(False, f"prologue fused: the kernel is {fallback.name}, not {fast.name}, which reads its "
                                 f"inputs whole (estimated {detached_s / fused_s:.2f}x faster than a kernel of its "
                                 f"own)")


def _size(dim: object) -> int:
    """A template size as an int (`SYMBOLIC_SIZE` for one known only at run time)."""
    return dim if isinstance(dim, int) else SYMBOLIC_SIZE


def _bytes(t: Tensor) -> int:
    """The bytes of `t`, its symbolic dimensions counted as `SYMBOLIC_SIZE`."""
    return math.prod(_size(d) for d in t.shape) * dtype_from_name(t.dtype).nbytes
