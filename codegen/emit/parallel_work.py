"""Whether a parallel loop of the generated C has enough work to run on several threads: the argument of its
`num_threads(hl_cpu_threads(...))` clause (`hidet_lang/cpu_threads.h`).

Waking the OpenMP runtime's sleeping threads (they wait passively: `codegen.toolchain.openmp`) costs some 10-20
microseconds a loop, as much as a serial pass over 50,000 floats. A parallel loop (with the parallel loops
collapsed into it) whose estimated work is below `MIN_PARALLEL_WORK` runs on the calling thread alone, and OpenMP
wakes no thread. The work is the iterations times the statements one iteration executes, counted from the loop
body (inner loops of constant extent multiply their body, others count `UNKNOWN_EXTENT` times); where the extents
are known when the code is generated, the test is made then.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S

MIN_PARALLEL_WORK = 1 << 17
"""Statements executed below which a parallel loop runs on one thread."""

UNKNOWN_EXTENT = 64
"""The trip count assumed of an inner loop whose extent is not a constant."""


def collapsed_loops(s: S.ForStmt) -> list[S.ForStmt]:
    """`s` and the parallel loops perfectly nested in it (those its `collapse(n)` clause joins)."""
    loops = [s]
    while isinstance(loops[-1].body, S.ForStmt) and loops[-1].body.kind == S.LoopKind.PARALLEL:
        loops.append(loops[-1].body)
    return loops


def constant_extent(s: S.ForStmt) -> int | None:
    """The trip count of loop `s` where its bounds and step are constants."""
    if not all(isinstance(e, E.Constant) for e in (s.start, s.stop, s.step)):
        return None
    start, stop, step = int(s.start.value), int(s.stop.value), int(s.step.value)
    return max(0, math.ceil((stop - start) / step)) if step else 0


def statement_work(s: S.Stmt | None) -> int:
    """The statements one execution of `s` executes (an estimate: see the module docstring)."""
    if s is None:
        return 0
    if isinstance(s, S.SeqStmt):
        return sum(statement_work(t) for t in s.stmts)
    if isinstance(s, S.ForStmt):
        extent = constant_extent(s)
        return (UNKNOWN_EXTENT if extent is None else extent) * statement_work(s.body)
    if isinstance(s, S.WhileStmt):
        return UNKNOWN_EXTENT * statement_work(s.body)
    if isinstance(s, S.IfStmt):
        return 1 + max(statement_work(s.then_body), statement_work(s.else_body))
    return 1


def enough_work(s: S.ForStmt, c_expr: Callable[[E.Expr], str]) -> str:
    """The C test of whether parallel loop `s` has enough work for several threads (`c_expr` prints an IR
    expression as C): '1' or '0' where its extents are constants, else a test of them at run time."""
    loops = collapsed_loops(s)
    work = max(1, statement_work(loops[-1].body))
    terms = []
    for loop in loops:
        extent = constant_extent(loop)
        if extent is not None:
            work *= extent
            continue
        step = int(loop.step.value) if isinstance(loop.step, E.Constant) else 1  # a variable step: taken as 1
        low, high = (loop.start, loop.stop) if step > 0 else (loop.stop, loop.start)
        span = f"((long long)({c_expr(high)}) - (long long)({c_expr(low)}))"
        terms.append(span if abs(step) == 1 else f"({span} / {abs(step)})")
    if not terms:
        return "1" if work >= MIN_PARALLEL_WORK else "0"
    return f"{' * '.join(terms)} * {work}LL >= {MIN_PARALLEL_WORK}LL"
