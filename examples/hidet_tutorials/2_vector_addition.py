"""Vector addition on the CPU, with a tensor type whose length names an earlier parameter."""

import numpy as np

import hidet_lang as hidet
from hidet_lang import attrs
from hidet_lang.types import f32, i32

with hidet.script_module() as script_module:

    @hidet.script
    def launch(n: i32, a: f32[n], b: f32[n], c: f32[n]):  # noqa: F821 - `n` is the first parameter
        attrs.func_kind = "public"
        for i in range(n):
            c[i] = a[i] + b[i]


if __name__ == "__main__":
    module = script_module.build()
    for n in (1, 17, 1000):
        a = hidet.randn([n])
        b = hidet.randn([n])
        c = hidet.empty([n])
        module(n, a, b, c)
        np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())
    print("vector addition matches numpy")
    print(module.source())
