"""The rule-based CUDA schedule: one kernel per task, with the launch shape derived from the output.

- Outputs without a reduction at the top (injective computations, and computations whose reductions are only
  inside other expressions): a thread computes `ELEMENTS` elements a round, 256 threads a block, consecutive
  threads on consecutive elements; reductions run as loops in the thread, hoisted as on the CPU. A single output
  with no reduction whose innermost extent is a known multiple of a vector's lanes is computed a vector at a
  time with 128-bit loads and stores (`cuda_vectors`), element-wise where its tensors are not aligned to them.
- An output whose reductions several of its elements share (a row's statistics in a layer norm), or whose
  reductions hold nested ones (a variance's mean): a block per group of elements sharing them, the block
  computing each shared reduction once (`cuda_groups`), so the work stays linear in the input.
- Otherwise, an output whose value has one reduction at the top (`sum`, `mean`, `max`, `min`, `prod`, possibly
  inside an element-wise expression): one warp per output element; the lanes stride over the reduced index space
  and combine their partial results with `shfl_down_sync`. A reduction of fewer terms than a warp's lanes known
  at build time (a pooling window) is a loop in the thread instead, as in the element-wise schedule: consecutive
  threads on consecutive output elements, each window read once.

Shapes may be symbolic: the grid is an expression of the size parameters. A task with several outputs gets the
launch of its first output and loops over the others' elements in a grid-stride loop.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from hidet_lang.cuda import FULL_MASK, blockIdx, shfl_down_sync, threadIdx
from hidet_lang.ir.expr import BinaryOp, Cast, Constant, Expr, IfThenElse, Intrinsic, Var, convert
from hidet_lang.ir.func import CudaAttrs, FuncAttrs, FuncKind, Function, IRModule
from hidet_lang.ir.functor import substitute
from hidet_lang.ir.stmt import AssignStmt, BufferStoreStmt, DeclareStmt, ForStmt, IfStmt, LoopKind, Stmt, seq
from hidet_lang.ir.types import int32, void
from stdlib_ops.compute.nodes import ComputeTensor, ReduceExpr
from stdlib_ops.schedule.cuda_groups import block_per_group, shared_reduction_axes, unflatten
from stdlib_ops.schedule.cuda_vectors import vector_kernel, vector_plan
from stdlib_ops.schedule.inline import inline_computes
from stdlib_ops.schedule.reductions import (
    ReductionLowering,
    Scope,
    combine,
    extent_product,
    identity,
    outermost_reductions,
)
from stdlib_ops.schedule.signature import kernel_signature

BLOCK = 256
WARP = 32
ELEMENTS = 4
"""The elements a thread of the element-wise schedule computes a round."""


def schedule_cuda(name: str, inputs: tuple[Var, ...], outputs: tuple[ComputeTensor, ...]) -> IRModule:
    """A module with one `cuda_kernel` called `name` computing `outputs` from `inputs` (kernel contract order)."""
    signature = kernel_signature(inputs, outputs)
    names = itertools.count(1)
    bodies = [_value_at(out, names) for out in outputs]
    first_out, (first_axes, first_value) = outputs[0], bodies[0]
    top = outermost_reductions(first_value)
    group = shared_reduction_axes(first_axes, first_value) if len(outputs) == 1 else None
    if group is not None:
        body, grid = block_per_group(first_out, signature.outputs[0], first_axes, first_value, group, BLOCK, names)
    elif len(outputs) == 1 and len(top) == 1 and isinstance(top[0], ReduceExpr) and not _fits_a_thread(top[0]):
        body, grid = _warp_per_element(first_out, signature.outputs[0], first_axes, first_value, top[0], names)
    elif len(outputs) == 1 and (plan := vector_plan(first_out, signature.outputs[0], first_axes, first_value)):
        fallback = _grid_stride(first_out, signature.outputs[0], first_axes, first_value,
                                extent_product(tuple(first_out.shape)), names)
        body, grid = vector_kernel(plan, first_out, signature.outputs[0], first_axes, first_value, fallback, BLOCK,
                                   names)
    else:
        total = extent_product(tuple(first_out.shape))
        # at least one block: an empty output (an empty slice) launches one that loops over nothing
        nonempty = BinaryOp(">", convert(total), Constant(0, int32))
        grid = IfThenElse(nonempty, _ceil_div(total, BLOCK * ELEMENTS), Constant(1, int32))
        body = seq([_grid_stride(out, param, axes, value, extent_product(tuple(out.shape)), names)
                    for out, param, (axes, value) in zip(outputs, signature.outputs, bodies)])
    attrs = FuncAttrs(kind=FuncKind.CUDA_KERNEL,
                      cuda=CudaAttrs(grid_dim=(grid,), block_dim=(Constant(BLOCK, int32),)))
    return IRModule((Function(name, signature.params, void, body, attrs),))


def _fits_a_thread(r: ReduceExpr) -> bool:
    """Whether reduction `r` has fewer terms than a warp has lanes (a pooling window, a short row), known at build
    time: a thread reduces it alone, since a warp would leave lanes idle and pay five rounds of shuffles."""
    extents = [e.value if isinstance(e, Constant) else e for e in r.extents]
    return all(isinstance(e, int) for e in extents) and math.prod(extents) < WARP


def _value_at(out: ComputeTensor, names: Iterator[int]) -> tuple[tuple[Var, ...], Expr]:
    axes = tuple(Var(f"i{k}_{next(names)}", int32) for k in range(len(out.shape)))
    return axes, substitute(inline_computes(out), dict(zip(out.axes, axes)))


def _ceil_div(a: Expr, b: int) -> Expr:
    if isinstance(a, Constant):
        return Constant(max(1, (a.value + b - 1) // b), int32)
    return BinaryOp("/", BinaryOp("+", a, Constant(b - 1, int32)), Constant(b, int32))


def _store_index(axes: tuple[Var, ...]) -> tuple[Expr, ...]:
    return axes or (Constant(0, int32),)


def _grid_stride(out: ComputeTensor, param: Var, axes: tuple[Var, ...], value: Expr, total: Expr,
                 names: Iterator[int]) -> Stmt:
    """Each thread computes `ELEMENTS` elements of `out` a round, `BLOCK` apart (so a warp's accesses stay
    consecutive, and a thread has that many independent loads in flight), the rounds a grid's elements apart."""
    base = Var(f"base{next(names)}", int32)
    k = Var(f"k{next(names)}", int32)
    flat = Var(f"e{next(names)}", int32)
    scopes = [Scope(), Scope()]
    lowered = ReductionLowering(scopes, dict.fromkeys(axes, 1), names).value(value, 1)
    element = seq([*unflatten(flat, axes, tuple(out.shape)), *scopes[0].prelude, *scopes[1].prelude,
                   BufferStoreStmt(param, _store_index(axes), lowered)])
    one_round = seq([DeclareStmt(flat, BinaryOp("+", base, BinaryOp("*", k, Constant(BLOCK, int32)))),
                     IfStmt(BinaryOp("<", flat, total), element)])
    first = BinaryOp("+", BinaryOp("*", blockIdx.x, Constant(BLOCK * ELEMENTS, int32)), threadIdx.x)
    stride = BinaryOp("*", Intrinsic("gridDim.x", (), int32), Constant(BLOCK * ELEMENTS, int32))
    rounds = ForStmt(k, Constant(0, int32), Constant(ELEMENTS, int32), Constant(1, int32), one_round, LoopKind.UNROLL)
    return ForStmt(base, first, total, stride, rounds)


def _warp_per_element(out: ComputeTensor, param: Var, axes: tuple[Var, ...], value: Expr, r: ReduceExpr,
                      names: Iterator[int]) -> tuple[Stmt, Expr]:
    """One warp per output element: lanes reduce strided slices of `r`, then combine through shuffles."""
    warps = BLOCK // WARP
    total = extent_product(tuple(out.shape))
    element = Var(f"element{next(names)}", int32)
    lane = Var(f"lane{next(names)}", int32)
    acc = Var(f"acc{next(names)}", r.dtype)
    k = Var(f"k{next(names)}", int32)
    last = BinaryOp("-", total, Constant(1, int32))
    clamped = Intrinsic("min", (element, last), int32)
    scopes = [Scope(), Scope()]
    level_of = dict.fromkeys(axes, 0) | dict.fromkeys(r.axes, 1)
    lowering = ReductionLowering(scopes, level_of, names)
    term = lowering.value(r.body, 1)
    kind = "sum" if r.kind == "mean" else r.kind
    lane_loop = ForStmt(k, lane, extent_product(r.extents), Constant(WARP, int32),
                        seq([*unflatten(k, r.axes, r.extents), *scopes[1].prelude,
                             AssignStmt(acc, combine(kind, acc, term))]))
    shuffles: list[Stmt] = []
    for offset in (16, 8, 4, 2, 1):
        # every lane shuffles: the value goes through a variable, since `combine` of max/min reads its second
        # operand only where the first is not NaN (`extremum`'s select)
        other = Var(f"other{next(names)}", r.dtype)
        shuffles += [DeclareStmt(other, shfl_down_sync(FULL_MASK, acc, offset)),
                     AssignStmt(acc, combine(kind, acc, other))]
    reduced: Expr = acc
    if r.kind == "mean":
        count = extent_product(r.extents)
        reduced = BinaryOp("/", acc, count if count.type == r.dtype else _cast(count, r.dtype))
    result = lowering.value(substitute(value, {r: reduced}), 0)
    store_guard = BinaryOp("&&", BinaryOp("<", element, total), BinaryOp("==", lane, Constant(0, int32)))
    body = seq([
        DeclareStmt(element, BinaryOp("+", BinaryOp("*", blockIdx.x, Constant(warps, int32)),
                                      BinaryOp("/", threadIdx.x, Constant(WARP, int32)))),
        DeclareStmt(lane, BinaryOp("%", threadIdx.x, Constant(WARP, int32))),
        *unflatten(clamped, axes, tuple(out.shape)),
        DeclareStmt(acc, identity(kind, r.dtype)),
        *scopes[0].prelude,
        lane_loop,
        *shuffles,
        IfStmt(store_guard, BufferStoreStmt(param, _store_index(axes), result)),
    ])
    return body, _ceil_div(total, warps)


def _cast(e: Expr, t: object) -> Expr:
    return Cast(e, t)
