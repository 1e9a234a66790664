"""The tile layer: a tensor-core kernel's shared memory, pipeline and epilogue named in tiles, not byte offsets.

A Hopper kernel moves tiles: TMA copies them into swizzled shared memory, wgmma reads them through descriptors, a
ring of stages with full and empty mbarriers hands them from the producer to the consumers, and the accumulators
leave through shared memory. Written by hand, each of these is byte arithmetic (`a_bytes + s * stage_bytes + j *
TILE_BYTES`), barrier phases (`(it // stages + 1) % 2`) and fragment indices (`lane // 4 + 8 * (r // 2 % 2)`), the
same in every template. Here each is a value built while the template is built, whose methods a kernel calls like
any Python helper (they run while the kernel is parsed and give IR):

- `swizzled_tile(dtype, [rows, cols])`: the tensor type of a shared tile as TMA writes it and wgmma reads it (atoms
  of one swizzle row side by side where `cols` is wider); `tile_tensor_map(tile, shape, rows)` the tensor map whose
  boxes fill it, so that the swizzle has one source: the tile's layout.
- `SharedMemoryPlan`: a kernel's dynamic shared memory, laid out in order of request: `plan.tiles(tile, count)`
  (`SharedTiles`: `.at(i)` the i-th tile as a tensor, `.address(i, row, atom)` where a copy into it lands),
  `plan.barriers(count)` (`SharedBarriers`), `plan.ring(stages, releases)` (`StageRing`), `plan.nbytes`.
- `StageRing`: `stages` buffers' full and empty barriers and their phases: the producer `acquire`s stage `it`
  (waits for it to be free) and announces its bytes (`expect`), copies complete on `full(it)`; a consumer `wait`s
  for it and `release`s it by one elected arrival (on every block of a cluster whose producers fill it).
- `WarpgroupTurns` (`plan.turns(groups)`): warpgroups taking turns in order, the ping-pong of two consumers.
- `AccumulatorStaging`: the store of a warpgroup's 64xN wgmma accumulator through shared memory, a warp at a time:
  each warp writes its 16 rows, 64 columns a pass, into a padded tile no two lanes of a store share a bank of, and
  reads them back as 16-byte vectors (`lanes`: the task mapping of a lane's vectors), which the kernel stores into
  its output with 128-bit stores, element stores at the edges (where a fused epilogue applies).

Every method checks its arguments while the template is built, so a wrong tile, stage or barrier count fails at
the line that asks for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hidet_lang.cuda import dynamic_shared_memory, syncwarp
from hidet_lang.cuda.cluster import mbarrier_arrive_cluster
from hidet_lang.cuda.mbarrier import mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait
from hidet_lang.cuda.tma import TensorMap
from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.frontend.builtins import view
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.layout import Layout, SwizzledLayout, row_major, strided_layout, swizzle_alignment, swizzled_layout
from hidet_lang.ir.mapping import TaskMapping, repeat, spatial
from hidet_lang.ir.tensor_map import TensorMapType
from hidet_lang.ir.types import DataType, TensorType, int32, uint32, uint64

BARRIER_BYTES = 8  # an mbarrier
VECTOR_BYTES = 16  # a 128-bit access
WARP = 32
WARPGROUP_WARPS = 4
WARPGROUP_THREADS = 128
WARP_ROWS = 16  # the rows of a 64-row wgmma accumulator that one warp of the warpgroup holds
STAGING_COLUMNS = 64  # the columns of the accumulator a warp stages at a time
STAGING_PAD = 8  # elements after each staged row: rows 4 (16-bit) or 8 (32-bit) banks apart, no two lanes collide


def swizzled_tile(dtype: DataType | str, shape: Sequence[int], swizzle: int = 128) -> TensorType:
    """The tensor type of a shared `[rows, cols]` tile as TMA writes it with `swizzle` (bytes: 32, 64 or 128) and
    wgmma reads it: rows of `swizzle` bytes in atoms of 8 rows, and where `cols` spans more than one such row, its
    atoms of `swizzle` bytes' columns side by side (a `[64, 256]` f16 tile is four `[64, 64]` atoms, one after the
    other), as a wgmma descriptor spanning several atoms expects."""
    dt = as_dtype(dtype)
    rows, cols = _pair(shape, "swizzled_tile(): the shape")
    if swizzle not in (32, 64, 128):
        raise ValueError(f"swizzled_tile(): swizzle is 32, 64 or 128 (bytes), got {swizzle!r}")
    atom_cols = swizzle // dt.nbytes
    if rows % 8 or cols % atom_cols:
        raise ValueError(f"swizzled_tile(): a [{rows}, {cols}] tile of {dt} is no whole number of {swizzle}-byte "
                         f"swizzle atoms (8 rows of {atom_cols} columns)")
    atom = swizzled_layout([rows, atom_cols], dt, swizzle=swizzle)
    layout: Layout = atom if cols == atom_cols else row_major(1, cols // atom_cols) * atom
    return TensorType(dt, (rows, cols), layout)


def padded_tile(dtype: DataType | str, shape: Sequence[int], pad: int) -> TensorType:
    """The tensor type of a row-major shared `[rows, cols]` tile whose rows are `pad` elements apart more than
    `cols` (padding that spreads a column's elements over the banks)."""
    rows, cols = _pair(shape, "padded_tile(): the shape")
    if isinstance(pad, bool) or not isinstance(pad, int) or pad < 0:
        raise ValueError(f"padded_tile(): pad is a non-negative int, got {pad!r}")
    return TensorType(as_dtype(dtype), (rows, cols), strided_layout([rows, cols], strides=[cols + pad, 1]))


def tile_tensor_map(tile: TensorType, shape: Sequence[Any], rows: int | None = None) -> TensorMapType:
    """The tensor map of a global tensor of `shape` whose boxes fill `tile` (a `swizzled_tile`): `rows` rows (the
    tile's by default; fewer where several copies fill one tile) of one swizzle atom's columns, of one index of
    every leading dimension, with the tile's swizzle."""
    layout = _atom_layout(tile)
    if not isinstance(layout, SwizzledLayout):
        raise TypeError(f"tile_tensor_map() takes a swizzled tile (swizzled_tile()), got {tile}")
    rows = tile.shape[0] if rows is None else rows
    if isinstance(rows, bool) or not isinstance(rows, int) or not 0 < rows <= tile.shape[0]:
        raise ValueError(f"tile_tensor_map(): rows is an int from 1 to the tile's {tile.shape[0]}, got {rows!r}")
    leading = [1] * (len(shape) - 2)
    return TensorMap(tile.dtype, list(shape), box=[*leading, rows, layout.shape[1]], swizzle=layout.swizzle)


class SharedMemoryPlan:
    """A kernel's dynamic shared memory, laid out while its template is built: each request is placed after the
    previous ones at the alignment it needs (a swizzled tile at its swizzle's period), and `nbytes` is what the
    kernel declares (`attrs.cuda.dynamic_smem_bytes = plan.nbytes`). Requesting the tiles before the barriers
    wastes no bytes on their alignment."""

    def __init__(self) -> None:
        self.nbytes = 0

    def tiles(self, tile: TensorType, count: int = 1) -> SharedTiles:
        """`count` tiles of type `tile` one after another."""
        _check_count(count, "SharedMemoryPlan.tiles(): count")
        if not isinstance(tile, TensorType) or not all(isinstance(d, int) for d in tile.shape):
            raise TypeError(f"SharedMemoryPlan.tiles() takes a tensor type of known shape, got {tile!r}")
        layout = _atom_layout(tile)
        align = swizzle_alignment(layout.swizzle) if isinstance(layout, SwizzledLayout) else VECTOR_BYTES
        size = (tile.layout.size if tile.layout is not None else math.prod(tile.shape)) * tile.dtype.nbytes
        stride = -(-size // align) * align
        offset = self._reserve(stride * count, align)
        return SharedTiles(offset, tile, count, stride)

    def barriers(self, count: int) -> SharedBarriers:
        """`count` mbarriers."""
        _check_count(count, "SharedMemoryPlan.barriers(): count")
        return SharedBarriers(self._reserve(BARRIER_BYTES * count, BARRIER_BYTES), count)

    def ring(self, stages: int, releases: int, cluster: int = 1) -> StageRing:
        """The full and empty barriers of a ring of `stages` buffers whose empty barrier counts `releases`
        arrivals (one an elected thread of each consumer warpgroup, of every block of a `cluster`)."""
        if cluster not in (1, 2, 4, 8) or releases < cluster or releases % cluster:
            raise ValueError(f"SharedMemoryPlan.ring(): a cluster of 1, 2, 4 or 8 blocks, each releasing a stage "
                             f"with the same count of arrivals; got cluster={cluster!r}, releases={releases!r}")
        return StageRing(stages, self.barriers(stages), self.barriers(stages), releases, cluster)

    def turns(self, groups: int) -> WarpgroupTurns:
        """The barriers of `groups` warpgroups taking turns (`WarpgroupTurns`)."""
        if isinstance(groups, bool) or not isinstance(groups, int) or groups < 2:
            raise ValueError(f"SharedMemoryPlan.turns(): two or more warpgroups take turns, got {groups!r}")
        return WarpgroupTurns(self.barriers(groups))

    def _reserve(self, nbytes: int, align: int) -> int:
        offset = -(-self.nbytes // align) * align
        self.nbytes = offset + nbytes
        return offset


@dataclass(frozen=True)
class SharedTiles:
    """`count` shared tiles of type `tile`, `stride` bytes apart from byte `offset` of the dynamic shared memory."""

    offset: int
    tile: TensorType
    count: int
    stride: int

    def at(self, index: Any = 0) -> E.Expr:
        """The `index`-th tile (an int or an IR value), as a tensor (what `wgmma_descriptor` and element accesses
        take)."""
        return view(self.address(index), self.tile)

    def address(self, index: Any = 0, row: Any = 0, atom: Any = 0) -> E.Expr:
        """Where row `row` (a multiple of the swizzle atom's 8 rows) of the `atom`-th swizzle atom of columns of the
        `index`-th tile starts: the destination of a copy that fills those rows. A tile of another layout is
        addressed at its start only."""
        layout = _atom_layout(self.tile)
        nbytes = self.tile.dtype.nbytes
        if not isinstance(layout, SwizzledLayout):
            if not (_is_zero(row) and _is_zero(atom)):
                raise ValueError("SharedTiles.address(): rows and atoms are addressed in swizzled tiles only")
            return dynamic_shared_memory(_sum(self.offset, _times(index, self.stride)), self.tile.dtype)
        if isinstance(row, int) and row % 8:
            raise ValueError(f"SharedTiles.address(): a row of a swizzled tile where a copy starts is a multiple of "
                             f"8, got {row}")
        row_bytes = layout.shape[1] * nbytes  # a row of one atom: the swizzle's bytes
        atom_bytes = self.tile.shape[0] * row_bytes
        byte = _sum(self.offset, _times(index, self.stride), _times(atom, atom_bytes), _times(row, row_bytes))
        return dynamic_shared_memory(byte, self.tile.dtype)

    def rows(self, index: Any, first: Any, rows: int) -> E.Expr:
        """Rows `first` to `first + rows` of the `index`-th tile (one swizzle atom wide), as a `[rows, cols]` tile."""
        layout = _atom_layout(self.tile)
        if layout is not self.tile.layout or rows % 8:
            raise ValueError("SharedTiles.rows() takes a multiple of 8 rows of a tile one swizzle atom wide")
        part = swizzled_tile(self.tile.dtype, [rows, self.tile.shape[1]], layout.swizzle)
        return view(self.address(index, first), part)


@dataclass(frozen=True)
class SharedBarriers:
    """`count` mbarriers from byte `offset` of the dynamic shared memory."""

    offset: int
    count: int

    def at(self, index: Any = 0) -> E.Expr:
        """The address of the `index`-th barrier (an int or an IR value), what the mbarrier operations take."""
        return dynamic_shared_memory(_sum(self.offset, _times(index, BARRIER_BYTES)), uint64)

    def init(self, arrivals: Any) -> S.Stmt:
        """Initialize every barrier to expect `arrivals` arrivals a phase (one thread runs it, then
        `fence_mbarrier_init` and a block or cluster barrier)."""
        return S.seq([S.EvaluateStmt(mbarrier_init(self.at(i), arrivals)) for i in range(self.count)])


@dataclass(frozen=True)
class StageRing:
    """The barriers of a ring of `stages` buffers that a producer fills and consumers drain, step `it` (counted
    from 0 across the whole kernel) using stage `it % stages` in its `it / stages`-th round. `full` completes once
    its producer arrived and the copies' bytes landed; `empty` once `releases` consumer warpgroups (of all `cluster`
    blocks) released it."""

    stages: int
    full: SharedBarriers
    empty: SharedBarriers
    releases: int
    cluster: int

    def init(self) -> S.Stmt:
        """Initialize the ring's barriers (one thread; `fence_mbarrier_init` and a block or cluster barrier
        after)."""
        return S.seq([self.full.init(1), self.empty.init(self.releases)])

    def stage(self, it: Any) -> Any:
        """The stage step `it` (never negative) uses."""
        return semantics.cast(semantics.binary("%", _unsigned(it), self.stages), int32)

    def phase(self, it: Any) -> Any:
        """The phase of step `it`'s round: its round's parity."""
        return semantics.cast(semantics.binary("%", semantics.binary("/", _unsigned(it), self.stages), 2), int32)

    def acquire(self, it: Any) -> E.Expr:
        """The producer's wait until step `it`'s stage is free: the end of the phase before its round's (round 0's
        passes at once: nothing to free)."""
        return mbarrier_wait(self.empty.at(self.stage(it)), semantics.binary("^", self.phase(it), 1))

    def expect(self, it: Any, nbytes: Any) -> E.Expr:
        """The producer's arrival on step `it`'s full barrier, announcing the `nbytes` its copies will land."""
        return mbarrier_arrive_expect_tx(self.full.at(self.stage(it)), nbytes)

    def full_barrier(self, it: Any) -> E.Expr:
        """Step `it`'s full barrier, on which its copies complete."""
        return self.full.at(self.stage(it))

    def wait(self, it: Any) -> E.Expr:
        """A consumer's wait until step `it`'s stage is full."""
        return mbarrier_wait(self.full.at(self.stage(it)), self.phase(it))

    def release(self, it: Any, thread: Any) -> S.Stmt:
        """The release of step `it`'s stage, run by every `thread` (0-127) of a consumer warpgroup once its reads
        of the stage are done: one arrival, by thread 0, or with a cluster thread r's on block r's barrier (both
        blocks' producers fill the stage)."""
        bar = self.empty.at(self.stage(it))
        if self.cluster == 1:
            return S.IfStmt(semantics.binary("==", thread, 0), S.EvaluateStmt(mbarrier_arrive(bar)))
        return S.IfStmt(semantics.binary("<", thread, self.cluster),
                        S.EvaluateStmt(mbarrier_arrive_cluster(bar, thread)))


@dataclass(frozen=True)
class WarpgroupTurns:
    """Turns that warpgroups take one after another, in the cyclic order of their indices (`groups`: one barrier
    each): group g's n-th turn starts once every thread of group g - 1 has passed its n-th turn on (group 0's first
    at once). Two consumer warpgroups that take turns issuing their tensor-core work run ping-pong: while one's
    softmax or epilogue runs on the other units, the other's wgmma have the tensor cores.

    Every thread arrives (128 a turn), not one elected thread: a warp still polling for turn n when the others have
    passed it on would otherwise see the barrier's phase come round to the same parity at turn n + 2 and wait for
    ever. A turn is passed on only once all of the group's threads have reached it, so no group runs a turn ahead."""

    barriers: SharedBarriers

    def init(self) -> S.Stmt:
        """Initialize the turns (one thread; `fence_mbarrier_init` and a block barrier after)."""
        return self.barriers.init(WARPGROUP_THREADS)

    def wait(self, turn: Any, group: Any) -> E.Expr:
        """Group `group`'s wait for its `turn`-th turn (counted from 0): the completion of its barrier's phase
        `turn`, or for group 0 of phase `turn - 1` (its first turn is open)."""
        first = semantics.cast(semantics.binary("==", group, 0), int32)
        phase = semantics.binary("%", _unsigned(semantics.binary("+", turn, first)), 2)
        return mbarrier_wait(self.barriers.at(group), semantics.cast(phase, int32))

    def pass_on(self, group: Any) -> E.Expr:
        """The end of group `group`'s turn, by every thread of it: its arrival on the next group's barrier."""
        following = semantics.binary("%", semantics.binary("+", group, 1), self.barriers.count)
        return mbarrier_arrive(self.barriers.at(following))


class AccumulatorStaging:
    """The store of a warpgroup's 64 x `n` f32 wgmma accumulator as `dtype` through shared memory, one warp at a
    time: `warps` padded `[16, 64]` tiles (`plan`'s), one a warp of the kernel's consumer warpgroups. A pass stages
    64 columns: `stage(acc, warp, lane, part)` writes the warp's 16 rows of columns `[64 part, 64 part + 64)` (a lane's
    two rows of 8 pairs) into its tile and syncs the warp; the kernel then stores the tile's rows as 16-byte vectors,
    lane `l` taking the vectors `lanes.on(l)` gives (`(row, vector)` of the warp's rows, consecutive lanes along a
    row), read by `vector(warp, row, vec)` or element by element with `element`; and syncs the warp before the next
    pass writes the tile again. The padding puts the tile's rows 4 (16-bit) or 8 (32-bit) banks apart, so that
    neither the pairs written nor the vectors read share a bank within a warp's access."""

    def __init__(self, plan: SharedMemoryPlan, dtype: DataType | str, n: int, warps: int) -> None:
        dt = as_dtype(dtype)
        if dt.nbytes not in (2, 4) or n % STAGING_COLUMNS:
            raise ValueError(f"AccumulatorStaging: 16- or 32-bit elements and a multiple of {STAGING_COLUMNS} "
                             f"columns, got {dt} and {n}")
        self.dtype, self.n = dt, n
        self.vector_elements = VECTOR_BYTES // dt.nbytes
        self.passes = n // STAGING_COLUMNS
        self.tiles = plan.tiles(padded_tile(dt, [WARP_ROWS, STAGING_COLUMNS], STAGING_PAD), warps)
        vectors = STAGING_COLUMNS // self.vector_elements  # a row's vectors
        self.lanes: TaskMapping = repeat(WARP_ROWS * vectors // WARP, 1) * spatial(WARP // vectors, vectors)

    def stage(self, acc: Any, warp: Any, lane: Any, part: int, at: tuple[int, ...] = ()) -> S.Stmt:
        """Write columns `[64 part, 64 part + 64)` of the accumulator (`acc`: a thread's `n / 2` f32 registers,
        `acc[*at, r]` where `acc` holds several) of lane `lane` of the warpgroup's warp whose tile is the `warp`-th
        into that tile, then sync the warp."""
        if not 0 <= part < self.passes:
            raise ValueError(f"AccumulatorStaging.stage(): part is 0 to {self.passes - 1}, got {part!r}")
        tile = self.tiles.at(warp)
        stores: list[S.Stmt] = []
        for r in range(32 * part, 32 * part + 32):  # these columns' registers: column 8 (r / 4) + 2 (l % 4) + r % 2
            row = semantics.binary("+", semantics.binary("/", lane, 4), 8 * (r // 2 % 2))
            col = semantics.binary("+", semantics.binary("*", semantics.binary("%", lane, 4), 2),
                                   8 * (r // 4 % 8) + r % 2)
            element = semantics.element(tile, (row, col))
            stores.append(S.BufferStoreStmt(tile, element.indices,
                                            semantics.cast(semantics.element(acc, (*at, r)), self.dtype)))
        stores.append(S.EvaluateStmt(syncwarp()))
        return S.seq(stores)

    def vector(self, warp: Any, row: Any, vec: Any) -> E.Expr:
        """The address of vector `vec` of row `row` of warp `warp`'s tile: the source of a 16-byte `copy_vector`."""
        return E.Address(semantics.element(self.tiles.at(warp), (row, semantics.binary(
            "*", vec, self.vector_elements))))

    def element(self, warp: Any, row: Any, col: Any) -> E.Expr:
        """Element (`row`, `col`) of warp `warp`'s tile."""
        return semantics.element(self.tiles.at(warp), (row, col))


def _atom_layout(tile: TensorType) -> Layout | None:
    """The swizzled atom of a tile whose layout is one, or atoms side by side; else the tile's own layout."""
    layout = tile.layout
    inner = getattr(layout, "inner", None)
    return inner if isinstance(inner, SwizzledLayout) else layout


def _unsigned(value: Any) -> E.Expr:
    """`value` as a u32: its division and remainder by a constant take no sign fix-up."""
    return semantics.cast(value, uint32)


def _times(value: Any, factor: int) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value * factor
    return semantics.binary("*", value, factor)


def _sum(*terms: Any) -> Any:
    ints = sum(t for t in terms if isinstance(t, int) and not isinstance(t, bool))
    total: Any = ints
    for t in terms:
        if not isinstance(t, int):
            total = semantics.binary("+", total, t) if not (isinstance(total, int) and total == 0) else t
    return total


def _is_zero(value: Any) -> bool:
    return isinstance(value, int) and value == 0


def _pair(shape: Sequence[int], what: str) -> tuple[int, int]:
    dims = tuple(shape)
    if len(dims) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise ValueError(f"{what} is two positive ints, got {list(dims)!r}")
    return dims[0], dims[1]


def _check_count(count: Any, what: str) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"{what} is a positive int, got {count!r}")
