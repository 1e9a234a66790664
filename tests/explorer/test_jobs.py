"""What a job does with the sizes box and a kernel's signature: the arguments it draws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, u8
from hidet_lang.explorer.jobs import kernel_arguments, parse_sizes, random_array

with hidet.script_module() as module:

    @hidet.script
    def kernel(n: i32, scale: f32, a: f32[n, 3], flags: u8[2, n]):  # noqa: F821 (parameters)
        attrs.func_kind = "public"
        for i in range(n):
            a[i, 0] = a[i, 0] * scale + flags[0, i]

SIGNATURE = module.ir_module().functions[0]


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 9), st.integers(0, 2**31 - 1))
def test_arguments_have_the_declared_shapes_and_dtypes(n: int, seed: int) -> None:
    size, scale, a, flags = kernel_arguments(SIGNATURE, {"n": n, "other": 4}, np.random.default_rng(seed))
    assert size == n and isinstance(scale, float)
    assert (a.shape, a.dtype) == ((n, 3), np.float32) and (flags.shape, flags.dtype) == ((2, n), np.uint8)


def test_a_missing_size_is_named() -> None:
    with pytest.raises(ValueError, match="'n' of kernel in the sizes box"):
        kernel_arguments(SIGNATURE, {}, np.random.default_rng(0))


def test_sizes_are_read_with_commas_spaces_or_lines() -> None:
    assert parse_sizes("n=3, m=-4\nbatch=8 k=1") == {"n": 3, "m": -4, "batch": 8, "k": 1}
    assert parse_sizes("") == {}
    for bad in ("n", "n=x", "3=4", "n=1.5"):
        with pytest.raises(ValueError, match="name=integer"):
            parse_sizes(bad)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "uint8", "uint64", "bool"])
def test_random_arrays_of_every_kind(dtype: str) -> None:
    x = random_array((4, 5), np.dtype(dtype), np.random.default_rng(1))
    assert x.shape == (4, 5) and x.dtype == np.dtype(dtype)
    if x.dtype.kind in "iu":
        assert x.min() >= (0 if x.dtype.kind == "u" else -8) and x.max() <= 8
