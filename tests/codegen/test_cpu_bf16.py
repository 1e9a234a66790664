"""bf16 in CPU functions: stored as its bits (`hl_bf16`), every operation computed in f32 and rounded back to
nearest, ties to even, once per DSL operation (`codegen.emit.bf16_in_float`)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import hidet_lang as hidet
from codegen.emit.bf16_in_float import bf16_bits
from hidet_lang import attrs, bf16, f32, i32

BF16 = ml_dtypes.bfloat16

with hidet.script_module() as bf16_module:

    @hidet.script
    def scale_shift(n: i32, s: bf16, a: bf16[n], b: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "public"
        for i in range(n):
            a[i] = a[i] * s + 1.5
            if a[i] > s:
                b[i] = f32(a[i])
            else:
                b[i] = -1.0


def test_each_operation_rounds_its_f32_result_once() -> None:
    values = (np.random.default_rng(0).standard_normal(257) * 10).astype(BF16)
    a, b = values.copy(), np.zeros(257, np.float32)
    module = bf16_module.build()
    module(257, 0.3, a, b)  # the scalar arrives as a float and is rounded to bf16 on entry
    s = np.float32(np.float32(0.3).astype(BF16))
    want = ((values.astype(np.float32) * s).astype(BF16).astype(np.float32) + np.float32(1.5)).astype(BF16)
    np.testing.assert_array_equal(a.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(b, np.where(want.astype(np.float32) > s, want.astype(np.float32), -1.0))
    assert "hl_bf16 * a" in module.source() and "hl_f32_to_bf16(s_f32)" in module.source()


def test_constant_bits_round_as_the_c_conversion() -> None:
    for value in (1.0, 1.00390625, 1.01171875, -0.0, 3.4e38, 1e39, -1e39, float("nan"), 1e-40):
        want = np.array([value], np.float32).astype(BF16).view(np.uint16)[0] if abs(value) < 3.5e38 else \
            (0x7F80 if value > 0 else 0xFF80)
        assert bf16_bits(value) == (0x7FC0 if value != value else want), value
