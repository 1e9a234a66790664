"""The primitive functions under the module path Hidet programs import them from (`from hidet.ir import
primitives`, then `primitives.cpu.avx_f32x8_setzero()`; `from hidet.ir.primitives.cuda import threadIdx`): `cpu`
is `hidet_lang.cpu` (Hidet's `avx_*` spellings included) and `cuda` is `hidet_lang.cuda`."""

from hidet_lang.ir.primitives import cpu, cuda

__all__ = ["cpu", "cuda"]
