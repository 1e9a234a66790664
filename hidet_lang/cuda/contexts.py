"""Blocks of a CUDA kernel that only some of its threads run, entered with `with` (Hidet's `hidet.lang.cuda.contexts`).

`with warp_groups([1, 2]) as tid:` runs its body in the threads of warp groups 1 and 2 of a one-dimensional block
(a warp group is 4 warps, 128 consecutive threads; groups 1 and 2 are threads 128 to 383), `tid` being the thread's
index among them (`threadIdx.x - 128`). Hopper GPUs schedule warp groups together (warp specialization); on
any GPU, and on the CUDA emulator, the block is an `if` on the thread index.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from hidet_lang.cuda import threadIdx
from hidet_lang.frontend import semantics
from hidet_lang.frontend.blocks import BlockBuilder, BlockConstruct
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.types import int32

WARP_GROUP_THREADS = 128
"""Threads in a warp group: 4 warps of 32."""


@dataclass(frozen=True)
class WarpGroups(BlockConstruct):
    """The warp groups `first` to `last` (consecutive) of the block."""

    first: int
    last: int

    def build(self, parser: BlockBuilder, node: ast.With, name: str | None) -> S.Stmt:
        """`if (first * 128 <= threadIdx.x < (last + 1) * 128) { int tid = threadIdx.x - first * 128; body }`."""
        low, high = self.first * WARP_GROUP_THREADS, (self.last + 1) * WARP_GROUP_THREADS
        x = threadIdx.x
        inside = semantics.binary("&&", semantics.binary(">=", x, low), semantics.binary("<", x, high))
        tid = E.Var(parser.fresh_name(name or "tid"), int32)
        body = parser.block(node.body, {name: tid} if name else None, run_time="a warp_groups(...) block")
        return S.IfStmt(inside, S.seq([S.DeclareStmt(tid, semantics.binary("-", x, low)), body]))


def warp_groups(group_ids: Sequence[int]) -> WarpGroups:
    """The block run by the threads of the listed warp groups (consecutive ints, ascending), `as` the thread's
    index among them."""
    ids = list(group_ids)
    if not ids or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in ids):
        raise ValueError(f"warp_groups takes a list of warp group indices (ints from 0), got {group_ids!r}")
    if ids != list(range(ids[0], ids[0] + len(ids))):
        raise ValueError(f"warp_groups takes consecutive warp groups in ascending order, got {ids}")
    return WarpGroups(ids[0], ids[-1])


__all__ = ["WARP_GROUP_THREADS", "WarpGroups", "warp_groups"]
