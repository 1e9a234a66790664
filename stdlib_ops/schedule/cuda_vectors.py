"""The rule-based CUDA schedule of an element-wise output with 128-bit accesses.

An output with no reduction whose innermost extent is a known multiple of the vector's lanes (`LANES_BYTES` bytes
of the widest tensor accessed along it: 4 f32, 8 f16 or bf16) is computed a vector at a time: each thread takes
`VECTORS` vectors a round (a grid-stride loop over the output's vectors, consecutive threads on consecutive
vectors), first loads every input read contiguously along the innermost axis (`x[..., j]` with nothing else
depending on `j`) as one vector access per vector (`copy_vector_16`: LDG.E.128), then computes the lanes in
registers and stores them as one vector access (STG.E.128). An input read independently of the innermost axis (a
column, a scalar) is read once per vector (the lanes share the read); any other read (a flip, a strided or
transposed view) stays an element read per lane.

A vector access needs its address aligned to its width. The offsets the kernel adds keep the alignment of the
tensors' base addresses (every row of a tensor read or stored in vectors is a whole number of vectors), so the
kernel tests those (`address_aligned`) and takes the element-wise schedule it is given instead when one is not
(an offset view from DLPack, a numpy slice on the emulator): a misaligned vector access never happens.

Fused into a graph's kernel, the vector load of an input that a prologue computes loads the prologue's own inputs
as vectors where they are read along the innermost axis (`stdlib_ops.fusion.rewrite`), with the alignment test of
that input made of theirs; `contiguous_reads`, `lane_value`, `vector_copy` and `aligned_test` serve both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from hidet_lang.cuda import blockIdx, gridDim, threadIdx
from hidet_lang.ir.expr import Address, BinaryOp, Constant, Expr, IfThenElse, TensorElement, Var
from hidet_lang.ir.functor import IRRewriter, collect, substitute
from hidet_lang.ir.intrinsics import ADDRESS_ALIGNED, VECTOR_COPY_BYTES, copy_vector_name, intrinsic
from hidet_lang.ir.stmt import BufferStoreStmt, DeclareStmt, EvaluateStmt, ForStmt, IfStmt, Stmt, seq
from hidet_lang.ir.types import DataType, TensorType, int32
from stdlib_ops.compute.nodes import ArgReduceExpr, ComputeTensor, ReduceExpr
from stdlib_ops.schedule.cuda_groups import unflatten
from stdlib_ops.schedule.reductions import extent_product

LANES_BYTES = 16
"""The width of a vector access: 128 bits, the widest load and store of a thread."""
VECTORS = 2
"""The vectors a thread loads before it computes and stores them (its independent loads in flight)."""


@dataclass(frozen=True)
class VectorPlan:
    """How an output is computed a vector at a time: `lanes` elements a vector, the element reads loaded as
    vectors (`contiguous`, each `x[..., j]` on the innermost axis `j`) and the tensors whose alignment the kernel
    tests before its vector path (the output's parameter, then the bases of the contiguous reads)."""

    lanes: int
    contiguous: tuple[TensorElement, ...]
    aligned: tuple[Var, ...]


def vector_plan(out: ComputeTensor, param: Var, axes: tuple[Var, ...], value: Expr) -> VectorPlan | None:
    """The vector plan of `out` (stored to `param`; its element at `axes` is `value`), or None when its innermost
    extent is not a known multiple of a vector's lanes, or its value holds a reduction."""
    if not axes or collect(value, (ReduceExpr, ArgReduceExpr)):
        return None
    last, extent = axes[-1], out.shape[-1]
    candidates = [r for r in collect(value, TensorElement) if _along(r, last)]
    widest = max((_dtype(r.base).nbytes for r in candidates), default=0)
    lanes = LANES_BYTES // max(out.dtype.nbytes, widest)
    if lanes < 2 or not _whole_vectors(extent, lanes) or lanes * out.dtype.nbytes not in VECTOR_COPY_BYTES:
        return None
    contiguous = contiguous_reads(value, last, lanes)
    return VectorPlan(lanes, contiguous, (param, *dict.fromkeys(r.base for r in contiguous)))


def contiguous_reads(value: Expr, last: Var, lanes: int) -> tuple[TensorElement, ...]:
    """The element reads of `value` that load as vectors of `lanes` along `last` (the innermost axis, at a
    multiple of `lanes`): `x[..., last]` with no other index depending on `last`, of a tensor whose rows are whole
    vectors of a width a vector copy has. Each one once, in order."""
    return tuple(r for r in dict.fromkeys(collect(value, TensorElement))
                 if _along(r, last) and lanes * _dtype(r.base).nbytes in VECTOR_COPY_BYTES
                 and _whole_vectors(r.base.type.shape[-1], lanes))


def vector_copy(dst: Expr, src: Expr, nbytes: int) -> Stmt:
    """`copy_vector_<nbytes>(dst, src)` as a statement."""
    return EvaluateStmt(intrinsic(copy_vector_name(nbytes), dst, src))


def aligned_test(tensor: Var, width: int) -> Expr:
    """Whether the first element of `tensor` is at a multiple of `width` bytes (an i32 condition)."""
    zero = tuple(Constant(0, int32) for _ in tensor.type.shape)
    return BinaryOp("!=", intrinsic(ADDRESS_ALIGNED, Address(TensorElement(tensor, zero)), Constant(width, int32)),
                    Constant(0, int32))


def vector_kernel(plan: VectorPlan, out: ComputeTensor, param: Var, axes: tuple[Var, ...], value: Expr,
                  fallback: Stmt, block: int, names: Iterator[int]) -> tuple[Stmt, Expr]:
    """The body and grid of a kernel of `block` threads computing `out` by `plan`, taking `fallback` (an
    element-wise body, any grid) when a tensor it accesses in vectors is not aligned to them."""
    lanes = plan.lanes
    vectors = BinaryOp("/", extent_product(tuple(out.shape)), Constant(lanes, int32))
    first = BinaryOp("+", BinaryOp("*", blockIdx.x, Constant(block * VECTORS, int32)), threadIdx.x)
    stride = BinaryOp("*", gridDim.x, Constant(block * VECTORS, int32))
    start = Var(f"vector{next(names)}", int32)
    loads: list[Stmt] = []
    stores: list[Stmt] = []
    for u in range(VECTORS):
        index = Var(f"v{next(names)}", int32)
        at = tuple(Var(f"{a.name}_{next(names)}", int32) for a in axes)
        in_range = BinaryOp("<", index, vectors)
        registers = {r: Var(f"{r.base.name}_vector{next(names)}", TensorType(_dtype(r.base), (lanes,)))
                     for r in plan.contiguous}
        copies = [vector_copy(Address(TensorElement(reg, (Constant(0, int32),))),
                              Address(substitute(r, dict(zip(axes, at)))), lanes * reg.type.dtype.nbytes)
                  for r, reg in registers.items()]
        loads += [DeclareStmt(index, BinaryOp("+", start, Constant(u * block, int32))),
                  *unflatten(BinaryOp("*", index, Constant(lanes, int32)), at, tuple(out.shape)),
                  *(DeclareStmt(reg) for reg in registers.values()),
                  IfStmt(in_range, seq(copies)) if copies else seq([])]
        result = Var(f"{param.name}_vector{next(names)}", TensorType(out.dtype, (lanes,)))
        lane_values = [BufferStoreStmt(result, (Constant(c, int32),), lane_value(value, axes, at, registers, c))
                       for c in range(lanes)]
        store = vector_copy(Address(TensorElement(param, at)), Address(TensorElement(result, (Constant(0, int32),))),
                            lanes * out.dtype.nbytes)
        stores.append(IfStmt(in_range, seq([DeclareStmt(result), *lane_values, store])))
    vector_loop = ForStmt(start, first, vectors, stride, seq([*loads, *stores]))
    # no address is taken of an empty output's elements (the emulator's checking mode would report it)
    aligned: Expr = BinaryOp(">", vectors, Constant(0, int32))
    for tensor in plan.aligned:
        aligned = BinaryOp("&&", aligned, aligned_test(tensor, lanes * _dtype(tensor).nbytes))
    blocks = _ceil_div(vectors, block * VECTORS)
    grid = IfThenElse(BinaryOp(">", blocks, Constant(0, int32)), blocks, Constant(1, int32))
    return IfStmt(aligned, vector_loop, fallback), grid


def _along(r: TensorElement, last: Var) -> bool:
    """Whether read `r` is `x[..., last]` with no other index depending on `last`, on a tensor parameter."""
    if not (isinstance(r.base, Var) and isinstance(r.base.type, TensorType) and r.indices):
        return False
    return r.indices[-1] is last and all(last not in collect(i, Var) for i in r.indices[:-1])


def _whole_vectors(extent: object, lanes: int) -> bool:
    return isinstance(extent, int) and extent > 0 and extent % lanes == 0


def _dtype(tensor: Expr) -> DataType:
    t = tensor.type
    assert isinstance(t, TensorType)
    return t.dtype


def _ceil_div(a: Expr, b: int) -> Expr:
    return BinaryOp("/", BinaryOp("+", a, Constant(b - 1, int32)), Constant(b, int32))


class _LaneReads(IRRewriter):
    """Replaces the reads loaded as vectors by their lane `lane` of the registers holding them."""

    def __init__(self, registers: dict[TensorElement, Var], lane: int) -> None:
        super().__init__()
        self.registers, self.lane = registers, lane

    def visit_TensorElement(self, e: TensorElement) -> Expr:
        reg = self.registers.get(e)
        if reg is not None:
            return TensorElement(reg, (Constant(self.lane, int32),))
        return self.rebuild(e)


def lane_value(value: Expr, axes: tuple[Var, ...], at: tuple[Expr, ...], registers: dict[TensorElement, Var],
               lane: int) -> Expr:
    """`value` (over `axes`) at lane `lane` of the vector whose first element is at `at`, the reads in `registers`
    (of `contiguous_reads`) taken from the registers they were loaded to."""
    inner = _LaneReads(registers, lane).visit(value)
    coords: list[Expr] = list(at)
    coords[-1] = BinaryOp("+", at[-1], Constant(lane, int32)) if lane else at[-1]
    return substitute(inner, dict(zip(axes, coords)))


__all__ = ["LANES_BYTES", "VECTORS", "VectorPlan", "aligned_test", "contiguous_reads", "lane_value", "vector_copy",
           "vector_kernel", "vector_plan"]
