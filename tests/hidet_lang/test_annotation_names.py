"""`def k(n: i32, a: f32[n])` works inside `with script_module()` without `from __future__ import annotations`."""

import numpy as np
import pytest

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32


def test_shape_naming_an_earlier_parameter_without_future_import() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def scale(n: i32, a: f32[n], out: f32[n * 1]):  # noqa: F821 - `n` is the parameter
            attrs.func_kind = "public"
            for i in range(n):
                out[i] = a[i] * 2.0

    assert "n" not in globals(), "the placeholder must not outlive the block"
    a = np.arange(7, dtype=np.float32)
    out = np.zeros(7, np.float32)
    module.build()(7, a, out)
    np.testing.assert_array_equal(out, a * 2)
    with pytest.raises(ValueError, match="'a'"):
        module.build()(8, a, np.zeros(8, np.float32))


def test_placeholders_do_not_hide_real_names() -> None:
    with hidet.script_module():
        assert f32 is hidet.f32  # names the module defines stay untouched
