"""Data types and tensor declarations, where Hidet Script had them (`hidet.lang.types`); the vector types of CPU
functions (`f32x8`) too, whose operations are in `hidet_lang.cpu`."""

from hidet_lang.frontend.builtins import register_tensor, tensor, tensor_pointer
from hidet_lang.ir.dtypes import *  # noqa: F403 - the data types and their short names, one home
from hidet_lang.ir.dtypes import __all__ as _dtype_names
from hidet_lang.ir.types import DataType, PointerType, TensorType, VectorType, void, void_p

__all__ = [*_dtype_names, "DataType", "PointerType", "TensorType", "VectorType", "register_tensor", "tensor",
           "tensor_pointer", "void", "void_p"]
