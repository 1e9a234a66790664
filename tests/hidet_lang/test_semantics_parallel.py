"""Scalars updated inside OpenMP parallel loops (`grid(..., attrs='p')`): reductions are computed race-free with
OpenMP's `reduction` clause; any other assignment to a scalar declared outside the loop is an error at its line.

The loops run on every core (the suite runs on machines with two or more), so an unsynchronized `acc += x[i]`
loses updates: without the reduction clause these sums come out wrong.
"""

import os
from collections.abc import Callable

import numpy as np
import pytest
from semantics_checks import assert_error_at_marker

import hidet_lang as hidet
from hidet_lang import attrs, f32, f64, grid, i32
from hidet_lang.errors import DSLValueError
from hidet_lang.ir import stmt as S
from hidet_lang.ir.functor import collect
from hidet_lang.ir.mapping import repeat
from hidet_lang.passes.parallel_reductions import resolve_parallel_reductions

N = 100003


@pytest.fixture(autouse=True)
def two_or_more_threads() -> None:
    """A race needs two threads; OpenMP runs one per core."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("a race needs two cores")


def reductions_module() -> object:
    with hidet.script_module() as module:
        @hidet.script
        def reduce_all(x: f32[N], k: i32[N], out_f: f32[3], out_i: i32[4]):
            attrs.func_kind = "cpu_kernel"
            total: f32 = 0.0
            low: f32 = 1e30
            high: f32 = -1e30
            count: i32 = 0
            int_total: i32 = 0
            product: i32 = 1
            smallest: i32 = 1 << 30
            for i in grid(N, attrs="p"):
                scaled = x[i] * 1.0  # declared inside the loop: private to the iteration
                total += scaled
                low = min(low, x[i])
                high = max(x[i], high)
                int_total = int_total + k[i]
                count -= 1
                product *= k[i] | 1
                smallest = min(smallest, k[i])
            out_f[0] = total
            out_f[1] = low
            out_f[2] = high
            out_i[0] = int_total
            out_i[1] = count
            out_i[2] = product
            out_i[3] = smallest
    return module.build("cpu")


@pytest.mark.parametrize("exact", [True, False])
def test_parallel_reductions_match_numpy(exact: bool) -> None:
    rng = np.random.default_rng(7)
    if exact:
        # Multiples of 1/4 below 4: every partial sum, in any order, is a multiple of 1/4 below 2**19, which
        # float32 represents exactly, so the parallel sum must equal numpy's exactly.
        x = (rng.integers(0, 16, N) / 4).astype(np.float32)
    else:
        x = rng.random(N, dtype=np.float32)
    k = rng.integers(-1000, 1000, N).astype(np.int32)
    out_f, out_i = np.zeros(3, np.float32), np.zeros(4, np.int32)
    reductions_module()(x, k, out_f, out_i)
    want = np.sum(x, dtype=np.float64)
    if exact:
        assert out_f[0] == want
    else:
        # Summing n float32 values in any order errs by at most (n - 1) * 2**-24 * sum(|x|) (x >= 0 here): a
        # relative 6e-3. A lost update loses a whole term, and a race loses thousands.
        np.testing.assert_allclose(out_f[0], want, rtol=(N - 1) * 2.0**-24)
    assert (out_f[1], out_f[2]) == (x.min(), x.max())
    with np.errstate(over="ignore"):
        product = np.prod(k | 1, dtype=np.int32)  # int32 products wrap in both; wrapping is order-independent
    assert list(out_i) == [int(k.sum()), -N, int(product), int(k.min())]


def plain_assignment() -> None:
    @hidet.script
    def last_value(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        last: f32 = 0.0
        for i in grid(16, attrs="p"):
            last = x[i]  # ERROR
        out[0] = last


def not_a_reduction() -> None:
    @hidet.script
    def horner(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        acc: f32 = 0.0
        for i in grid(16, attrs="p"):
            acc = acc * 2.0 + x[i]  # ERROR
        out[0] = acc


def read_inside() -> None:
    @hidet.script
    def prefix(x: f32[16], out: f32[16]):
        attrs.func_kind = "cpu_kernel"
        acc: f32 = 0.0
        for i in grid(16, attrs="p"):
            acc += x[i]
            out[i] = acc  # ERROR


def two_operators() -> None:
    @hidet.script
    def mixed(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        acc: f32 = 1.0
        for i in grid(16, attrs="p"):
            acc += x[i]
            acc *= x[i]  # ERROR
        out[0] = acc


def parameter_assigned() -> None:
    @hidet.script
    def clobber(n: i32, out: f32[16]):
        attrs.func_kind = "cpu_kernel"
        for i in grid(16, attrs="p"):
            n = i  # ERROR
            out[i] = n * 1.0


def update_reading_itself() -> None:
    @hidet.script
    def grows(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        acc: f32 = 0.0
        for i in grid(16, attrs="p"):
            acc = acc + acc * x[i]  # ERROR
        out[0] = acc


def subtracted_from_a_value() -> None:
    @hidet.script
    def flips(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        acc: f32 = 0.0
        for i in grid(16, attrs="p"):
            acc = x[i] - acc  # ERROR
        out[0] = acc


def sum_not_naming_it() -> None:
    @hidet.script
    def overwrites(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        acc: f32 = 0.0
        for i in grid(16, attrs="p"):
            acc = x[i] + 1.0  # ERROR
        out[0] = acc


def sum_reading_it_on_the_left() -> None:
    @hidet.script
    def doubles(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        acc: f32 = 0.0
        for i in grid(16, attrs="p"):
            acc = acc * x[i] + acc  # ERROR
        out[0] = acc


def min_without_it() -> None:
    @hidet.script
    def clamps(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        low: f32 = 0.0
        for i in grid(16, attrs="p"):
            low = min(x[i], 3.0)  # ERROR
        out[0] = low


def min_reading_it_twice() -> None:
    @hidet.script
    def shrinks(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        low: f32 = 0.0
        for i in grid(16, attrs="p"):
            low = min(low, low * x[i])  # ERROR
        out[0] = low


def max_reading_it_first() -> None:
    @hidet.script
    def lifts(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        high: f32 = 0.0
        for i in grid(16, attrs="p"):
            high = max(high + x[i], high)  # ERROR
        out[0] = high


def bool_accumulator() -> None:
    @hidet.script
    def any_positive(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        found: bool = False
        for i in grid(16, attrs="p"):
            found = found + (x[i] > 0.0)  # ERROR
        out[0] = 1.0 if found else 0.0


def after_a_private_update() -> None:
    @hidet.script
    def keeps_last(x: f32[16], out: f32[1]):
        attrs.func_kind = "cpu_kernel"
        last: f32 = 0.0
        for i in grid(16, attrs="p"):
            t = x[i]
            t = t * 2.0
            last = t  # ERROR
        out[0] = last


RACES = [
    (plain_assignment, "'last' is declared outside this parallel loop, whose iterations run at once on several "
                       "threads: assigning it here races; only reductions (`x += v`, `x -= v`, `x *= v`, "
                       "`x = min(x, v)` or `x = max(x, v)`, with v not reading 'last') may update it; declare 'last' "
                       "inside the loop for a value of one iteration"),
    (not_a_reduction, "'acc' is declared outside this parallel loop"),
    (read_inside, "'acc' is a reduction of this parallel loop and is read here, where each thread sees only its "
                  "partial value; read it after the loop"),
    (two_operators, "'acc' is reduced with both `+` and `*` in one parallel loop; use one operator"),
    (parameter_assigned, "'n' is declared outside this parallel loop"),
    (update_reading_itself, "'acc' is declared outside this parallel loop"),
    (subtracted_from_a_value, "'acc' is declared outside this parallel loop"),
    (sum_not_naming_it, "'acc' is declared outside this parallel loop"),
    (sum_reading_it_on_the_left, "'acc' is declared outside this parallel loop"),
    (min_without_it, "'low' is declared outside this parallel loop"),
    (min_reading_it_twice, "'low' is declared outside this parallel loop"),
    (max_reading_it_first, "'high' is declared outside this parallel loop"),
    (bool_accumulator, "'found' is declared outside this parallel loop"),
    (after_a_private_update, "'last' is declared outside this parallel loop"),
]


@pytest.mark.parametrize(("factory", "message"), RACES, ids=lambda v: getattr(v, "__name__", ""))
def test_racing_assignment_is_an_error_at_its_line(factory: Callable[[], None], message: str) -> None:
    def build() -> None:
        with hidet.script_module() as module:
            factory()
        module.build("cpu")

    assert_error_at_marker(factory, DSLValueError, message, run=build)


def test_variables_declared_in_the_loop_are_private() -> None:
    """Declared variables and the variables of inner loops and task mappings belong to one iteration: assigning
    them is no race, and no reduction."""
    with hidet.script_module() as module:
        @hidet.script
        def squares(x: f32[64], out: f32[64], steps: i32[64, 4], tasks: i32[64, 4]):
            attrs.func_kind = "cpu_kernel"
            for i in grid(64, attrs="p"):
                v = x[i]
                for _ in range(3):
                    v = v + 1.0
                out[i] = v * v
                for j in range(4):
                    steps[i, j] = j
                    j += 1  # the loop moves on by two
                for (t,) in repeat(2).on(0):
                    t = t + 2
                    tasks[i, t] = t * 10
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    steps, tasks = np.full((64, 4), -1, np.int32), np.full((64, 4), -1, np.int32)
    module.build("cpu")(x, out, steps, tasks)
    np.testing.assert_array_equal(out, (x + 3) ** 2)
    np.testing.assert_array_equal(steps, np.tile([0, -1, 2, -1], (64, 1)))
    np.testing.assert_array_equal(tasks, np.tile([-1, -1, 20, 30], (64, 1)))


def test_every_form_of_a_reduction_matches_numpy() -> None:
    """`v + acc` and `v * acc` (the variable second), `+=` and `-=` of one variable in one loop (both `+`), and an
    update computed in a wider type (`acc` f32, `v` f64: a conversion around the sum); multiples of 1/4 below 4
    keep every order's sums exact."""
    with hidet.script_module() as module:
        @hidet.script
        def forms(x: f32[N], w: f64[N], k: i32[N], out_f: f32[2], out_i: i32[1]):
            attrs.func_kind = "cpu_kernel"
            total: f32 = 0.0
            wide: f32 = 0.0
            product: i32 = 1
            for i in grid(N, attrs="p"):
                total = x[i] + total
                total -= x[i] * 0.5
                wide = wide + w[i]
                product = (k[i] | 1) * product
            out_f[0] = total
            out_f[1] = wide
            out_i[0] = product
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 16, N) / 4).astype(np.float32)
    w = (rng.integers(0, 16, N) / 4).astype(np.float64)
    k = rng.integers(-1000, 1000, N).astype(np.int32)
    out_f, out_i = np.zeros(2, np.float32), np.zeros(1, np.int32)
    module.build("cpu")(x, w, k, out_f, out_i)
    with np.errstate(over="ignore"):
        product = np.prod(k | 1, dtype=np.int32)
    assert list(out_f) == [np.sum(x, dtype=np.float64) * 0.5, np.sum(w)]
    assert out_i[0] == product


def test_the_pass_lists_each_loops_reductions() -> None:
    """What the race tests above need two threads overlapping in time to see (a busy machine may run one
    thread's share after the other's): the loop carries its reductions, which become OpenMP's clause."""
    with hidet.script_module() as module:
        @hidet.script
        def several(x: f32[64], k: i32[64], out: f32[2], out_i: i32[1]):
            attrs.func_kind = "cpu_kernel"
            total: f32 = 0.0
            high: f32 = 0.0
            product: i32 = 1
            for i in grid(64, attrs="p"):
                total += x[i]
                high = max(x[i], high)
                product = k[i] * product
            out[0] = total
            out[1] = high
            out_i[0] = product

    (function,) = resolve_parallel_reductions(module.ir_module()).functions
    (loop,) = [s for s in collect(function.body, S.ForStmt) if s.kind == S.LoopKind.PARALLEL]
    assert sorted((op, v.name) for op, v in loop.reductions) == [("*", "product"), ("+", "total"), ("max", "high")]


def test_a_module_without_reductions_comes_back_as_it_is() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def scale(x: f32[64]):
            attrs.func_kind = "cpu_kernel"
            for i in grid(64, attrs="p"):
                x[i] = x[i] * 2.0

    ir = module.ir_module()
    assert resolve_parallel_reductions(ir) is ir
