import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32

with hidet.script_module() as module:

    @hidet.script
    def vector_add(n: i32, a: f32[n], b: f32[n], c: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "public"
        for i in grid(n, attrs="p"):
            c[i] = a[i] + b[i]
