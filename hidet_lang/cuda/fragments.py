"""The register fragments of the warp-level tensor-core instruction `mma.sync` (sm_80), named by the cells they hold.

An `mma.m16n8k16` (f16, bf16) or `mma.m16n8k8` (tf32) spreads its 16 x 8 f32 accumulator over a warp: lane `l` holds
rows `l / 4` and `l / 4 + 8`, columns `2 (l % 4)` and `2 (l % 4) + 1`. A warp's tile of such accumulators
(`Accumulator`) is the task mapping `repeat(rows / 16, cols / 8) * repeat(2, 1) * spatial(8, 4) * repeat(1, 2)`,
its registers in the mapping's order; a kernel writes

    acc = frags.tensor()                           # a lane's f32 registers
    mma(~a[mi, 0], ~b[ni, 0], frags.tile(acc, 16 * mi, 8 * ni))
    for i, j, r in frags.cells(lane):              # this lane's cells [i, j] of the tile, register r each
        c[m0 + i, n0 + j] = acc[r]

and never spells a lane's row or column. Where a row's or a column's values are shared by its cells (an output
pixel's coordinates, a column's bias, a softmax row's maximum), `lane_rows(lane)` and `lane_columns(lane)` give a lane's
rows and columns once each, as `(row, slot)` and `(col, slot)`, and `register(row_slot, col_slot)` the register of
their cell (`row_registers(slot)` those of a row): a lane holds two rows of each 16-row tile and two columns of each
8-column tile. The register of a cell is a constant of the unrolled loop, not an index
computed from the lane (which the CUDA compiler does not fold back into a register: such an array lives in local
memory). Registers `8 s` to `8 s + 7` of a `[16, cols]` tile of 16-bit elements are the A operand of an
m16n8k16 at k step `s` (two accumulator tiles side by side are one A fragment), which is how attention's
probabilities become the operand of its second product.

The operands are read from shared tiles (any tensor whose element `[row, col]` is where the data lies, such as the
swizzled tiles of `async_copy`) by `ldmatrix`: `load_a` the A fragment of a 16 x 16 block (k along a row),
`load_b` two B fragments of 16 x 16 (8 x 8 of 32-bit elements) from a tile with k along a row ([n, k]), and
`load_b_trans` two from a tile with n along a row ([k, n], 16-bit elements); `load_b_tf32` reads a tf32 B fragment
of a [k, n] tile with plain loads (`ldmatrix` cannot transpose 32-bit elements). Each takes the lane and gives
the instruction (or statements) that the kernel writes where it wants them; `tf32_b_tile` is the layout of the [k, n]
f32 tile `load_b_tf32` reads without bank conflicts. `WarpMma` puts them together: a warp's product of the A and B
tiles of one step of a GEMM's k loop into its accumulator tile, or of an A operand held in registers (in the layout
of a 16-bit accumulator tile: `load_operand`, `multiply_held`) and a B tile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hidet_lang.cuda import (
    ldmatrix_x4,
    ldmatrix_x4_trans,
    mma_m16n8k8_tf32_f32,
    mma_m16n8k16_bf16_f32,
    mma_m16n8k16_f16_f32,
)
from hidet_lang.cuda.tiles import padded_tile
from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import LocalTensorRequest, register_tensor
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.mapping import TaskMapping, repeat, spatial
from hidet_lang.ir.types import DataType, TensorType, float32, uint32

__all__ = ["MMA_M", "MMA_N", "Accumulator", "WarpMma", "load_a", "load_b", "load_b_tf32", "load_b_trans",
           "tf32_b_tile"]

MMA_M, MMA_N = 16, 8  # an mma's accumulator tile
ROW_BYTES = 16  # a row of an ldmatrix 8 x 8 matrix
TF32_B_PAD = 8  # f32s after each row of a tf32 B tile: 4 consecutive rows start 8 banks apart


@dataclass(frozen=True)
class Accumulator:
    """A warp's `[rows, cols]` tile of mma accumulators (`rows` a multiple of 16, `cols` of 8), each lane's share
    in registers (see the module's docstring)."""

    rows: int
    cols: int

    def __post_init__(self) -> None:
        for what, value, unit in (("rows", self.rows, MMA_M), ("cols", self.cols, MMA_N)):
            if isinstance(value, bool) or not isinstance(value, int) or value < unit or value % unit:
                raise ValueError(f"Accumulator: {what} is a positive multiple of {unit}, got {value!r}")

    @property
    def mapping(self) -> TaskMapping:
        """The cells each of the warp's 32 lanes holds, in the order of its registers (tile by tile, row-major
        over the tiles; in a tile its row `l / 4` then `l / 4 + 8`, two adjacent columns each)."""
        return (repeat(self.rows // MMA_M, self.cols // MMA_N) * repeat(2, 1) * spatial(8, 4) * repeat(1, 2))

    @property
    def registers(self) -> int:
        """The registers a lane holds: `rows * cols / 32`."""
        return self.rows * self.cols // 32

    def tensor(self, dtype: DataType | str = float32) -> LocalTensorRequest:
        """The register tensor of a lane's cells (`acc = frags.tensor()` in a kernel), of `dtype`, one element a
        register in the order of `mapping`."""
        return register_tensor(as_dtype(dtype), [self.registers])

    def cells(self, lane: Any) -> list[tuple[Any, Any, int]]:
        """Lane `lane`'s cells as `(row, col, register)`, in register order: a kernel's `for i, j, r in
        frags.cells(lane)` (unrolled while parsing) reads or writes `acc[r]`, the tile's element `[i, j]`. A lane's
        cells are lane 0's moved by `(lane / 4, 2 (lane % 4))`: the register is a constant, only the row and the
        column depend on the lane."""
        g, t2 = lane // 4, lane % 4 * 2
        return [(row + g, col + t2, r) for r, (row, col) in enumerate(self.mapping(0))]

    def lane_rows(self, lane: Any) -> list[tuple[Any, int]]:
        """Lane `lane`'s rows of the tile, each once, as `(row, slot)`: slot `s` is row `8 s + lane / 4` (rows
        `l / 4` and `l / 4 + 8` of each 16-row mma tile), for loops unrolled while parsing."""
        g = lane // 4
        return [(g + 8 * s, s) for s in range(self.rows // 8)]

    def lane_columns(self, lane: Any) -> list[tuple[Any, int]]:
        """Lane `lane`'s columns of the tile, each once, as `(col, slot)`: slot `c` is column `8 (c / 2) + c % 2 +
        2 (lane % 4)` (columns `2 (l % 4)` and `2 (l % 4) + 1` of each 8-column mma tile)."""
        t2 = lane % 4 * 2
        return [(t2 + 8 * (c // 2) + c % 2, c) for c in range(self.cols // 4)]

    def register(self, row_slot: int, col_slot: int) -> int:
        """The register of the cell at a lane's row `row_slot` and column `col_slot` (slots of `lane_rows` and
        `lane_columns`)."""
        if not (0 <= row_slot < self.rows // 8 and 0 <= col_slot < self.cols // 4):
            raise ValueError(f"Accumulator.register(): slots within {self.rows // 8} rows and {self.cols // 4} "
                             f"columns a lane, got ({row_slot!r}, {col_slot!r})")
        tile = row_slot // 2 * (self.cols // MMA_N) + col_slot // 2
        return 4 * tile + 2 * (row_slot % 2) + col_slot % 2

    def row_registers(self, row_slot: int) -> list[int]:
        """The registers of a lane's cells in its row `row_slot`, column slot by column slot."""
        return [self.register(row_slot, c) for c in range(self.cols // 4)]

    def tile(self, acc: Any, row: int, col: int) -> E.Expr:
        """The address of the registers of the mma tile whose first cell is (`row`, `col`) of the warp's tile (a
        multiple of 16 and of 8): what an mma instruction takes for its accumulator (or, for a `[16, 16]` tile of
        16-bit elements, its A operand)."""
        if row % MMA_M or col % MMA_N or not (0 <= row < self.rows and 0 <= col < self.cols):
            raise ValueError(f"Accumulator.tile(): a tile starts at a multiple of 16 rows and 8 columns inside "
                             f"[{self.rows}, {self.cols}], got ({row}, {col})")
        register = (row // MMA_M * (self.cols // MMA_N) + col // MMA_N) * 4
        return E.Address(semantics.element(E.convert(acc), (register,)))


class WarpMma:
    """A warp's `[warp_m, warp_n]` tile of a GEMM on `mma.sync`: f16 or bf16 operands (m16n8k16) or f32 ones read
    as tf32 (m16n8k8), f32 accumulators (`accumulator`). The A tile is `[m, k]` (k along a row); the B tile `[k, n]`
    where `b_k_major` is False (a row-major right operand), `[n, k]` where it is True (a weight, or keys)."""

    def __init__(self, dtype: DataType | str, warp_m: int, warp_n: int, b_k_major: bool = False) -> None:
        dt = as_dtype(dtype)
        if dt.name not in ("float16", "bfloat16", "float32"):
            raise TypeError(f"WarpMma: f16, bf16 or f32 (tf32) operands, got {dt}")
        self.accumulator = Accumulator(warp_m, warp_n)
        if warp_n % (2 * MMA_N) and not (dt.name == "float32" and not b_k_major):
            raise ValueError(f"WarpMma: ldmatrix reads B fragments in pairs; warp_n is a multiple of 16, got {warp_n}")
        self.dtype, self.b_k_major = dt, b_k_major
        self.k = 8 if dt.name == "float32" else 16  # an mma's k
        self.tiles_m, self.tiles_n = warp_m // MMA_M, warp_n // MMA_N
        self.mma = {"float16": mma_m16n8k16_f16_f32, "bfloat16": mma_m16n8k16_bf16_f32,
                    "float32": mma_m16n8k8_tf32_f32}[dt.name]

    def a_registers(self) -> LocalTensorRequest:
        """The A fragments of the warp's tile rows at one k step (`ra = warp.a_registers()` in a kernel)."""
        return register_tensor(uint32, [self.tiles_m, 4])

    def b_registers(self) -> LocalTensorRequest:
        """The B fragments of the warp's tile columns at one k step."""
        return register_tensor(float32 if self._b_tf32 else uint32, [self.tiles_n, 2])

    def multiply(self, acc: Any, ra: Any, rb: Any, a_tile: Any, b_tile: Any, row: Any, col: Any, lane: Any) -> S.Stmt:
        """`acc += A B` over the k extent of the shared tiles (`a_tile`'s columns): the warp's rows `row` to `row +
        warp_m` of `a_tile`, its columns `col` to `col + warp_n` of `b_tile`, a k step at a time (the fragments
        of every tile row and column loaded, then the `tiles_m * tiles_n` mma instructions)."""
        a_type = E.convert(a_tile).type
        extent = (a_type.base if not isinstance(a_type, TensorType) else a_type).shape[1]
        stmts: list[S.Stmt] = []
        for k in range(0, extent, self.k):
            for mi in range(self.tiles_m):
                stmts.append(S.EvaluateStmt(load_a(_at(ra, mi), a_tile, row + mi * MMA_M, k, lane)))
            stmts.append(self._step(acc, [_at(ra, mi) for mi in range(self.tiles_m)], rb, b_tile, k, col, lane))
        return S.seq(stmts)

    def operand(self, k: int) -> Accumulator:
        """The layout of the warp's A operand of k extent `k` held in 16-bit registers: that of a `[warp_m, k]`
        accumulator tile (the k step `s` of tile row `mi` is registers `tile(regs, 16 mi, 16 s)`), so that
        products kept in an accumulator and rounded are an A operand as they lie."""
        if self.k != 16:
            raise TypeError(f"WarpMma.operand(): held A operands are 16-bit (f16, bf16), not {self.dtype}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 16 or k % 16:
            raise ValueError(f"WarpMma.operand(): k is a positive multiple of 16, got {k!r}")
        return Accumulator(self.accumulator.rows, k)

    def load_operand(self, regs: Any, a_tile: Any, row: Any, lane: Any) -> S.Stmt:
        """The warp's rows `row` to `row + warp_m` of the shared `a_tile` (k along a row, all its columns) into
        `regs` (`operand(k).tensor(dtype)`), by `ldmatrix`."""
        a_type = E.convert(a_tile).type
        extent = (a_type.base if not isinstance(a_type, TensorType) else a_type).shape[1]
        layout = self.operand(extent)
        return S.seq([S.EvaluateStmt(load_a(layout.tile(regs, mi * MMA_M, k), a_tile, row + mi * MMA_M, k, lane))
                      for k in range(0, extent, self.k) for mi in range(self.tiles_m)])

    def multiply_held(self, acc: Any, layout: Accumulator, regs: Any, rb: Any, b_tile: Any, k0: Any, col: Any,
                      lane: Any) -> S.Stmt:
        """`acc += A B` with A held in `regs` in the `layout` of `operand(k)`, its k extent `k` the rows (a `[k, n]`
        `b_tile`) or columns (`[n, k]`, `b_k_major`) `k0` to `k0 + k` of `b_tile`, and the warp's columns `col` to
        `col + warp_n`."""
        if layout.rows != self.accumulator.rows or self.k != 16 or layout.cols % 16:
            raise ValueError(f"WarpMma.multiply_held(): an operand of operand(k)'s layout ({self.accumulator.rows} "
                             f"rows of 16-bit elements), got {layout}")
        return S.seq([self._step(acc, [layout.tile(regs, mi * MMA_M, k) for mi in range(self.tiles_m)], rb,
                                 b_tile, semantics.binary("+", k0, k) if k else k0, col, lane)
                      for k in range(0, layout.cols, self.k)])

    def _step(self, acc: Any, a_at: Sequence[E.Expr], rb: Any, b_tile: Any, k: Any, col: Any, lane: Any) -> S.Stmt:
        """One k step at `k` of `b_tile`: the B fragments of the warp's columns loaded, then the mma instructions
        with the A fragments at `a_at` (one a tile row)."""
        stmts: list[S.Stmt] = []
        for ni in range(0, self.tiles_n, 1 if self._b_tf32 else 2):
            n = col + ni * MMA_N
            if self._b_tf32:
                stmts.append(load_b_tf32(_at(rb, ni), b_tile, k, n, lane))
            elif self.b_k_major:
                stmts.append(S.EvaluateStmt(load_b(_at(rb, ni), b_tile, n, k, lane)))
            else:
                stmts.append(S.EvaluateStmt(load_b_trans(_at(rb, ni), b_tile, k, n, lane)))
        for mi in range(self.tiles_m):
            for ni in range(self.tiles_n):
                stmts.append(S.EvaluateStmt(self.mma(a_at[mi], _at(rb, ni),
                                                     self.accumulator.tile(acc, mi * MMA_M, ni * MMA_N))))
        return S.seq(stmts)

    @property
    def _b_tf32(self) -> bool:
        """Whether B fragments are read with plain loads: tf32 from a [k, n] tile."""
        return self.dtype.name == "float32" and not self.b_k_major


def _at(regs: Any, index: int) -> E.Expr:
    """The address of the first register of row `index` of a fragment tensor."""
    return E.Address(semantics.element(E.convert(regs), (index, 0)))


def load_a(regs: Any, tile: Any, row: Any, col: Any, lane: Any) -> E.Intrinsic:
    """`ldmatrix_x4` of the A fragment of the 16-row block of `tile` (k along a row) whose first element is (`row`,
    `col`): 16 x 16 of 16-bit elements (an m16n8k16 operand) or 16 x 8 of 32-bit ones (m16n8k8 tf32). Lane `l`
    addresses row `l % 16`, the `l / 16`-th 16 bytes."""
    vector = _row_elements(tile, "load_a()")
    return ldmatrix_x4(regs, _address(tile, row + lane % 16, col + lane // 16 * vector))


def load_b(regs: Any, tile: Any, row: Any, col: Any, lane: Any) -> E.Intrinsic:
    """`ldmatrix_x4` of the B fragments of two 8-column mma tiles from `tile` with k along a row (`[n, k]`): rows
    `row` to `row + 15` are the two tiles' columns (registers 0-1 the first's, 2-3 the second's), from column
    `col` one k step (16 of 16-bit elements, 8 of 32-bit). Lane `l` addresses row `8 (l / 16) + l % 8`, the
    `(l / 8) % 2`-th 16 bytes."""
    vector = _row_elements(tile, "load_b()")
    return ldmatrix_x4(regs, _address(tile, row + lane // 16 * 8 + lane % 8, col + lane // 8 % 2 * vector))


def load_b_trans(regs: Any, tile: Any, row: Any, col: Any, lane: Any) -> E.Intrinsic:
    """`ldmatrix_x4_trans` of the B fragments of two 8-column mma tiles from `tile` (16-bit elements) with n along
    a row (`[k, n]`): rows `row` to `row + 15` (one k step), columns `col` to `col + 15` (registers 0-1 the first
    8, 2-3 the next). Lane `l` addresses row `l % 16`, the `l / 16`-th 16 bytes."""
    if _row_elements(tile, "load_b_trans()") != 8:
        raise TypeError("load_b_trans() transposes 16-bit elements; read a tf32 [k, n] tile with load_b_tf32()")
    return ldmatrix_x4_trans(regs, _address(tile, row + lane % 16, col + lane // 16 * 8))


def load_b_tf32(regs: Any, tile: Any, row: Any, col: Any, lane: Any) -> S.Stmt:
    """The tf32 B fragment of the 8-column mma tile at (`row`, `col`) of an f32 `tile` with n along a row (`[k,
    n]`), read with two 32-bit loads into `regs` (2 f32 registers): `B[t, g]` and `B[t + 4, g]` with `g = l / 4`,
    `t = l % 4`."""
    if _row_elements(tile, "load_b_tf32()") != 4:
        raise TypeError("load_b_tf32() reads a tile of 32-bit elements")
    regs = E.convert(regs)
    stores = []
    for r in range(2):
        value = semantics.element(E.convert(tile), (row + lane % 4 + 4 * r, col + lane // 4))
        target = semantics.element(regs, (r,))
        stores.append(S.BufferStoreStmt(regs, target.indices, semantics.convert_to(value, target.type)))
    return S.seq(stores)


def tf32_b_tile(shape: Sequence[int]) -> TensorType:
    """The tensor type of a shared `[k, n]` f32 tile that `load_b_tf32` reads without bank conflicts: rows padded
    by 8 f32s (32 bytes). A fragment load reads 4 consecutive rows at 8 consecutive columns; their rows start 8
    banks apart, so the 32 lanes read 32 different banks (a 128-byte swizzle, which moves 16-byte chunks, puts two
    of the 4 rows' pairs of chunks on the same banks). `n` is a multiple of 32 (rows of whole 128-byte lines)."""
    dims = tuple(shape)
    if len(dims) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims) \
            or dims[1] % 32:
        raise ValueError(f"tf32_b_tile(): the shape is [k, n] with n a positive multiple of 32, got {list(dims)!r}")
    return padded_tile(float32, dims, TF32_B_PAD)


def _row_elements(tile: Any, what: str) -> int:
    """The elements of 16 bytes of `tile`'s type, which must be a two-dimensional tensor of 16- or 32-bit ones."""
    t = E.convert(tile).type
    t = t.base if not isinstance(t, TensorType) and isinstance(getattr(t, "base", None), TensorType) else t
    if not isinstance(t, TensorType) or len(t.shape) != 2 or t.dtype.nbytes not in (2, 4):
        raise TypeError(f"{what} reads a two-dimensional tile of 16- or 32-bit elements, got {t}")
    return ROW_BYTES // t.dtype.nbytes


def _address(tile: Any, row: Any, col: Any) -> E.Expr:
    return E.Address(semantics.element(E.convert(tile), (row, col)))
