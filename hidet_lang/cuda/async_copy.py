"""Tiles that `cp.async` (sm_80) fills: their swizzled layout, the copy of a tile by a block's threads (or its
element-by-element gather), and the multistage pipeline that overlaps the copies of later steps with the work on the
current one.

- `chunk_tile(dtype, [rows, cols])`: the tensor type of a shared tile whose 16-byte chunks are swizzled (as
  `tiles.swizzled_tile`, the swizzle as wide as a row up to 128 bytes), so that the eight rows of an `ldmatrix`
  8 x 8 matrix, or the eight chunks a quarter warp copies, lie in eight different groups of banks. The layout is the
  one source of the swizzle: a copy lands at `~tile[row, col]` and `fragments.load_a` reads `~tile[row, col]`.
- `TileCopy(tile, threads)`: the copy of such a tile (or a padded one, `tiles.padded_tile`) from global memory in
  16-byte chunks. `mapping` is the task mapping that gives each thread its chunks `(row, chunk)`, consecutive
  threads on consecutive chunks of shared memory (each 128-byte line written by 8 threads at once); `copy(...)`
  builds the copy of one chunk from a tensor whose tile starts at an origin (a `cp_async` where the chunk lies
  inside it and its rows are 16-byte aligned, zeros outside, element reads where the rows are not aligned or the
  tensor holds another type than the tile, converted), and `zero`, `round_tf32` the chunk's fills and in-place
  rounding.
- `TileGather(rows, cols, threads, along)`: the cells `(row, col)` of a tile filled element by element, for tiles
  whose elements come from scattered places (an implicit GEMM's gather of the input) or land transposed: `mapping`
  puts consecutive threads on consecutive rows or columns (`along`), a thread's row or column the same in all its
  tasks; `tasks(worker)` numbers a thread's rows (`r`), so that what a row needs is worked out once, into registers
  indexed by `r` (`rows_of(worker)`); `inside(row, col)` where the tasks run past the tile.
- `CopyPipeline(stages)`: `stages` buffers of a loop whose iteration `it` copies step `it` into buffer
  `fill_stage(it)` and works on step `it - stages + 1` in buffer `read_stage(it)`; `wait()` starts an iteration
  (the copies of the step worked on are in place and every thread is done with the buffer refilled: `landed()`
  and a barrier, between which a thread may touch its own copies), `commit()` ends its copies. A gather's element
  stores are in place once its thread has made them: the barrier of `wait()` is the one they need.

Every statement is built while the kernel is parsed, from the kernel's own tensors: a `cp_async` source or an
element read of an input is what fusion rewrites, so a template written with these stays fusible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hidet_lang.cuda import cp_async, cp_async_commit_group, cp_async_wait_group, cvt_rna_tf32_f32, syncthreads
from hidet_lang.cuda.tiles import swizzled_tile
from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.layout import SwizzledLayout
from hidet_lang.ir.mapping import ComposedMapping, RepeatMapping, SpatialMapping, TaskMapping, repeat, spatial
from hidet_lang.ir.types import DataType, TensorType, uint32

__all__ = ["CHUNK_BYTES", "CopyPipeline", "TileCopy", "TileGather", "chunk_tile"]

CHUNK_BYTES = 16  # a cp.async copy, an ldmatrix row
MAX_SWIZZLE = 128  # bytes: one line of the 32 banks


def chunk_tile(dtype: DataType | str, shape: Sequence[int]) -> TensorType:
    """The tensor type of a shared `[rows, cols]` tile of 16-byte chunks swizzled within 128-byte lines: rows of
    32, 64 or 128 bytes swizzled as wide as a row, wider rows as 128-byte atoms side by side (`swizzled_tile`)."""
    dt = as_dtype(dtype)
    if len(shape) != 2 or not all(isinstance(d, int) and d > 0 for d in shape):
        raise ValueError(f"chunk_tile(): the shape is two positive ints, got {list(shape)!r}")
    row_bytes = shape[1] * dt.nbytes
    if row_bytes < 32 or row_bytes & (row_bytes - 1):
        raise ValueError(f"chunk_tile(): a row of {row_bytes} bytes; rows of a power of two bytes, at least 32, "
                         f"are swizzled (a [{shape[0]}, {shape[1]}] tile of {dt})")
    return swizzled_tile(dt, shape, min(MAX_SWIZZLE, row_bytes))


class TileCopy:
    """The copy of a shared `tile` (a `chunk_tile` or a row-major, possibly padded, tile whose rows are whole
    chunks) by `threads` threads, a 16-byte chunk a task (see the module's docstring)."""

    def __init__(self, tile: TensorType, threads: int) -> None:
        if not isinstance(tile, TensorType) or len(tile.shape) != 2 or not all(isinstance(d, int) for d in tile.shape):
            raise TypeError(f"TileCopy takes a two-dimensional tile type of known shape, got {tile!r}")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1 or threads % 32:
            raise ValueError(f"TileCopy: threads is a positive multiple of 32, got {threads!r}")
        rows, cols = tile.shape
        self.tile, self.threads = tile, threads
        self.vector = CHUNK_BYTES // tile.dtype.nbytes  # elements of a chunk
        if cols % self.vector:
            raise ValueError(f"TileCopy: a row of {cols} {tile.dtype} elements is no whole number of 16-byte chunks")
        self.row_chunks = cols // self.vector
        self.mapping: TaskMapping = _storage_order(rows, self.row_chunks, _atom_chunks(tile, self.vector), threads)
        # tasks past the tile's rows: the mapping's last ones, or those `tasks` gives threads past its workers
        self.guarded = self.mapping.task_shape[0] > rows or self.mapping.num_workers < threads

    def tasks(self, worker: Any) -> list[tuple[Any, Any, int]]:
        """Thread `worker`'s tasks under `mapping` as `(row, chunk, t)`, its `t`-th task (a Python int), for a loop
        unrolled while parsing (`for row, chunk, t in copy.tasks(threadIdx.x)`) whose per-task values live in
        registers indexed by `t`. A thread's tasks are thread 0's moved by its place in the mapping's spatial part.
        A thread past the mapping's workers gets tasks past the tile's rows (its copies are skipped)."""
        return _worker_tasks(self.mapping, worker)

    def copy(self, dst: Any, row: Any, chunk: Any, src: Any, origin: Sequence[Any], aligned: Any = True,
             limit: Any = None) -> S.Stmt:
        """The copy of chunk `chunk` of row `row` of the shared tile `dst` from the tensor `src` whose element
        `origin` (one index a dimension) is the tile's first: one `cp_async` of 16 bytes where `aligned` (a Python
        or IR bool: the rows of `src` are whole chunks) and the chunk starts inside `src`, zeros where it does not,
        and element reads converted to the tile's type, zeros outside, where not `aligned` (always where `src`
        holds another type: a 16-byte copy moves bytes). The rows lie inside below `limit` (an exclusive bound on
        the row index of `src`; its extent by default)."""
        src = E.convert(src)
        src_type = src.type if isinstance(src.type, TensorType) else src.type.base
        shape = src_type.shape
        if src_type.dtype != self.tile.dtype:
            aligned = False
        if len(origin) != len(shape) or len(shape) < 2:
            raise ValueError(f"TileCopy.copy(): origin has one index a dimension of the source ({len(shape)}), "
                             f"got {len(origin)}")
        col = chunk * self.vector
        index = [*origin[:-2], origin[-2] + row, origin[-1] + col]
        row_inside = semantics.binary("<", index[-2], shape[-2] if limit is None else limit)
        whole_rows = isinstance(shape[-1], int) and isinstance(origin[-1], int) and origin[-1] == 0 \
            and self.tile.shape[1] <= shape[-1]  # every column of the tile lies inside the source
        inside = row_inside if whole_rows else semantics.logical("and", row_inside,
                                                                 semantics.binary("<", index[-1], shape[-1]))
        vector = S.IfStmt(inside, S.EvaluateStmt(cp_async(_address(dst, row, col), _address(src, *index),
                                                          CHUNK_BYTES)),
                          self.zero(dst, row, chunk))
        body = vector
        if not (isinstance(aligned, bool) and aligned):
            chunk_at = _address(dst, row, col)
            elements = []
            for e in range(self.vector):
                here = [*index[:-1], index[-1] + e]
                ok = row_inside if whole_rows else semantics.logical(
                    "and", row_inside, semantics.binary("<", here[-1], shape[-1]))
                value = E.IfThenElse(ok, semantics.cast(semantics.element(src, tuple(here)), self.tile.dtype),
                                     semantics.cast(0, self.tile.dtype))
                elements.append(_store(chunk_at, e, value))
            body = S.seq(elements) if isinstance(aligned, bool) else S.IfStmt(semantics.condition(aligned, "aligned"),
                                                                               vector, S.seq(elements))
        return S.IfStmt(semantics.binary("<", row, self.tile.shape[0]), body) if self.guarded else body

    def zero(self, dst: Any, row: Any, chunk: Any) -> S.Stmt:
        """Zeros into chunk `chunk` of row `row` of `dst`."""
        at = _address(dst, row, chunk * self.vector)
        return S.seq([_store(at, e, semantics.cast(0, self.tile.dtype)) for e in range(self.vector)])

    def round_tf32(self, dst: Any, row: Any, chunk: Any) -> S.Stmt:
        """Each f32 of chunk `chunk` of row `row` of `dst` rounded to tf32 in place (`cvt_rna_tf32_f32`)."""
        if self.tile.dtype.name != "float32":
            raise TypeError(f"TileCopy.round_tf32() rounds f32 tiles, not {self.tile.dtype}")
        at = _address(dst, row, chunk * self.vector)
        stores = [_store(at, e, cvt_rna_tf32_f32(semantics.element(at, (e,)))) for e in range(self.vector)]
        body = S.seq(stores)
        return S.IfStmt(semantics.binary("<", row, self.tile.shape[0]), body) if self.guarded else body


class TileGather:
    """The element-by-element fill of the cells `(row, col)` of a `[rows, cols]` grid by `threads` threads (see the
    module's docstring): consecutive threads on consecutive rows (`along="rows"`: a thread's row the same in all its
    tasks, its columns `threads / rows` apart) or on consecutive columns (`along="cols"`: a thread's column the same
    in all its tasks, its `thread_rows` rows `threads / cols` apart)."""

    def __init__(self, rows: int, cols: int, threads: int, along: str) -> None:
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in (rows, cols, threads)):
            raise ValueError(f"TileGather: rows, cols and threads are positive ints, got {(rows, cols, threads)!r}")
        if along not in ("rows", "cols"):
            raise ValueError(f"TileGather: along is 'rows' or 'cols', got {along!r}")
        extent = rows if along == "rows" else cols
        if threads % extent:
            raise ValueError(f"TileGather: {threads} threads along {along} of {extent} cells are no whole number of "
                             f"{along}")
        at_once = threads // extent  # columns (along rows) or rows (along cols) gathered at once
        self.rows, self.cols = rows, cols
        self.thread_rows = 1 if along == "rows" else -(-rows // at_once)
        self.mapping: TaskMapping = (repeat(1, -(-cols // at_once), attrs="uu") * spatial(rows, at_once, ranks=[1, 0])
                                     if along == "rows" else
                                     repeat(self.thread_rows, 1, attrs="uu") * spatial(at_once, cols))
        self.guarded = self.mapping.task_shape[0] > rows or self.mapping.task_shape[1] > cols

    def tasks(self, worker: Any) -> list[tuple[Any, Any, int]]:
        """Thread `worker`'s cells as `(row, col, r)`, `r` (a Python int) the index of `row` among the thread's
        rows, for a loop unrolled while parsing whose per-row values live in registers indexed by `r`."""
        per_row = len(self.mapping(0)) // self.thread_rows
        return [(row, col, t // per_row) for row, col, t in _worker_tasks(self.mapping, worker)]

    def rows_of(self, worker: Any) -> list[tuple[Any, int]]:
        """Thread `worker`'s rows, each once, as `(row, r)` (see `tasks`)."""
        per_row = len(self.mapping(0)) // self.thread_rows
        return [(row, r) for row, _col, r in self.tasks(worker)[::per_row]]

    def inside(self, row: Any, col: Any) -> Any:
        """Whether cell `(row, col)` of a task lies in the grid: True (a Python bool) where every task does."""
        if not self.guarded:
            return True
        return semantics.logical("and", semantics.binary("<", row, self.rows), semantics.binary("<", col, self.cols))


class CopyPipeline:
    """A loop over `steps` steps whose copies run `stages - 1` steps ahead through `stages` buffers (see the
    module's docstring). Iteration `it` (0 to `iterations(steps)`) copies step `it` where `fills(it, steps)` and
    works on step `it - stages + 1` where `reads(it)`."""

    def __init__(self, stages: int) -> None:
        if isinstance(stages, bool) or not isinstance(stages, int) or not 2 <= stages <= 8:
            raise ValueError(f"CopyPipeline: stages is an int from 2 to 8, got {stages!r}")
        self.stages = stages

    def iterations(self, steps: Any) -> Any:
        """The iterations of `steps` steps: the last copy's, then `stages - 1` more to work on the copied ones."""
        return steps + (self.stages - 1)

    def fills(self, it: Any, steps: Any) -> E.Expr:
        """Whether iteration `it` copies a step."""
        return semantics.binary("<", it, steps)

    def reads(self, it: Any) -> E.Expr:
        """Whether iteration `it` works on a step."""
        return semantics.binary(">=", it, self.stages - 1)

    def fill_stage(self, it: Any) -> E.Expr:
        """The buffer iteration `it` copies into."""
        return _stage(it, self.stages)

    def read_stage(self, it: Any) -> E.Expr:
        """The buffer iteration `it` works on (step `it - stages + 1`'s)."""
        return _stage(semantics.binary("+", it, 1), self.stages)

    def landed(self) -> E.Expr:
        """The wait until this thread's copies of the step worked on have landed (at most `stages - 2` groups
        pending)."""
        return cp_async_wait_group(self.stages - 2)

    def wait(self) -> S.Stmt:
        """An iteration's start: `landed()`, then a block barrier (every thread's copies have, and every thread is
        done with the buffer the iteration refills)."""
        return S.seq([S.EvaluateStmt(self.landed()), S.EvaluateStmt(syncthreads())])

    def commit(self) -> E.Expr:
        """The end of an iteration's copies (one group a iteration, copies or none)."""
        return cp_async_commit_group()


def _stage(it: Any, stages: int) -> E.Expr:
    """`it % stages` computed unsigned (no sign fix-up for an iteration count that is never negative)."""
    unsigned = semantics.cast(it, uint32)
    return semantics.cast(semantics.binary("%", unsigned, stages), E.convert(it).type)


def _atom_chunks(tile: TensorType, vector: int) -> int:
    """The chunks of a row of `tile`'s swizzle atom (its row's, where it is not made of atoms)."""
    inner = getattr(tile.layout, "inner", tile.layout)
    if isinstance(inner, SwizzledLayout):
        return inner.shape[1] // vector
    return tile.shape[1] // vector


def _storage_order(rows: int, row_chunks: int, atom_chunks: int, threads: int) -> TaskMapping:
    """The mapping of `threads` onto the chunks `(row, chunk)` of a tile of `rows` rows of `row_chunks` chunks in
    atoms `atom_chunks` wide, consecutive threads on consecutive chunks of memory: along an atom's row, then its
    rows, then the atoms; the repeats unrolled. Where the threads do not divide the chunks evenly, the last rows'
    tasks run past the tile (`TileCopy.guarded`)."""
    atoms = row_chunks // atom_chunks
    per_atom = rows * atom_chunks
    if threads >= per_atom and threads % per_atom == 0:
        across = min(atoms, threads // per_atom)  # atoms the threads copy at once
        if atoms % across:
            raise ValueError(f"TileCopy: {threads} threads do not divide {atoms} atoms of {per_atom} chunks")
        return repeat(1, atoms // across, attrs="uu") * spatial(1, across) * spatial(rows, atom_chunks)
    if threads < atom_chunks:
        raise ValueError(f"TileCopy: {threads} threads for rows of {atom_chunks} chunks")
    row_threads = threads // atom_chunks  # rows of an atom copied at once
    return (repeat(1, atoms, attrs="uu") * repeat(-(-rows // row_threads), 1, attrs="uu")
            * spatial(row_threads, atom_chunks))


def _worker_tasks(mapping: TaskMapping, worker: Any) -> list[tuple[Any, Any, int]]:
    """`worker`'s tasks under a two-dimensional `mapping` as `(row, col, t)`, its `t`-th task: thread 0's moved by
    its place in the mapping's spatial part (tasks past the mapping's for a worker past its workers)."""
    row, col = _spatial_coords(mapping, E.convert(worker))
    return [(r + row, c + col, t) for t, (r, c) in enumerate(mapping(0))]


def _spatial_coords(mapping: TaskMapping, worker: E.Expr) -> list[Any]:
    """The coordinates of `worker`'s first task under `mapping` (repeats outside its spatial parts): its offset
    from worker 0's tasks; past the mapping's workers, a row past its tasks'."""
    if isinstance(mapping, RepeatMapping):
        return [0] * len(mapping.shape)
    if isinstance(mapping, SpatialMapping):  # the dims unravelled fastest (highest rank) first
        coords: list[Any] = [0] * len(mapping.shape)
        stride = 1
        for d in sorted(range(len(mapping.shape)), key=mapping.ranks.__getitem__, reverse=True):
            extent = mapping.shape[d]
            coords[d] = worker // stride % extent if stride * extent < mapping.num_workers else worker // stride
            stride *= extent
        return coords
    assert isinstance(mapping, ComposedMapping)
    inner_workers = mapping.inner.num_workers
    outer = _spatial_coords(mapping.outer, worker // inner_workers)
    inner = _spatial_coords(mapping.inner, worker % inner_workers)
    return [o * e + i for o, i, e in zip(outer, inner, mapping.inner.task_shape)]


def _address(tensor: Any, *index: Any) -> E.Expr:
    return E.Address(semantics.element(E.convert(tensor), tuple(index)))


def _store(chunk_at: E.Expr, e: int, value: Any) -> S.Stmt:
    """The store of `value` into element `e` of the chunk at address `chunk_at` (a chunk's elements lie side by side
    in every layout here: swizzles move whole chunks)."""
    target = semantics.element(chunk_at, (e,))
    return S.BufferStoreStmt(chunk_at, target.indices, semantics.convert_to(E.convert(value), target.type))

