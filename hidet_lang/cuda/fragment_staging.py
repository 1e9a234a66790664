"""A warp's mma accumulator stored through shared memory as 16-byte vectors (sm_80 and later).

An `mma.sync` accumulator leaves a lane as pairs of adjacent cells, so stored straight into an output it takes one
2-byte (or 4-byte) store a cell. `FragmentStaging` gives each warp a shared tile of its `[rows, cols]` accumulator
tile (`fragments.Accumulator`) in the output's type: `stage(acc, warp, lane)` writes the lane's cells into the warp's
tile and syncs the warp; the kernel then reads the tile back as 16-byte vectors, lane `l` taking the vectors
`lanes.on(l)` gives (`(row, vector)` of the warp's tile, consecutive lanes along a row: `copy_vector` from
`vector(warp, row, vec)` into a lane's registers), and stores each into its output with one 128-bit store where
`address_aligned` says so, element stores at the edges (where a fused epilogue applies: the stores stay in the
kernel).

The tile is a `async_copy.chunk_tile` (16-byte chunks swizzled within 128-byte lines). For 16-bit outputs neither
the lanes' pairs written (8 rows of 4 pairs a tile) nor the vectors read (128 bytes a quarter warp) share a bank;
for f32 outputs the pairs, written a cell at a time, take two ways. The 16 x 64 slice of a warp that Hopper's wgmma
accumulates has the layout of an `Accumulator(16, 64)`, so the same tile serves a wgmma accumulator (`tiles`'s
`AccumulatorStaging` is the Hopper templates' own, a pass of 64 columns at a time).

Where the tiles come from is the kernel's choice: a `SharedMemoryPlan` of their own, laid from byte 0 over the
main loop's buffers once every warp is done with them (a block barrier before `stage`), or after them.
"""

from __future__ import annotations

from typing import Any

from hidet_lang.cuda import syncwarp
from hidet_lang.cuda.async_copy import CHUNK_BYTES, chunk_tile
from hidet_lang.cuda.fragments import Accumulator
from hidet_lang.cuda.tiles import SharedMemoryPlan
from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.mapping import TaskMapping, repeat, spatial
from hidet_lang.ir.types import DataType

__all__ = ["FragmentStaging"]

WARP = 32


class FragmentStaging:
    """`warps` shared tiles of `frags`' shape in `dtype` (16- or 32-bit), `plan`'s, one a warp (see the module's
    docstring)."""

    def __init__(self, plan: SharedMemoryPlan, frags: Accumulator, dtype: DataType | str, warps: int) -> None:
        dt = as_dtype(dtype)
        if not isinstance(frags, Accumulator):
            raise TypeError(f"FragmentStaging stages an Accumulator's tile, got {frags!r}")
        if dt.nbytes not in (2, 4):
            raise ValueError(f"FragmentStaging: 16- or 32-bit elements, got {dt}")
        self.frags, self.dtype = frags, dt
        self.vector_elements = CHUNK_BYTES // dt.nbytes
        vectors = frags.cols // self.vector_elements  # a row's vectors
        if frags.cols % self.vector_elements or frags.rows * vectors % WARP:
            raise ValueError(f"FragmentStaging: a [{frags.rows}, {frags.cols}] tile of {dt} is no whole number of "
                             f"16-byte vectors a lane")
        self.tiles = plan.tiles(chunk_tile(dt, [frags.rows, frags.cols]), warps)
        self.lanes: TaskMapping = (repeat(frags.rows, vectors // WARP) * spatial(1, WARP) if vectors >= WARP
                                   else repeat(frags.rows * vectors // WARP, 1) * spatial(WARP // vectors, vectors))

    def stage(self, acc: Any, warp: Any, lane: Any) -> S.Stmt:
        """Write lane `lane`'s cells of the accumulator `acc` (`frags.tensor()`), converted to `dtype`, into the
        `warp`-th tile, then sync the warp."""
        tile = self.tiles.at(warp)
        stores: list[S.Stmt] = []
        for i, j, r in self.frags.cells(lane):
            element = semantics.element(tile, (i, j))
            stores.append(S.BufferStoreStmt(tile, element.indices,
                                            semantics.cast(semantics.element(E.convert(acc), (r,)), self.dtype)))
        stores.append(S.EvaluateStmt(syncwarp()))
        return S.seq(stores)

    def vector(self, warp: Any, row: Any, vec: Any) -> E.Expr:
        """The address of vector `vec` of row `row` of the `warp`-th tile: the source of a 16-byte `copy_vector`."""
        return E.Address(semantics.element(self.tiles.at(warp), (row, semantics.binary(
            "*", vec, self.vector_elements))))
