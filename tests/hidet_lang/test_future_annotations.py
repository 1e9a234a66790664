"""Kernels in a module with `from __future__ import annotations`: every annotation is a string to resolve.

Here `a: f32[n]` can be written unquoted, and a name used only in annotations (a dtype chosen by the
enclosing function) must still resolve, although it is in no closure.
"""

# ruff: noqa: F821 - `x: f32[n]` names the earlier parameter `n`, which linters cannot know about
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, f64, i32, i64
from hidet_lang.testing import arrays, check_kernel, example_count

SETTINGS = settings(max_examples=example_count(30), deadline=None)

with hidet.script_module() as axpy_module:

    @hidet.script
    def dot(n: i32, x: f32[n], y: f32[n]) -> f64:
        acc: f64 = 0.0
        for i in range(n):
            acc += f64(x[i]) * f64(y[i])
        return acc

    @hidet.script
    def axpy(n: i32, alpha: f32, x: f32[n], y: f32[n], d: f64[1]):
        attrs.func_kind = "public"
        d[0] = dot(n, x, y)
        for i in range(n):
            y[i] = alpha * x[i] + y[i]


def axpy_ref(n: int, alpha: float, x: np.ndarray, y: np.ndarray, d: np.ndarray) -> None:
    d[0] = np.dot(x.astype(np.float64), y.astype(np.float64))
    y[:] = np.float32(alpha) * x + y


@SETTINGS
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(arrays("float32", n), arrays("float32", n))),
       st.floats(-3, 3, width=32))
def test_runtime_sized_parameters_unquoted(xy: tuple[np.ndarray, np.ndarray], alpha: float) -> None:
    x, y = xy
    check_kernel(axpy_module.build(), axpy_ref, len(x), alpha, x, y, np.zeros(1, np.float64))


def test_string_return_annotation_resolves() -> None:
    assert axpy_module.ir_module().lookup("dot").ret_type == f64


def make_copy(dtype: hidet.ir.types.DataType) -> hidet.ScriptModule:
    """`dtype` appears only in annotations: under this module's future import it is in no closure."""
    with hidet.script_module() as module:

        @hidet.script
        def copy_twice(n: i32, src: dtype[n], dst: dtype[2, n]):
            attrs.func_kind = "public"
            for i in range(n):
                dst[0, i] = src[i]
                dst[1, i] = src[i] + src[i]

    return module


@pytest.mark.parametrize("dtype", [i32, i64, f32], ids=str)
@settings(max_examples=example_count(15), deadline=None)
@given(data=st.data())
def test_names_used_only_in_annotations_resolve(dtype: hidet.ir.types.DataType, data: st.DataObject) -> None:
    src = data.draw(arrays(dtype.name, st.integers(1, 25)))

    def ref(n: int, src: np.ndarray, dst: np.ndarray) -> None:
        dst[0], dst[1] = src, src + src

    module = make_copy(dtype)
    assert module.ir_module().lookup("copy_twice").params[1].type.dtype == dtype
    check_kernel(module.build(), ref, len(src), src, np.zeros((2, len(src)), np.dtype(dtype.name)))
