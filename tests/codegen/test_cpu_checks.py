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
    def local_overflow(k: i32, out: f32[1]):
        attrs.func_kind = "public"
        buf = register_tensor(f32, [4, 4])
        buf[k, 0] = 1.0  # MARK: local-write
        out[0] = buf[0, 0]


def test_out_of_bounds_read_in_a_parallel_loop_is_an_index_error_at_its_line() -> None:
    a, b = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    with pytest.raises(IndexError, match=rf"test_cpu_checks.py:{line_of('read-past-end')}: index 8 .* 'a'"):
        shift_module.build(check=True)(8, a, b)
    np.testing.assert_array_equal(b[:7], a[1:])  # the in-bounds work was done


def test_out_of_bounds_write_to_a_local_array_does_not_touch_other_memory() -> None:
    built = local_module.build(check=True)
    out = np.zeros(1, np.float32)
    built(3, out)  # row 3 of a 4x4 array is fine
    with pytest.raises(IndexError, match=rf":{line_of('local-write')}: index 16 is out of bounds for 'buf'"):
        built(4, out)
    built(2, out)  # the failure was reported once, not carried over


def test_checks_are_only_in_checking_mode() -> None:
    assert "HL_CHECKED(a, " in shift_module.build(check=True).source()
    assert "HL_CHECKED(a, " not in shift_module.build().source()
