"""The numpy dtype of what users name a data type by: a DSL data type, a name the DSL or numpy knows, or a numpy dtype;
below the arrays and the tensor methods, which both read it."""

from __future__ import annotations

from typing import Any

import numpy as np

from hidet_lang.ir.types import DTYPE_BY_NAME, DataType


def numpy_dtype_of(dtype: Any) -> np.dtype:
    """The numpy dtype of an array of `dtype`: a DSL data type (`hidet.float32`, `hidet.i32`), a name the DSL or numpy
    knows ('f32', 'int32', 'bf16'), or anything `numpy.dtype` takes; bfloat16 is `ml_dtypes.bfloat16`. TypeError
    for anything else."""
    known = _NUMPY_DTYPES.get(dtype) if isinstance(dtype, (str, DataType)) else None
    if known is not None:
        return known
    if isinstance(dtype, str) and dtype in DTYPE_BY_NAME:
        dtype = DTYPE_BY_NAME[dtype]
    if isinstance(dtype, DataType):
        found = _bfloat16() if dtype.name == "bfloat16" else np.dtype(dtype.numpy_name)
        _NUMPY_DTYPES[dtype] = found
        return found
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError):  # ValueError: an object with a `.dtype` that is none (a DSL tensor type)
        names = ", ".join(sorted(DTYPE_BY_NAME))
        raise TypeError(f"{dtype!r} is not a data type; give a DSL data type (hidet.float32), a numpy dtype or one "
                        f"of the names {names}") from None


_NUMPY_DTYPES: dict[Any, np.dtype] = {}
"""The DSL data types and names `numpy_dtype_of` has resolved (a dictionary look-up, not numpy's parsing)."""


def _bfloat16() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("bfloat16 arrays need the ml_dtypes package (pip install ml_dtypes)") from None
    return np.dtype(ml_dtypes.bfloat16)
