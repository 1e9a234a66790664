"""Data types and tensor declarations, where Hidet Script had them (`hidet.lang.types`)."""

from hidet_lang.frontend.builtins import register_tensor, tensor, tensor_pointer
from hidet_lang.ir.types import (
    DataType,
    PointerType,
    TensorType,
    bfloat16,
    boolean,
    float16,
    float32,
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

__all__ = [
    "DataType", "PointerType", "TensorType", "bf16", "bfloat16", "boolean", "f16", "f32", "f64", "float16",
    "float32", "float64", "i8", "i16", "i32", "i64", "int8", "int16", "int32", "int64", "register_tensor",
    "tensor", "tensor_pointer", "u8", "u16", "u32", "u64", "uint8", "uint16", "uint32", "uint64",
]
