"""Integer division and modulo by zero, and MIN / -1, never kill the process: every target gives the defined
results of `hidet_lang/int_division.h`, and checking mode reports a zero divisor with its DSL line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, i8, i32, i64, u32
from hidet_lang.cuda import threadIdx

LINES = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> str:
    """`test_runtime_safety_division.py:<line>` of the line carrying `# MARK: <marker>`."""
    number = next(i for i, text in enumerate(LINES, 1) if f"# MARK: {marker}" in text)
    return f"test_runtime_safety_division.py:{number}"


def reference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The documented results: C truncation, a / 0 == -1 (all bits set), a % 0 == a, MIN / -1 == MIN, MIN % -1 == 0."""
    q, r = np.empty_like(a), np.empty_like(a)
    info = np.iinfo(a.dtype)
    for k, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        if y == 0:
            q[k], r[k] = info.max if info.min == 0 else -1, x
        elif y == -1:
            q[k], r[k] = x if x == info.min else -x, 0
        else:
            t = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            q[k], r[k] = t, x - t * y
    return q, r


def cpu_module(dtype):
    with hidet.script_module() as module:

        @hidet.script
        def divide(a: dtype[8], b: dtype[8], q: dtype[8], r: dtype[8]):
            attrs.func_kind = "public"
            for i in range(8):
                q[i] = a[i] // b[i]  # MARK: cpu-div
                r[i] = a[i] % b[i]
    return module


def cuda_module(dtype):
    with hidet.script_module() as module:

        @hidet.script
        def divide_kernel(a: dtype[8], b: dtype[8], q: dtype[8], r: dtype[8]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 8
            attrs.cuda.grid_dim = 1
            i = threadIdx.x
            q[i] = a[i] // b[i]  # MARK: cuda-div
            r[i] = a[i] % b[i]
    return module


def operands(dtype: np.dtype, zero_divisors: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Dividends and divisors: MIN / -1, ordinary quotients, and (with `zero_divisors`) divisions by zero."""
    info = np.iinfo(dtype)
    a = np.array([7, 5, info.min, info.min, -7 if info.min else 9, info.max, 0, info.min + 1], dtype)
    b = np.array([2, 0, -1 if info.min else 3, 0, 2, -1 if info.min else 1, 0, 1], dtype)
    return a, b if zero_divisors else np.where(b == 0, 3, b).astype(dtype)


@pytest.mark.parametrize("dtype", [i8, i32, i64, u32], ids=str)
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_division_by_zero_and_min_by_minus_one_have_defined_results(target: str, dtype) -> None:
    # the simulated GPU runs kernels in the emulator's checking mode, which reports a zero divisor (a GPU does not)
    a, b = operands(np.dtype(dtype.name), zero_divisors=target == "cpu" or backend() == "emulator")
    module = cpu_module(dtype) if target == "cpu" else cuda_module(dtype)
    q, r = np.zeros_like(a), np.zeros_like(a)
    module.build()(a, b, q, r)
    expected_q, expected_r = reference(a, b)
    np.testing.assert_array_equal(q, expected_q)
    np.testing.assert_array_equal(r, expected_r)
    np.testing.assert_array_equal(q * b + r, a)  # a == (a / b) * b + a % b, wrapping


def test_cpu_checking_mode_reports_a_zero_divisor_at_its_line() -> None:
    a, b = operands(np.dtype(np.int32))
    q, r = np.zeros_like(a), np.zeros_like(a)
    built = cpu_module(i32).build(check=True)
    with pytest.raises(ZeroDivisionError, match=rf"{line_of('cpu-div')}: integer division or modulo by zero"):
        built(a, b, q, r)
    np.testing.assert_array_equal(q, reference(a, b)[0])  # the call ran to its end with the defined results
    b[b == 0] = 1
    built(a, b, q, r)  # the failure was reported once


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")
def test_emulator_checking_mode_reports_a_zero_divisor_at_its_line() -> None:
    a, b = operands(np.dtype(np.int32))
    q, r = np.zeros_like(a), np.zeros_like(a)
    pattern = rf"kernel 'divide_kernel', block \(0, 0, 0\): thread 1: integer division or modulo by zero at .*" \
              rf"{line_of('cuda-div')}"
    with pytest.raises(RuntimeError, match=pattern):
        cuda_module(i32).build(check=True)(a, b, q, r)
