"""The rule-based CUDA schedule of element-wise tasks (a thread computes `ELEMENTS` elements a round, `BLOCK`
apart) computes every element once, whatever the size: sizes just below, at and past a block's round, broadcasting,
symbolic sizes, two outputs of different sizes; built with the IR verified, run in the emulator's checking mode
(an element written twice or read out of bounds is reported)."""

from __future__ import annotations

import functools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.build import build_module
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.compute import compute, tensor_input
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.schedule.cuda import BLOCK, ELEMENTS
from stdlib_ops.task import Task

ROUND = BLOCK * ELEMENTS
SIZES = st.sampled_from([1, 3, ROUND - 1, ROUND, ROUND + 1, 3 * ROUND + 5])


@functools.cache
def broadcast_add() -> object:
    """out[r, c] = x[r, c] * 2 + y[c], and a second output z[c] = y[c] - 1, over symbolic sizes."""
    x = tensor_input("x", "float32", ["rows", "cols"])
    y = tensor_input("y", "float32", ["cols"])
    out = compute("out", ["rows", "cols"], lambda r, c: x[r, c] * 2.0 + y[c])
    z = compute("z", ["cols"], lambda c: y[c] - 1.0)
    return build_module(auto_schedule(Task("broadcast_add", (x, y), (out, z)), Target.of("cuda")), "cuda", check=True)


@settings(max_examples=example_count(6), deadline=None)
@given(rows=st.sampled_from([1, 2, 7]), cols=SIZES, seed=st.integers(0, 2**32 - 1))
def test_every_element_once(rows: int, cols: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-4, 4, (rows, cols)).astype(np.float32), rng.uniform(-4, 4, cols).astype(np.float32)
    out, z = np.full((rows, cols), np.nan, np.float32), np.full(cols, np.nan, np.float32)
    broadcast_add()(rows, cols, x, y, out, z)
    np.testing.assert_array_equal(out, x * np.float32(2) + y)  # one multiply by 2 (exact) and one rounded add
    np.testing.assert_array_equal(z, y - np.float32(1))
