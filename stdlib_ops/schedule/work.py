"""The work a scheduled kernel does, counted from its IR: how many input elements it reads.

`input_reads(module)` walks the module's kernel and adds, for every read of an input tensor's element, the product
of the trip counts of the loops around it (both branches of an `if` count, so the figure is an upper bound); a CUDA
kernel's count is that of its first thread (thread and block 0, whose loops run the most trips) times the threads
it launches. Sizes must be known: constants, or the values `sizes` gives the kernel's size parameters. This is how
the tests show a schedule's work to grow linearly with its input, never quadratically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FuncKind, IRModule
from hidet_lang.ir.functor import IRVisitor
from stdlib_ops.fusion.contract import the_kernel

_ARITHMETIC = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: int(a / b) if isinstance(a, int) and isinstance(b, int) else a / b,
    "%": lambda a, b: int(math.fmod(a, b)), "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "&&": lambda a, b: a and b, "||": lambda a, b: a or b,
}


def input_reads(module: IRModule, sizes: Mapping[str, int] | None = None) -> int:
    """How many input elements the kernel of `module` reads (an upper bound; see the module docstring), with the
    size parameters named in `sizes` at those values."""
    kernel = the_kernel(module)
    sizes = dict(sizes or {})
    env: dict[object, int] = {"threadIdx.x": 0, "blockIdx.x": 0}
    env |= {p: sizes[p.name] for p in kernel.params if p.name in sizes}
    threads = 1
    if kernel.attrs.kind == FuncKind.CUDA_KERNEL:
        grid = math.prod(_evaluate(g, env) for g in kernel.attrs.cuda.grid_dim)
        block = math.prod(_evaluate(b, env) for b in kernel.attrs.cuda.block_dim)
        env |= {"gridDim.x": grid, "blockDim.x": block}
        threads = grid * block
    inputs = {p for p in kernel.params if p.name not in sizes}
    counter = _ReadCounter(inputs, env)
    counter.visit(kernel.body)
    return counter.reads * threads


class _ReadCounter(IRVisitor):
    """Adds up the reads of `inputs`' elements, each weighted by the trips of the loops around it; a scalar
    declared from known values (a lane, a first index) and a loop's variable (at its first value) are known."""

    def __init__(self, inputs: set[E.Var], env: dict[object, int]) -> None:
        super().__init__()
        self.inputs, self.env = inputs, env
        self.weight = 1
        self.reads = 0

    def visit_TensorElement(self, e: E.TensorElement) -> None:
        if e.base in self.inputs:
            self.reads += self.weight
        self.visit_children(e)

    def visit_DeclareStmt(self, s: S.DeclareStmt) -> None:
        if s.init is not None:
            try:
                self.env[s.var] = _evaluate(s.init, self.env)
            except (ValueError, ZeroDivisionError):
                pass  # a value the loop bounds do not need (data, an accumulator)
        self.visit_children(s)

    def visit_ForStmt(self, s: S.ForStmt) -> None:
        start, stop, step = (_evaluate(x, self.env) for x in (s.start, s.stop, s.step))
        trips = max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))
        self.env[s.var] = start
        saved = self.weight
        self.weight *= trips
        self.visit(s.body)
        self.weight = saved


def _evaluate(e: E.Expr, env: Mapping[object, int]) -> int:
    """The value of an index expression of constants, size parameters, launch coordinates and known scalars."""
    if isinstance(e, E.Constant):
        return e.value
    if isinstance(e, E.Var) and e in env:
        return env[e]
    if isinstance(e, E.Intrinsic) and e.name in env:
        return env[e.name]
    if isinstance(e, E.Intrinsic) and e.name in ("min", "max"):
        return (min if e.name == "min" else max)(_evaluate(a, env) for a in e.args)
    if isinstance(e, E.Cast):
        return _evaluate(e.expr, env)
    if isinstance(e, E.BinaryOp) and e.op in _ARITHMETIC:
        return _ARITHMETIC[e.op](_evaluate(e.a, env), _evaluate(e.b, env))
    if isinstance(e, E.IfThenElse):
        return _evaluate(e.then_expr if _evaluate(e.cond, env) else e.else_expr, env)
    raise ValueError(f"cannot count the trips of a loop bounded by `{e}`: give its sizes")
