"""`x: f32[n]`, a shape naming an earlier parameter, works outside `with script_module()` and without
`from __future__ import annotations` (this file must not import it): Python evaluates such annotations when the
`def` runs, before the decorator, and the decorator's lookup binds the parameter names they use.
"""

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32


def test_hidet_script_outside_a_module_block() -> None:
    @hidet.script
    def scale(n: i32, x: f32[n], y: f32[n * 2]):  # noqa: F821 - ruff cannot know the decorator binds n
        attrs.func_kind = "cpu_kernel"
        for i in range(n):
            y[2 * i] = x[i] * 2.0
            y[2 * i + 1] = x[i]

    x = np.arange(5, dtype=np.float32)
    y = np.zeros(10, np.float32)
    scale(5, x, y)
    np.testing.assert_array_equal(y, np.stack([x * 2, x], axis=1).reshape(-1))


def test_script_imported_by_name() -> None:
    from hidet_lang import script

    @script
    def fill(m: i32, z: f32[m]):  # noqa: F821
        attrs.func_kind = "cpu_kernel"
        for i in range(m):
            z[i] = 1.0 * i

    z = np.zeros(4, np.float32)
    fill(4, z)
    np.testing.assert_array_equal(z, np.arange(4, dtype=np.float32))
