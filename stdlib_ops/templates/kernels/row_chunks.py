"""How the threads sharing a row of a CUDA row template (`normalization_cuda`, `reduction_cuda`) read and write it:
in chunks of `lanes` consecutive values, one 16-byte vector each (8 f16 or bf16, 4 f32).

A row of `cols` columns is shared by `width` threads. Where the row can be accessed in vectors (`RowChunks.vectors`:
`cols` a multiple of `lanes` and every tensor's row address 16-byte aligned), thread `t`'s chunk `j` is columns
`[(t + j width) lanes, (t + j width + 1) lanes)`, loaded and stored with `copy_vector` (LDG.E.128 / STG.E.128: a
warp's 32 vectors are 512 consecutive bytes). Otherwise (an odd row length, a misaligned view) the same thread
takes columns `t + (j lanes + k) width` for `k < lanes`, element by element, so that a warp's accesses are still
consecutive; past the row's end a load gives the `fill` value and a store is skipped. Either way value `k` of
chunk `j` is register slot `j lanes + k`, so a kernel computes on its registers once, whichever way they were
loaded: only its loads and stores branch on the row's kind.

Every access keeps the fusion contract: an input is read by element reads or `copy_vector` loads, an output written
by element stores or `copy_vector` stores, and the vector path is guarded by `address_aligned` tests of the rows'
first elements (with rows a whole number of vectors, a fused prologue's inputs are tested at their bases, which the
rewrite does).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hidet_lang.cuda import address_aligned, copy_vector
from hidet_lang.frontend import semantics
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.types import DataType, TensorType, float32

VECTOR_BYTES = 16
"""The width of a vector access: 128 bits, the widest load and store of a thread."""


def vector_lanes(dtype: DataType) -> int:
    """The elements of `dtype` in one 16-byte vector."""
    return VECTOR_BYTES // dtype.nbytes


@dataclass(frozen=True)
class RowChunks:
    """A row of `dtype` values shared by `width` threads in chunks of `lanes` values (`vector_lanes(dtype)`, or 1
    where `vectorize` is off: no vector access at all). `share(lane, cols, vector)` gives one thread's accesses."""

    dtype: DataType
    width: int
    vectorize: bool = True
    _names: Any = field(default_factory=itertools.count, compare=False, repr=False)

    @property
    def lanes(self) -> int:
        """The values of a chunk."""
        return vector_lanes(self.dtype) if self.vectorize else 1

    def chunks(self, values: int) -> int:
        """The chunks a thread keeps to hold `values` values of the row (at least one)."""
        return max(1, -(-values // self.lanes))

    def vectors(self, cols: Any, addresses: Sequence[E.Expr]) -> E.Expr | bool:
        """Whether a row of `cols` columns is accessed in vectors: `cols` a positive multiple of `lanes` and every
        address in `addresses` (the first elements of the rows accessed, `~x[row, 0]`) 16-byte aligned. False
        without vectors."""
        if not self.vectorize:
            return False
        whole = semantics.logical("and", semantics.binary(">", cols, 0),
                                  semantics.binary("==", semantics.binary("%", cols, self.lanes), 0))
        for address in addresses:
            aligned = semantics.binary("!=", address_aligned(address, VECTOR_BYTES), 0)
            whole = semantics.logical("and", whole, aligned)
        return whole

    def share(self, lane: Any, cols: Any, vector: Any) -> RowShare:
        """Thread `lane`'s accesses of a row of `cols` columns, in vectors where `vector` (an IR condition, or a
        Python bool) holds."""
        return RowShare(self, lane, cols, vector)

    def register(self, dtype: DataType, count: int) -> E.Var:
        """A fresh register tensor of `count` `dtype` values (declare it with `S.DeclareStmt`)."""
        return E.Var(f"chunk{next(self._names)}", TensorType(dtype, (count,)))


@dataclass(frozen=True)
class RowShare:
    """One thread's chunks of a row (`RowChunks.share`)."""

    layout: RowChunks
    lane: Any
    cols: Any
    vector: Any

    def column(self, j: Any, k: int) -> E.Expr:
        """The column of value `k` of the thread's chunk `j`."""
        if self.vector is False:
            return self.element_column(j, k)
        return E.IfThenElse(semantics.condition(self.vector, "a row's kind"), self.vector_column(j, k),
                            self.element_column(j, k))

    def vector_column(self, j: Any, k: int) -> E.Expr:
        """The column of value `k` of chunk `j` in a row accessed in vectors."""
        lanes, width = self.layout.lanes, self.layout.width
        return semantics.binary("+", semantics.binary("*", semantics.binary(
            "+", self.lane, semantics.binary("*", j, width)), lanes), k)

    def element_column(self, j: Any, k: int) -> E.Expr:
        """The column of value `k` of chunk `j` in a row accessed element by element."""
        lanes, width = self.layout.lanes, self.layout.width
        return semantics.binary("+", self.lane, semantics.binary("*", semantics.binary(
            "+", semantics.binary("*", j, lanes), k), width))

    def valid(self, j: Any, k: int) -> E.Expr:
        """Whether value `k` of chunk `j` is in the row."""
        return semantics.binary("<", self.column(j, k), self.cols)

    def load(self, regs: E.Expr, slot: int, tensor: E.Expr, prefix: tuple[Any, ...], j: Any, fill: Any) -> S.Stmt:
        """Load chunk `j` of the row `tensor[*prefix, :]` into f32 registers `regs[slot:slot + lanes]`, `fill` (a
        float or an f32 expression) for the values past the row's end."""
        lanes = self.layout.lanes
        fill = semantics.cast(fill, float32)
        by_element = S.seq([
            S.BufferStoreStmt(regs, (E.convert(slot + k),), E.IfThenElse(
                semantics.binary("<", self.element_column(j, k), self.cols),
                semantics.cast(semantics.element(tensor, (*prefix, self.element_column(j, k))), float32), fill))
            for k in range(lanes)])
        if self.vector is False:
            return by_element
        raw = self.layout.register(self.layout.dtype, lanes)
        first = self.vector_column(j, 0)
        loaded = S.seq([
            S.DeclareStmt(raw),
            S.EvaluateStmt(copy_vector(E.Address(semantics.element(raw, (0,))),
                                       E.Address(semantics.element(tensor, (*prefix, first))), VECTOR_BYTES)),
            *(S.BufferStoreStmt(regs, (E.convert(slot + k),), semantics.cast(semantics.element(raw, (k,)), float32))
              for k in range(lanes))])
        past = S.seq([S.BufferStoreStmt(regs, (E.convert(slot + k),), fill)
                      for k in range(lanes)])
        vectored = S.IfStmt(semantics.binary("<", first, self.cols), loaded, past)
        return S.IfStmt(semantics.condition(self.vector, "a row's kind"), vectored, by_element)

    def store(self, tensor: E.Expr, prefix: tuple[Any, ...], j: Any, regs: E.Expr, slot: int) -> S.Stmt:
        """Store chunk `j` of the row `tensor[*prefix, :]` from f32 registers `regs[slot:slot + lanes]` (converted to
        the row's dtype); nothing past the row's end."""
        lanes, dtype = self.layout.lanes, self.layout.dtype

        def value(k: int) -> E.Expr:
            return semantics.cast(semantics.element(regs, (slot + k,)), dtype)

        by_element = S.seq([
            S.IfStmt(semantics.binary("<", self.element_column(j, k), self.cols), S.BufferStoreStmt(
                tensor, (*map(E.convert, prefix), self.element_column(j, k)), value(k)))
            for k in range(lanes)])
        if self.vector is False:
            return by_element
        out = self.layout.register(dtype, lanes)
        first = self.vector_column(j, 0)
        vectored = S.IfStmt(semantics.binary("<", first, self.cols), S.seq([
            S.DeclareStmt(out),
            *(S.BufferStoreStmt(out, (E.convert(k),), value(k)) for k in range(lanes)),
            S.EvaluateStmt(copy_vector(E.Address(semantics.element(tensor, (*prefix, first))),
                                       E.Address(semantics.element(out, (0,))), VECTOR_BYTES))]))
        return S.IfStmt(semantics.condition(self.vector, "a row's kind"), vectored, by_element)


__all__ = ["VECTOR_BYTES", "RowChunks", "RowShare", "vector_lanes"]
