"""A function that returns a value must return one on every path: falling off its end is an error at its `def`
line (the `check_returns` step), not garbage at run time."""

from collections.abc import Callable

import numpy as np
import pytest
from semantics_checks import assert_error_at_marker

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32
from hidet_lang.errors import DSLValueError


def build_with_caller(callee_factory: Callable[[], object]) -> object:
    """A cpu_kernel storing `callee(x[i])` for 8 values, built for the CPU."""
    with hidet.script_module() as module:
        callee = callee_factory()

        @hidet.script
        def apply(x: i32[8], out: i32[8]):
            attrs.func_kind = "cpu_kernel"
            for i in range(8):
                out[i] = callee(x[i])
    return module.build("cpu")


def if_without_else() -> object:
    @hidet.script
    def sign(v: i32) -> i32:  # ERROR
        if v > 0:
            return 1
        elif v < 0:
            return -1

    return sign


def only_in_a_loop() -> object:
    @hidet.script
    def first_even(v: i32) -> i32:  # ERROR
        for j in range(v):
            if j % 2 == 0:
                return j

    return first_even


def while_with_break() -> object:
    @hidet.script
    def count(v: i32):  # ERROR
        k = 0
        while True:
            if k >= v:
                break
            k += 1
            if k > 100:
                return k

    return count


@pytest.mark.parametrize("factory", [if_without_else, only_in_a_loop, while_with_break],
                         ids=lambda f: f.__name__)
def test_falling_off_the_end_is_an_error_at_the_def_line(factory: Callable[[], object]) -> None:
    assert_error_at_marker(factory, DSLValueError, "can reach the end of its body without a `return`",
                           run=lambda: build_with_caller(factory))


def if_else_returns() -> object:
    @hidet.script
    def sign(v: i32) -> i32:
        if v > 0:
            return 1
        elif v < 0:
            return -1
        else:
            return 0

    return sign


def return_after_if() -> object:
    @hidet.script
    def clamp(v: i32) -> i32:
        if v > 3:
            return 3
        return v

    return clamp


def loop_forever() -> object:
    @hidet.script
    def collatz_steps(v: i32) -> i32:
        steps = 0
        while True:
            if v <= 1:
                return steps
            for _ in range(1):  # a `break` of an inner loop does not leave the `while`
                break
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            steps += 1

    return collatz_steps


@pytest.mark.parametrize(("factory", "expected"), [
    (if_else_returns, lambda x: np.sign(x)),
    (return_after_if, lambda x: np.minimum(x, 3)),
    (loop_forever, lambda x: np.array([_collatz(int(v)) for v in x])),
], ids=lambda v: getattr(v, "__name__", ""))
def test_functions_that_always_return_build_and_run(factory: Callable[[], object],
                                                    expected: Callable[[np.ndarray], np.ndarray]) -> None:
    x = np.array([-5, -1, 0, 1, 2, 3, 7, 27], np.int32)
    out = np.zeros(8, np.int32)
    build_with_caller(factory)(x, out)
    np.testing.assert_array_equal(out, expected(x))


def _collatz(v: int) -> int:
    steps = 0
    while v > 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        steps += 1
    return steps


def test_a_float_function_without_a_final_return_is_refused() -> None:
    @hidet.script
    def half(v: f32) -> f32:
        if v > 0.0:
            return v / 2.0

    with pytest.raises(DSLValueError, match="'half' returns f32"):
        build_with_caller(lambda: half)
