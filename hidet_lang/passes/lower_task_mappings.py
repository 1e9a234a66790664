"""The `lower_task_mappings` pass: task-mapping loops become index arithmetic and plain loops.

Requires: any IR. Ensures: no `ForMappingStmt` is left. A spatial mapping turns the worker index into task
coordinates by division and remainder (no loop); a repeat mapping becomes a loop nest (unrolled where its
attrs say 'u'); a composition splits the worker into `worker / inner.num_workers` for the outer mapping and
`worker % inner.num_workers` for the inner one, and combines coordinates as `outer * inner_extent + inner`.
A non-constant worker index is guarded with `worker < num_workers`, unless the worker is a thread index
whose block dimension is a constant no larger than the mapping's worker count.
"""

from __future__ import annotations

from collections.abc import Callable

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import IRRewriter
from hidet_lang.ir.mapping import ComposedMapping, RepeatMapping, SpatialMapping, TaskMapping
from hidet_lang.ir.types import int32

BodyMaker = Callable[[list[E.Expr]], S.Stmt]


def _c(value: int) -> E.Constant:
    return E.Constant(value, int32)


def worker_bounds(func: Function) -> dict[str, int]:
    """Exclusive upper bounds of the thread indices of a CUDA kernel with constant block dimensions."""
    cuda = func.attrs.cuda
    if func.attrs.kind != "cuda_kernel" or cuda is None:
        return {}
    return {f"threadIdx.{axis}": int(d.value) for axis, d in zip("xyz", cuda.block_dim) if isinstance(d, E.Constant)}


class _MappingLowerer(IRRewriter):
    def __init__(self, bounds: dict[str, int]) -> None:
        super().__init__()
        self.counter = 0
        self.bounds = bounds

    def loop_var(self) -> E.Var:
        self.counter += 1
        return E.Var(f"_t{self.counter}", int32)

    def visit_ForMappingStmt(self, s: S.ForMappingStmt) -> S.Stmt:
        body = self.visit(s.body)
        worker = s.worker if s.worker.type == int32 else E.Cast(s.worker, int32)

        def make_body(coords: list[E.Expr]) -> S.Stmt:
            decls = [S.DeclareStmt(v, c, span=s.span) for v, c in zip(s.loop_vars, coords)]
            return S.seq([*decls, body])

        lowered = self.tasks(s.mapping, worker, make_body)
        bound = self.bounds.get(worker.name) if isinstance(worker, E.Intrinsic) else None
        if not isinstance(worker, E.Constant) and not (bound is not None and bound <= s.mapping.num_workers):
            lowered = S.IfStmt(E.BinaryOp("<", worker, _c(s.mapping.num_workers)), lowered, span=s.span)
        return lowered

    def tasks(self, m: TaskMapping, worker: E.Expr, make_body: BodyMaker) -> S.Stmt:
        """Statements running `make_body(task)` for each task of `worker` under `m`."""
        if isinstance(m, SpatialMapping):
            coords: list[E.Expr] = [_c(0)] * len(m.shape)
            stride = 1
            for d in sorted(range(len(m.shape)), key=m.ranks.__getitem__, reverse=True):
                q = worker if stride == 1 else E.BinaryOp("/", worker, _c(stride))
                is_outermost = stride * m.shape[d] == m.num_workers
                coords[d] = q if is_outermost else E.BinaryOp("%", q, _c(m.shape[d]))
                stride *= m.shape[d]
            return make_body(coords)
        if isinstance(m, RepeatMapping):
            order = sorted(range(len(m.shape)), key=m.ranks.__getitem__)
            loop_vars = {d: self.loop_var() for d in order}
            stmt = make_body([loop_vars[d] for d in range(len(m.shape))])
            for d in reversed(order):
                kind = S.LoopKind.UNROLL if m.attrs[d] == "u" else S.LoopKind.PLAIN
                stmt = S.ForStmt(loop_vars[d], _c(0), _c(m.shape[d]), _c(1), stmt, kind)
            return stmt
        if isinstance(m, ComposedMapping):
            inner, outer = m.inner, m.outer
            n_inner = inner.num_workers
            outer_worker = worker if n_inner == 1 else E.BinaryOp("/", worker, _c(n_inner))
            inner_worker = _c(0) if n_inner == 1 else E.BinaryOp("%", worker, _c(n_inner))
            extents = inner.task_shape

            def outer_body(outer_coords: list[E.Expr]) -> S.Stmt:
                def inner_body(inner_coords: list[E.Expr]) -> S.Stmt:
                    return make_body([
                        E.BinaryOp("+", E.BinaryOp("*", o, _c(ext)), i)
                        for o, i, ext in zip(outer_coords, inner_coords, extents)
                    ])

                return self.tasks(inner, inner_worker, inner_body)

            return self.tasks(outer, outer_worker, outer_body)
        raise TypeError(f"cannot lower task mapping {m!r}")


def lower_task_mappings(node: S.Stmt, bounds: dict[str, int] | None = None) -> S.Stmt:
    """Expand every task-mapping loop in `node` (see the module docstring); `bounds` are known exclusive upper
    bounds of thread-index intrinsics (see `worker_bounds`)."""
    return _MappingLowerer(bounds or {}).visit(node)
