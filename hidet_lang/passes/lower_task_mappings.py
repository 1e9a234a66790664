"""The `lower_task_mappings` pass: task-mapping loops become index arithmetic and plain loops.

Requires: any IR. Ensures: no `ForMappingStmt` is left. A spatial mapping turns the worker index into task
coordinates by division and remainder (no loop); a repeat mapping becomes a loop nest (unrolled where its
attrs say 'u'); a composition splits the worker into `worker / inner.num_workers` for the outer mapping and
`worker % inner.num_workers` for the inner one, and combines coordinates as `outer * inner_extent + inner`.
The arithmetic is in int32 (the worker converted), and divisions by 1 are left for `simplify`. A worker index
is guarded with `0 <= worker < num_workers` (one comparison, in the unsigned type of the worker's width, before
any conversion), unless it is known to lie in that range: a thread index whose block dimension is a constant no
larger than the mapping's worker count, or the variable of an enclosing `for` loop (the mapping sits in its
body) with a constant start >= 0, a positive constant step and a constant stop no larger than the worker count,
that nothing in the loop's body assigns, takes the address of or names as an asm output (a constant worker's
guard is a constant condition, which `simplify` removes). Every statement and expression the pass creates
carries the span of the mapping loop it comes from.
"""

from __future__ import annotations

from collections.abc import Callable

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import IRRewriter, collect
from hidet_lang.ir.mapping import ComposedMapping, RepeatMapping, SpatialMapping, TaskMapping
from hidet_lang.ir.node import at
from hidet_lang.ir.types import int32, unsigned_of

BodyMaker = Callable[[list[E.Expr]], S.Stmt]


def _c(value: int) -> E.Constant:
    return E.Constant(value, int32)


def worker_bounds(func: Function) -> dict[str, int]:
    """Exclusive upper bounds of the thread indices of a CUDA kernel with constant block dimensions.

    Requires: a function the kind rules passed (only a CUDA kernel has `attrs.cuda`). Ensures: `{"threadIdx.x": n,
    ...}` for each axis whose block dimension is a constant `n` (empty for other functions)."""
    cuda = func.attrs.cuda
    if cuda is None:
        return {}
    return {f"threadIdx.{axis}": int(d.value) for axis, d in zip("xyz", cuda.block_dim) if isinstance(d, E.Constant)}


def _is_written(var: E.Var, body: S.Stmt) -> bool:
    """Whether `body` may change `var`: it assigns it, takes its address, or names it as an asm output."""
    return (any(a.var is var for a in collect(body, S.AssignStmt))
            or any(a.expr is var for a in collect(body, E.Address))
            or any(o is var for asm in collect(body, S.AsmStmt) for o in asm.outputs))


def _int_constant(e: E.Expr) -> int | None:
    return e.value if isinstance(e, E.Constant) and type(e.value) is int else None


def loop_bound(s: S.ForStmt) -> int | None:
    """An exclusive upper bound `n` such that `0 <= s.var < n` holds everywhere in `s.body`, or None.

    Known when start, step and stop are integer constants, start >= 0 and step > 0 (the bound is the stop),
    and the body never writes the loop variable (see `_is_written`)."""
    start, stop, step = _int_constant(s.start), _int_constant(s.stop), _int_constant(s.step)
    if None in (start, stop, step) or start < 0 or step <= 0 or _is_written(s.var, s.body):
        return None
    return stop


class _MappingLowerer(IRRewriter):
    def __init__(self, bounds: dict[str, int]) -> None:
        super().__init__()
        self.bounds = bounds
        self.enclosing_loops: dict[E.Var, S.ForStmt] = {}  # the loops around the node being visited, by variable

    def visit_ForStmt(self, s: S.ForStmt) -> S.Stmt:
        self.enclosing_loops[s.var] = s  # a variable is declared once: no enclosing loop has the same one
        try:
            return self.rebuild(s)
        finally:
            del self.enclosing_loops[s.var]

    def is_bounded(self, worker: E.Expr, num_workers: int) -> bool:
        """Whether `0 <= worker < num_workers` is known where the mapping loop over `worker` runs."""
        bound = None
        if isinstance(worker, E.Intrinsic):
            bound = self.bounds.get(worker.name)
        elif isinstance(worker, E.Var) and worker in self.enclosing_loops:
            bound = loop_bound(self.enclosing_loops[worker])
        return bound is not None and bound <= num_workers

    def visit_ForMappingStmt(self, s: S.ForMappingStmt) -> S.Stmt:
        body = self.visit(s.body)
        with at(s.span):
            worker = E.Cast(s.worker, int32)  # `simplify` drops it for an int32 worker

            def make_body(coords: list[E.Expr]) -> S.Stmt:
                decls = [S.DeclareStmt(v, c) for v, c in zip(s.loop_vars, coords)]
                return S.seq([*decls, body])

            lowered = self.tasks(s.mapping, worker, make_body)
            if not self.is_bounded(s.worker, s.mapping.num_workers):
                lowered = S.IfStmt(_in_range(s.worker, s.mapping.num_workers), lowered)
        return lowered

    def tasks(self, m: TaskMapping, worker: E.Expr, make_body: BodyMaker) -> S.Stmt:
        """Statements running `make_body(task)` for each task of `worker` under `m`."""
        if isinstance(m, SpatialMapping):
            coords: dict[int, E.Expr] = {}
            stride = 1
            for d in sorted(range(len(m.shape)), key=m.ranks.__getitem__, reverse=True):
                q = E.BinaryOp("/", worker, _c(stride))
                # the outermost dim's quotient is below its extent already (the worker is below the count)
                is_outermost = stride * m.shape[d] == m.num_workers
                coords[d] = q if is_outermost else E.BinaryOp("%", q, _c(m.shape[d]))
                stride *= m.shape[d]
            return make_body([coords[d] for d in range(len(m.shape))])
        if isinstance(m, RepeatMapping):
            order = sorted(range(len(m.shape)), key=m.ranks.__getitem__)
            loop_vars = {d: E.Var(f"_t{d}", int32) for d in order}  # the emitters make names unique
            stmt = make_body([loop_vars[d] for d in range(len(m.shape))])
            attrs = m.loop_attrs
            for d in reversed(order):
                stmt = S.ForStmt(loop_vars[d], _c(0), _c(m.shape[d]), _c(1), stmt, S.LoopKind(attrs[d].kind),
                                 factor=attrs[d].factor)
            return stmt
        if isinstance(m, ComposedMapping):
            inner, outer = m.inner, m.outer
            n_inner = inner.num_workers
            outer_worker = E.BinaryOp("/", worker, _c(n_inner))
            inner_worker = E.BinaryOp("%", worker, _c(n_inner))
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


def _in_range(worker: E.Expr, num_workers: int) -> E.Expr:
    """`0 <= worker < num_workers` as one comparison: the worker (an integer, as the frontend requires) in the
    unsigned type of its width (`simplify` drops the conversion of an unsigned worker)."""
    unsigned = unsigned_of(worker.type)
    return E.BinaryOp("<", E.Cast(worker, unsigned), E.Constant(num_workers, unsigned))


def lower_task_mappings(node: S.Stmt, bounds: dict[str, int] | None = None) -> S.Stmt:
    """Expand every task-mapping loop in `node` (see the module docstring); `bounds` are known exclusive upper
    bounds of thread-index intrinsics (see `worker_bounds`).

    Requires: any IR. Ensures: no `ForMappingStmt` in the result; each worker runs exactly the tasks the
    mapping's Python-side semantics give it, and a worker at or past the mapping's count runs none."""
    return _MappingLowerer(bounds or {}).visit(node)
