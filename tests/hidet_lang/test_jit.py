"""`@hidet.jit`: built on the first call, reused for arguments of the same types and shapes, rebuilt for new
ones; parameters without annotations take the arguments' types; bad arguments are Python exceptions raised at the
caller's line."""

from __future__ import annotations

import traceback

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32
from hidet_lang.errors import DSLTypeError
from hidet_lang.testing import arrays, example_count


@hidet.jit
def scale(x, y, factor):
    """y = x * factor, over the rows of 2-D tensors or the elements of 1-D ones."""
    if len(x.shape) == 1:
        for i in grid(x.shape[0], attrs="p"):
            y[i] = x[i] * factor
    else:
        for i, j in grid(x.shape[0], x.shape[1]):
            y[i, j] = x[i, j] * factor


@hidet.jit
def saxpy(n: i32, a: f32, x: f32[n], y):  # noqa: F821 (parameters)
    """Annotated parameters keep their annotations (a runtime size here); `y` takes its argument's type."""
    for i in range(n):
        y[i] = a * x[i] + y[i]


def test_first_call_builds_and_same_signature_reuses() -> None:
    kernel = hidet.jit(scale.py_func)  # a fresh cache
    x = np.arange(6, dtype=np.float32)
    y = np.empty_like(x)
    assert kernel.builds == 0
    kernel(x, y, 2.0)
    assert kernel.builds == 1
    np.testing.assert_array_equal(y, x * 2)
    kernel(x + 1, y, 3.0)  # new values, the same types and shapes
    assert kernel.builds == 1
    np.testing.assert_array_equal(y, (x + 1) * 3)
    kernel(np.zeros(7, np.float32), np.empty(7, np.float32), 2.0)  # another shape
    assert kernel.builds == 2
    kernel(x.astype(np.float64), y.astype(np.float64), 2.0)  # another dtype
    assert kernel.builds == 3
    kernel(x, y, 2)  # a Python int instead of a float
    assert kernel.builds == 4
    kernel(x, y, 5.0)
    assert kernel.builds == 4 and len(kernel.specializations) == 4


def test_annotated_parameters_keep_their_types() -> None:
    x = np.arange(5, dtype=np.float32)
    y = np.ones(5, np.float32)
    saxpy(5, 2.0, x, y)
    np.testing.assert_array_equal(y, 2 * x + 1)
    saxpy(5, 1.0, x, y)
    assert saxpy.builds == 1


def test_takes_the_projects_tensors_and_is_public_without_a_func_kind() -> None:
    x = hidet.asarray(np.arange(4, dtype=np.float32))
    y = hidet.empty([4])
    scale(x, y, 0.5)
    np.testing.assert_array_equal(y.numpy(), np.arange(4) * 0.5)  # callable from Python: made 'public'


def test_a_kernel_that_sets_its_kind_keeps_it() -> None:
    @hidet.jit(target="cpu")
    def fill(out, value):
        attrs.func_kind = "public"
        for i in range(out.shape[0]):
            out[i] = value

    out = np.zeros(3, np.int64)
    fill(out, 7)
    np.testing.assert_array_equal(out, [7, 7, 7])


@settings(max_examples=example_count(12), deadline=None)
@given(arrays(dtype=st.sampled_from(["float32", "float64"]),
              shape=st.tuples(st.integers(1, 3), st.integers(1, 3))),
       st.floats(-4, 4, width=32))
def test_matches_numpy_on_drawn_data(x: np.ndarray, factor: float) -> None:
    y = np.empty_like(x)
    scale(x, y, factor)
    np.testing.assert_allclose(y, x * np.float32(factor), rtol=1e-6)


def _raised_at(error: BaseException) -> list[str]:
    return [frame.filename for frame in traceback.extract_tb(error.__traceback__)]


@pytest.mark.parametrize(("args", "message"), [
    (("not an array", np.zeros(2, np.float32), 1.0), "argument 'x' is str"),
    ((np.zeros(2, np.float32), np.zeros(2, np.float32)), r"takes 3 arguments \(x, y, factor\), got 2"),
    ((np.zeros(2, np.complex64), np.zeros(2, np.complex64), 1.0), "argument 'x' has dtype complex64"),
    ((np.zeros(2, np.float32), None, 1.0), "argument 'y' is NoneType"),
])
def test_bad_arguments_raise_at_the_callers_line(args: tuple, message: str) -> None:
    with pytest.raises(TypeError, match=message) as info:
        scale(*args)
    frames = _raised_at(info.value)
    assert frames[0] == __file__ and all("codegen" not in f for f in frames)


def test_a_body_wrong_for_the_arguments_is_a_dsl_error_at_its_line() -> None:
    @hidet.jit
    def first_row_sum(x, out):
        out[0] = x[0] + 1.0  # a row, for a 2-D x

    with pytest.raises(DSLTypeError, match="test_jit.py:.*index every dimension") as info:
        first_row_sum(np.zeros((2, 2), np.float32), np.zeros(1, np.float32))
    assert _raised_at(info.value)[0] == __file__
    first_row_sum(np.zeros(2, np.float32), out := np.zeros(1, np.float32))  # a 1-D x is fine
    assert out[0] == 1.0


def test_a_cuda_kernel_builds_once_for_host_and_device_arrays() -> None:
    from hidet_lang.cuda import blockIdx, threadIdx

    @hidet.jit
    def vector_add(a, b, c):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 128
        attrs.cuda.grid_dim = (a.shape[0] + 127) // 128
        i = blockIdx.x * 128 + threadIdx.x
        if i < a.shape[0]:
            c[i] = a[i] + b[i]

    a, b = np.random.default_rng(0).random((2, 300), dtype=np.float32)
    c = np.empty_like(a)
    vector_add(a, b, c)  # numpy arrays, copied to and from the device (or the emulator's memory)
    np.testing.assert_array_equal(c, a + b)
    on_device = [hidet.asarray(x, device="cuda") for x in (a, b, c)]
    vector_add(*on_device)
    np.testing.assert_array_equal(on_device[2].numpy(), a + b)
    assert vector_add.builds == 1  # the target is the kernel's, whichever device the arrays are on
