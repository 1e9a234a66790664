"""`build(check=True)` on the CPU: every access of a tensor of known size is bounds-checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32, register_tensor

LINES = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> int:
    return next(i for i, text in enumerate(LINES, 1) if f"# MARK: {marker}" in text)


with hidet.script_module() as shift_module:

    @hidet.script
    def shift(n: i32, a: f32[n], b: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "public"
        for i in grid(n, attrs="p"):
            b[i] = a[i + 1]  # MARK: read-past-end


with hidet.script_module() as local_module:

    @hidet.script
    def local_overflow(k: i32, out: f32[16]):
        attrs.func_kind = "public"
        buf = register_tensor(f32, [4, 4])
        for i, j in grid(4, 4):
            buf[i, j] = f32(i * 4 + j)
        buf[k, 0] = -1.0  # MARK: local-write
        for i, j in grid(4, 4):
            out[i * 4 + j] = buf[i, j]


def test_out_of_bounds_read_in_a_parallel_loop_is_an_index_error_at_its_line() -> None:
    a, b = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    with pytest.raises(IndexError, match=rf"test_cpu_checks.py:{line_of('read-past-end')}: index 8 .* 'a'"):
        shift_module.build(check=True)(8, a, b)
    np.testing.assert_array_equal(b[:7], a[1:])  # the in-bounds work was done


def test_out_of_bounds_write_to_a_local_array_does_not_touch_other_memory() -> None:
    built = local_module.build(check=True)
    out = np.zeros(16, np.float32)
    built(3, out)  # row 3 of a 4x4 array is fine
    np.testing.assert_array_equal(out, np.where(np.arange(16) == 12, -1, np.arange(16)))
    # just past the end, before the start, and 256 MB away (unchecked, each write would land outside `buf`): the
    # write goes nowhere, every element of `buf` keeps its value and the kernel runs to its end
    for k, index in ((4, 16), (-1, -4), (1 << 24, 1 << 26)):
        out[:] = np.nan
        with pytest.raises(IndexError, match=rf":{line_of('local-write')}: index {index} is out of bounds for 'buf'"):
            built(k, out)
        np.testing.assert_array_equal(out, np.arange(16))
    built(2, out)  # the failure was reported once, not carried over
    np.testing.assert_array_equal(out, np.where(np.arange(16) == 8, -1, np.arange(16)))


def test_checks_are_only_in_checking_mode() -> None:
    assert "HL_CHECKED(a, " in shift_module.build(check=True).source()
    assert "HL_CHECKED(a, " not in shift_module.build().source()
