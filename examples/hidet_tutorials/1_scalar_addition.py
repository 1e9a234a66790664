"""Scalar addition: scalar parameters, and a pointer parameter that receives the result."""

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs
from hidet_lang.types import f32

with hidet.script_module() as script_module:

    @hidet.script
    def launch(a: f32, b: f32, c: ~f32):
        attrs.func_kind = "public"
        c[0] = a + b


if __name__ == "__main__":
    module = script_module.build()
    c = np.zeros(1, np.float32)
    module(3.0, 4.0, c)
    assert c[0] == 7.0
    print(f"3.0 + 4.0 = {c[0]}")
