"""A `cpu_internal` function may call itself by name (its return type annotated); recursion elsewhere, or
without the annotation, is an error at the call's line."""

import math
from collections.abc import Callable

import numpy as np
import pytest
from semantics_checks import assert_error_at_marker

import hidet_lang as hidet
from hidet_lang import attrs, cuda, f32, i32
from hidet_lang.errors import DSLTypeError


def test_recursive_cpu_functions_compute_what_python_does() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def fact(n: i32) -> i32:
            if n <= 1:
                return 1
            return n * fact(n - 1)

        @hidet.script
        def fib(n: i32) -> i32:
            attrs.func_name = "fibonacci"  # a rename after the recursive calls is followed
            if n < 2:
                return n
            return fib(n=n - 1) + fib(n - 2)

        @hidet.script
        def fill_down(x: f32[12], n: i32) -> None:
            if n > 0:
                x[n - 1] = 1.0 * n
                fill_down(x, n - 1)

        @hidet.script
        def apply(x: i32[12], facts: i32[12], fibs: i32[12], filled: f32[12]):
            attrs.func_kind = "cpu_kernel"
            for i in range(12):
                facts[i] = fact(x[i])
                fibs[i] = fib(x[i])
            fill_down(filled, 12)

    x = np.arange(12, dtype=np.int32)
    facts, fibs, filled = np.zeros(12, np.int32), np.zeros(12, np.int32), np.zeros(12, np.float32)
    module.build("cpu")(x, facts, fibs, filled)
    assert list(facts) == [math.factorial(int(v)) for v in x]
    golden = [0, 1]
    while len(golden) < 12:
        golden.append(golden[-1] + golden[-2])
    assert list(fibs) == golden
    np.testing.assert_array_equal(filled, np.arange(1, 13, dtype=np.float32))


def unannotated() -> None:
    @hidet.script
    def fact(n: i32):
        if n <= 1:
            return 1
        return n * fact(n - 1)  # ERROR


def recursive_cuda_function() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def fib(n: i32) -> i32:
            if n < 2:
                return n
            return fib(n - 1) + fib(n - 2)  # ERROR

        @hidet.script
        def kernel(out: i32[8]):
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 8
            out[cuda.threadIdx.x] = fib(cuda.threadIdx.x)
    module.build()


def recursive_kernel() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def countdown(n: i32, out: i32[1]):
            attrs.func_kind = "cpu_kernel"
            out[0] += 1
            if n > 0:
                countdown(n - 1, out)  # ERROR
    module.build("cpu")


@pytest.mark.parametrize(("factory", "message"), [
    (unannotated, "'fact' calls itself: annotate its return type"),
    (recursive_cuda_function, "recursion is supported in 'cpu_internal' functions only"),
    (recursive_kernel, "'countdown' is a 'cpu_kernel' function"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_unsupported_recursion_is_an_error_at_the_call(factory: Callable[[], None], message: str) -> None:
    assert_error_at_marker(factory, DSLTypeError, message)
