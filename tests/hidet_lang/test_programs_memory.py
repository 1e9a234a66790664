"""DSL programs with local arrays, pointers, runtime-sized parameters, declarations, printf and assert.

Runtime-sized parameters use string annotations (see test_programs_control_flow.py for why).
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32, printf, register_tensor, tensor, tensor_pointer, u8
from hidet_lang.testing import arrays, check_kernel, example_count

SETTINGS = settings(max_examples=example_count(30), deadline=None)

# ------------------------------------------------------------------------------------------------ local arrays
with hidet.script_module() as local_module:

    @hidet.script
    def tile_transpose(a: f32[4, 4], out: f32[4, 4], sums: f32[3]):
        attrs.func_kind = "public"
        reg = register_tensor(f32, [4, 4])
        for i, j in grid(4, 4):
            reg[j, i] = a[i, j]
        for i, j in grid(4, 4):
            out[i, j] = reg[i, j]
        row = tensor(f32, [3])  # `tensor(...)`, register scope by default
        for k in range(3):
            row[k] = 0.0
            for j in range(4):
                row[k] += reg[k, j]
            sums[k] = row[k]


def tile_transpose_ref(a: np.ndarray, out: np.ndarray, sums: np.ndarray) -> None:
    out[:] = a.T
    sums[:] = [np.float32(0) + a.T[k, 0] + a.T[k, 1] + a.T[k, 2] + a.T[k, 3] for k in range(3)]


@SETTINGS
@given(arrays("float32", (4, 4)))
def test_register_tensor_and_tensor(a: np.ndarray) -> None:
    check_kernel(local_module.build(), tile_transpose_ref, a, np.zeros((4, 4), np.float32), np.zeros(3, np.float32))


# ------------------------------------------------------------------------------------------------ pointers
with hidet.script_module() as pointer_module:

    @hidet.script
    def saxpy_2d(m: i32, n: i32, alpha: f32, x: ~f32, y: ~f32):
        attrs.func_kind = "public"
        xs = tensor_pointer(f32, [m, n], init=x)  # runtime sizes from the integer parameters
        ys = tensor_pointer(f32, [m * n], init=y)
        for i, j in grid(m, n):
            ys[i * n + j] = alpha * xs[i, j] + ys[i * n + j]


def saxpy_2d_ref(m: int, n: int, alpha: float, x: np.ndarray, y: np.ndarray) -> None:
    y[:] = (np.float32(alpha) * x + y.reshape(m, n)).reshape(y.shape)


@SETTINGS
@given(st.tuples(st.integers(1, 13), st.integers(1, 13)).flatmap(
    lambda s: st.tuples(arrays("float32", s), arrays("float32", s[0] * s[1]))), st.floats(-4, 4, width=32))
def test_tensor_pointer_with_runtime_sizes(xy: tuple[np.ndarray, np.ndarray], alpha: float) -> None:
    x, y = xy
    check_kernel(pointer_module.build(), saxpy_2d_ref, *x.shape, alpha, x, y)


# ------------------------------------------------------------------------------------------------ offsets past int32
FAR_ROWS, FAR_COLS = 65536, 32769  # 2**31 + 32768 bytes: the last rows start past what an int32 offset reaches

with hidet.script_module() as far_module:

    @hidet.script
    def mark_far(a: u8[FAR_ROWS, FAR_COLS], i: i32, j: i32, seen: ~i32):
        attrs.func_kind = "public"
        a[i, j] = u8(7)
        seen[0] = i32(a[i, j - 1]) * 10 + i32(a[i, j])


def test_elements_past_two_to_the_31_are_addressed_in_64_bits() -> None:
    """Multi-dimensional offsets are combined in int64 on the CPU, whatever the indices' type: `i * 32769 + j`
    in int32 would wrap, here to an address 2 GiB before the array. The array is a lazily zeroed 2 GiB mapping,
    of which only the pages touched take memory."""
    a = np.zeros((FAR_ROWS, FAR_COLS), np.uint8)
    seen = np.zeros(1, np.int32)
    i, j = FAR_ROWS - 1, FAR_COLS - 1  # offset 2_147_549_183
    far_module.build()(a, i, j, seen)
    assert a[i, j] == 7 and seen[0] == 7
    assert np.count_nonzero(a[i]) == 1 and np.count_nonzero(a[0]) == 0


# ------------------------------------------------------------------------------------------------ runtime-sized params
with hidet.script_module() as sized_module:

    @hidet.script
    def row_sums(m: i32, n: i32, a: "f32[m, n]", out: "f32[m]"):  # noqa: F821 - earlier parameters
        attrs.func_kind = "public"
        for i in range(m):
            acc: f32 = 0.0  # an annotated declaration with a value
            last: i32  # and one without
            last = -1
            for j in range(n):
                acc += a[i, j]
                last = j
            out[i] = acc + f32(last - (n - 1))  # last == n - 1: adds 0


def row_sums_ref(m: int, n: int, a: np.ndarray, out: np.ndarray) -> None:
    acc = np.zeros(m, np.float32)
    for j in range(n):  # the kernel's order of additions, in float32
        acc += a[:, j]
    out[:] = acc


@SETTINGS
@given(arrays("float32", st.tuples(st.integers(1, 17), st.integers(1, 17))))
def test_runtime_sized_parameters_and_declarations(a: np.ndarray) -> None:
    m, n = a.shape
    check_kernel(sized_module.build(), row_sums_ref, m, n, a, np.zeros(m, np.float32))


# ------------------------------------------------------------------------------------------------ printf
with hidet.script_module() as printf_module:

    @hidet.script
    def report(n: i32, a: "f32[n]"):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            if a[i] < 0.0:
                printf("negative a[%d] = %.3f\n", i, a[i])


@settings(max_examples=example_count(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arrays("float32", st.integers(1, 12)))
def test_printf_output(capfd: pytest.CaptureFixture[str], a: np.ndarray) -> None:
    capfd.readouterr()  # the fixture lives across examples: drop what earlier ones printed
    printf_module.build()(len(a), a)
    want = "".join(f"negative a[{i}] = {v:.3f}\n" for i, v in enumerate(a.astype(np.float64)) if v < 0)
    assert capfd.readouterr().out == want


def test_printf_output_with_capfd(capfd: pytest.CaptureFixture[str]) -> None:
    a = np.array([1.0, -2.5, 3.0, -0.125], np.float32)
    printf_module.build()(4, a)
    out = capfd.readouterr().out
    assert out == "negative a[1] = -2.500\nnegative a[3] = -0.125\n"


# ------------------------------------------------------------------------------------------------ assert
with hidet.script_module() as assert_module:

    @hidet.script
    def checked_copy(n: i32, a: "i32[n]", b: "i32[n]"):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            assert a[i] >= 0, "a must be non-negative"  # ASSERT-LINE
            b[i] = a[i]


def _assert_line() -> int:
    with open(__file__) as f:
        return next(k for k, line in enumerate(f, 1) if line.rstrip().endswith("# ASSERT-LINE"))


@SETTINGS
@given(arrays("int32", st.integers(1, 20), elements=st.integers(-3, 50)))
def test_assert_in_kernel(a: np.ndarray) -> None:
    b = np.zeros_like(a)
    kernel = assert_module.build()
    if (a >= 0).all():
        kernel(len(a), a, b)
        np.testing.assert_array_equal(b, a)
    else:
        with pytest.raises(AssertionError) as excinfo:
            kernel(len(a), a, b)
        message = str(excinfo.value)
        assert "a must be non-negative" in message
        assert re.search(rf"test_programs_memory\.py:{_assert_line()}\b", message)
        first_bad = int(np.argmax(a < 0))
        np.testing.assert_array_equal(b[:first_bad], a[:first_bad])  # the kernel stopped at the failure
        # a failed assertion is reported once: the next good call does not raise again
        good = np.abs(a)
        kernel(len(good), good, b)
        np.testing.assert_array_equal(b, good)
