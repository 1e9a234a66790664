"""The data types under the module path Hidet programs import them from (`from hidet.ir.dtypes import float32`):
the scalar types and the CPU vector types of `hidet_lang.ir.types`, by their long and short names."""

from hidet_lang.ir.types import (
    bfloat16,
    boolean,
    float16,
    float32,
    float32x4,
    float32x8,
    float32x16,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)

i8, i16, i32, i64 = int8, int16, int32, int64
u8, u16, u32, u64 = uint8, uint16, uint32, uint64
f16, bf16, f32, f64 = float16, bfloat16, float32, float64
f32x4, f32x8, f32x16 = float32x4, float32x8, float32x16

__all__ = [
    "bf16", "bfloat16", "boolean", "f16", "f32", "f32x4", "f32x8", "f32x16", "f64", "float16", "float32", "float32x4",
    "float32x8", "float32x16", "float64", "i8", "i16", "i32", "i64", "int8", "int16", "int32", "int64", "u8", "u16",
    "u32", "u64", "uint8", "uint16", "uint32", "uint64",
]
