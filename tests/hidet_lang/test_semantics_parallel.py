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
from hidet_lang import attrs, f32, grid, i32
from hidet_lang.errors import DSLValueError

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


@pytest.mark.parametrize(("factory", "message"), [
    (plain_assignment, "'last' is declared outside this parallel loop"),
    (not_a_reduction, "'acc' is declared outside this parallel loop"),
    (read_inside, "'acc' is a reduction of this parallel loop and is read here"),
    (two_operators, "'acc' is reduced with both `+` and `*`"),
    (parameter_assigned, "'n' is declared outside this parallel loop"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_racing_assignment_is_an_error_at_its_line(factory: Callable[[], None], message: str) -> None:
    def build() -> None:
        with hidet.script_module() as module:
            factory()
        module.build("cpu")

    assert_error_at_marker(factory, DSLValueError, message, run=build)


def test_variables_declared_in_the_loop_are_private() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def squares(x: f32[64], out: f32[64]):
            attrs.func_kind = "cpu_kernel"
            for i in grid(64, attrs="p"):
                v = x[i]
                for _ in range(3):
                    v = v + 1.0
                out[i] = v * v
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    module.build("cpu")(x, out)
    np.testing.assert_array_equal(out, (x + 3) ** 2)
