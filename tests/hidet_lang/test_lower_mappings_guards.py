"""The bound-check guard of lowered task-mapping loops: present exactly where nothing proves the worker in range.

Checked by results (CPU kernels built from the DSL, and lowered IR run by a small interpreter), not only by the
shape of the lowered IR; and every statement the lowering creates carries the span of its mapping loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hidet_lang as hidet
from hidet_lang import attrs, i8, i32, i64, u16
from hidet_lang.cuda import threadIdx
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.evaluate import convert_value, evaluate
from hidet_lang.ir.functor import collect
from hidet_lang.ir.mapping import TaskMapping, repeat, spatial
from hidet_lang.ir.types import int32
from hidet_lang.passes.lower_task_mappings import loop_bound, lower_task_mappings, worker_bounds

M = spatial(4, 8)  # 32 workers, one task each


def guards(stmt: S.Stmt) -> list[S.IfStmt]:
    """The bound-check guards `if unsigned(worker) < n` in lowered IR."""
    return [s for s in collect(stmt, S.IfStmt) if isinstance(s.cond, E.BinaryOp) and s.cond.op == "<"]


def guarded_worker(guard: S.IfStmt) -> E.Expr:
    """The worker a guard checks (under its conversion to an unsigned type)."""
    worker = guard.cond.a
    return worker.expr if isinstance(worker, E.Cast) else worker


def expected_tasks(m: TaskMapping, workers: list[int], rows: int) -> np.ndarray:
    """`out[w, 0, :]` = the task of worker w for each worker that runs (and is one of `m`'s); -1 elsewhere."""
    out = np.full((rows, 1, 2), -1, dtype=np.int32)
    for w in workers:
        if w < m.num_workers:
            out[w, 0] = m(w)[0]
    return out


def range_kernel(start: int, stop: int, step: int, rows: int):
    with hidet.script_module() as module:

        @hidet.script
        def record(out: i32[rows, 1, 2]):
            attrs.func_kind = "public"
            for w in range(start, stop, step):
                for i, j in M.on(w):
                    out[w, 0, 0] = i
                    out[w, 0, 1] = j

    return module, record


@pytest.mark.parametrize(
    ("start", "stop", "step", "guarded"),
    [
        (0, 32, 1, False),
        (0, 16, 1, False),
        (3, 32, 5, False),
        (8, 32, 8, False),
        (0, 33, 1, True),
        (0, 40, 1, True),
        (5, 40, 7, True),
    ],
)
def test_loop_bounds_decide_the_guard(start: int, stop: int, step: int, guarded: bool) -> None:
    rows = max(stop, M.num_workers)
    module, record = range_kernel(start, stop, step, rows)
    lowered = lower_task_mappings(record.ir.body)
    assert bool(guards(lowered)) == guarded, str(lowered)
    out = np.full((rows, 1, 2), -1, dtype=np.int32)
    module.build()(out)
    np.testing.assert_array_equal(out, expected_tasks(M, list(range(start, stop, step)), rows))


def test_a_loop_that_may_start_below_zero_keeps_the_guard() -> None:
    module, record = range_kernel(-1, 32, 1, 32)
    assert guards(lower_task_mappings(record.ir.body))
    out = np.full((32, 1, 2), -1, dtype=np.int32)
    module.build()(out)  # worker -1 runs nothing (its body would write out[-1])
    np.testing.assert_array_equal(out, expected_tasks(M, list(range(32)), 32))


@pytest.mark.parametrize(("dtype", "offset"), [(i64, -3), (i64, 2**32 - 3), (i64, -(2**32) - 3), (i8, -40),
                                               (u16, -3)], ids=str)
def test_a_worker_of_any_integer_type_runs_the_tasks_of_its_own_value(dtype: Any, offset: int) -> None:
    """The guard compares the worker itself, in its own width: converted to int32 first, 2**32 - 3 + w would be
    worker w - 3, and a negative worker would run tasks at negative coordinates (a u16 worker wraps: w - 3 is
    65533 for w = 0, which runs nothing)."""
    rows = 80
    with hidet.script_module() as module:

        @hidet.script
        def record(out: i32[rows, 1, 2]):
            attrs.func_kind = "public"
            for w in range(rows):
                for i, j in M.on(dtype(w) + dtype(offset)):
                    out[w, 0, 0] = i
                    out[w, 0, 1] = j

    out = np.full((rows, 1, 2), -1, dtype=np.int32)
    module.build()(out)
    expected = np.full((rows, 1, 2), -1, dtype=np.int32)
    for w in range(rows):
        worker = np.array(w + offset).astype(dtype.numpy_name).item()  # wrapped to the worker's type
        if 0 <= worker < M.num_workers:
            expected[w, 0] = M(worker)[0]
    np.testing.assert_array_equal(out, expected)


def test_a_run_time_start_keeps_the_guard() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def record(n: i32, out: i32[40, 1, 2]):
            attrs.func_kind = "public"
            for w in range(n, 32):
                for i, j in M.on(w):
                    out[w, 0, 0] = i
                    out[w, 0, 1] = j

    assert guards(lower_task_mappings(record.ir.body))
    out = np.full((40, 1, 2), -1, dtype=np.int32)
    module.build()(out=out, n=5)
    np.testing.assert_array_equal(out, expected_tasks(M, list(range(5, 32)), 40))


def test_a_run_time_stop_keeps_the_guard() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def record(n: i32, out: i32[40, 1, 2]):
            attrs.func_kind = "public"
            for w in range(n):
                for i, j in M.on(w):
                    out[w, 0, 0] = i
                    out[w, 0, 1] = j

    assert guards(lower_task_mappings(record.ir.body))
    compiled = module.build()
    for n in (32, 40):
        out = np.full((40, 1, 2), -1, dtype=np.int32)
        compiled(n, out)
        np.testing.assert_array_equal(out, expected_tasks(M, list(range(n)), 40))


def test_the_bound_of_an_enclosing_loop_holds_in_nested_loops() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def record(out: i32[64, 1, 2], seen: i32[64]):
            attrs.func_kind = "public"
            for v in range(64):
                for w in range(32):
                    if w == v % 32:
                        for i, j in M.on(w):  # bounded by its loop: no guard
                            out[w, 0, 0] = i
                            out[w, 0, 1] = j
                        for i, j in M.on(v):  # v runs to 63: guarded
                            seen[v] = i * 8 + j

    lowered = lower_task_mappings(record.ir.body)
    (guard,) = guards(lowered)
    assert guarded_worker(guard).name.startswith("v")
    out = np.full((64, 1, 2), -1, dtype=np.int32)
    seen = np.full(64, -1, dtype=np.int32)
    module.build()(out, seen)
    np.testing.assert_array_equal(out, expected_tasks(M, list(range(32)), 64))
    np.testing.assert_array_equal(seen, [*range(32), *[-1] * 32])


def test_a_loop_variable_assigned_in_the_body_keeps_the_guard() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def record(out: i32[48, 1, 2]):
            attrs.func_kind = "public"
            for w in range(32):
                w += 8
                for i, j in M.on(w):
                    out[w, 0, 0] = i
                    out[w, 0, 1] = j

    assert guards(lower_task_mappings(record.ir.body))
    out = np.full((48, 1, 2), -1, dtype=np.int32)
    module.build()(out)
    workers, w = [], 0
    while w < 32:  # the C loop: the body's assignment moves the loop variable on
        w += 8
        workers.append(w)
        w += 1
    assert workers == [8, 17, 26, 35]
    np.testing.assert_array_equal(out, expected_tasks(M, workers, 48))


def test_a_thread_index_is_bounded_by_a_constant_block_dimension() -> None:
    def kernel(block: int):
        with hidet.script_module():

            @hidet.script
            def spread(out: i32[4, 8]):
                attrs.func_kind = "cuda_kernel"
                attrs.cuda.block_dim = block
                attrs.cuda.grid_dim = 1
                for i, j in M.on(threadIdx.x):
                    out[i, j] = 1

        return spread.ir

    for block, guarded in ((32, False), (16, False), (33, True)):
        f = kernel(block)
        assert bool(guards(lower_task_mappings(f.body, worker_bounds(f)))) == guarded, block


# ---------------------------------------------------------------------------------------------- lowered IR, run


def run(s: S.Stmt, env: dict[E.Var, Any], arrays: dict[E.Var, np.ndarray]) -> None:
    """Run lowered IR made of declarations, assignments, loops, ifs and stores into `arrays`."""
    if isinstance(s, S.SeqStmt):
        for item in s.stmts:
            run(item, env, arrays)
    elif isinstance(s, (S.DeclareStmt, S.AssignStmt)):
        value = s.init if isinstance(s, S.DeclareStmt) else s.value
        env[s.var] = convert_value(evaluate(value, env), s.var.type) if value is not None else 0
    elif isinstance(s, S.ForStmt):
        env[s.var] = evaluate(s.start, env)
        while env[s.var] < evaluate(s.stop, env):
            run(s.body, env, arrays)
            env[s.var] += evaluate(s.step, env)
    elif isinstance(s, S.IfStmt):
        branch = s.then_body if evaluate(s.cond, env) else s.else_body
        if branch is not None:
            run(branch, env, arrays)
    elif isinstance(s, S.BufferStoreStmt):
        assert isinstance(s.buf, E.Var)
        arrays[s.buf][tuple(evaluate(i, env) for i in s.indices)] = evaluate(s.value, env)
    else:
        raise TypeError(f"cannot run {type(s).__name__}")


def test_the_bound_holds_only_inside_the_loop_body() -> None:
    """A worker bounded inside a loop's body is not bounded after the loop (hand-built IR: the DSL's scopes
    would not let a program name the loop variable there)."""
    w, i, j = E.Var("w", int32), E.Var("i", int32), E.Var("j", int32)
    out = E.Var("out", int32)
    c = lambda v: E.Constant(v, int32)  # noqa: E731

    def mapping_loop() -> S.ForMappingStmt:
        store = S.BufferStoreStmt(out, (w,), E.BinaryOp("+", E.BinaryOp("*", i, c(8)), j))
        return S.ForMappingStmt((i, j), M, w, store)

    program = S.seq([S.ForStmt(w, c(0), c(32), c(1), mapping_loop()), S.AssignStmt(w, c(35)), mapping_loop()])
    lowered = lower_task_mappings(program)
    inside, _, after = lowered.stmts
    assert not guards(inside) and guards(after)
    arrays = {out: np.full(40, -1, dtype=np.int64)}
    run(lowered, {}, arrays)
    np.testing.assert_array_equal(arrays[out], [*range(32), *[-1] * 8])


@pytest.mark.parametrize(
    ("loop", "bound"),
    [
        ((0, 32, 1), 32),
        ((4, 32, 4), 32),
        ((-1, 32, 1), None),
        ((0, 32, 0), None),
        ((0, 32, -1), None),
    ],
)
def test_loop_bound_needs_a_start_at_least_zero_and_a_positive_step(loop: tuple[int, int, int], bound: int | None):
    w = E.Var("w", int32)
    start, stop, step = (E.Constant(v, int32) for v in loop)
    assert loop_bound(S.ForStmt(w, start, stop, step, S.EvaluateStmt(w))) == bound


def test_loop_bound_distrusts_a_loop_variable_the_body_may_write() -> None:
    w = E.Var("w", int32)
    c = lambda v: E.Constant(v, int32)  # noqa: E731
    p = E.Var("p", ~int32)
    writes = [
        S.AssignStmt(w, c(40)),
        S.DeclareStmt(p, E.Address(w)),
        S.AsmStmt("mov.u32 %0, 40;", (w,), ()),
    ]
    for write in writes:
        assert loop_bound(S.ForStmt(w, c(0), c(32), c(1), S.seq([write, S.EvaluateStmt(w)]))) is None, str(write)
    n = E.Var("n", int32)
    for start, stop, step in ((c(0), n, c(1)), (n, c(32), c(1)), (c(0), c(32), n)):  # one not a constant
        assert loop_bound(S.ForStmt(w, start, stop, step, S.EvaluateStmt(w))) is None


# ---------------------------------------------------------------------------------------------- spans


def test_every_statement_the_lowering_creates_carries_the_mapping_loops_span() -> None:
    m = spatial(2, 4) * repeat(2, 2, attrs="u.")
    with hidet.script_module():

        @hidet.script
        def record(n: i32, out: i32[4, 8]):
            attrs.func_kind = "public"
            for w in range(n):
                for i, j in m.on(w):
                    out[i, j] = w

    (mapping,) = collect(record.ir.body, S.ForMappingStmt)
    assert mapping.span is not None
    lowered = lower_task_mappings(record.ir.body)
    assert all(s.span is not None for s in collect(lowered, S.Stmt) if not isinstance(s, S.SeqStmt))
    (outer,) = [s for s in collect(lowered, S.ForStmt) if s.var.name.startswith("w")]
    created = [s for s in collect(outer.body, S.Stmt) if not isinstance(s, (S.SeqStmt, S.BufferStoreStmt))]
    assert {type(s) for s in created} == {S.IfStmt, S.ForStmt, S.DeclareStmt}
    assert all(s.span == mapping.span for s in created)
