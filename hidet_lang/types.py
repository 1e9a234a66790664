"""Data types and tensor declarations, where Hidet Script had them (`hidet.lang.types`); the vector types of CPU
functions (`f32x8`) too, whose operations are in `hidet_lang.cpu`."""

from hidet_lang.frontend.builtins import register_tensor, tensor, tensor_pointer
from hidet_lang.ir.types import (
    DataType,
    PointerType,
    TensorType,
    VectorType,
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
    void,
    void_p,
)

i8, i16, i32, i64 = int8, int16, int32, int64
u8, u16, u32, u64 = uint8, uint16, uint32, uint64
f16, bf16, f32, f64 = float16, bfloat16, float32, float64
f32x4, f32x8, f32x16 = float32x4, float32x8, float32x16

__all__ = [
    "DataType", "PointerType", "TensorType", "VectorType", "bf16", "bfloat16", "boolean", "f16", "f32", "f32x4",
    "f32x8", "f32x16", "f64", "float16", "float32", "float32x4", "float32x8", "float32x16", "float64", "i8", "i16",
    "i32", "i64", "int8", "int16", "int32", "int64", "register_tensor", "tensor", "tensor_pointer", "u8", "u16",
    "u32", "u64", "uint8", "uint16", "uint32", "uint64", "void", "void_p",
]
