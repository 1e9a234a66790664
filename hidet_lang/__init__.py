"""hidet-lang: an embedded Python DSL for tensor programs with first-class task mappings.

Write kernels as `@hidet.script` functions inside `with hidet.script_module() as module:`, then
`module.build()` and call the result with numpy arrays. See README.md and the examples folder.
"""

from __future__ import annotations

from hidet_lang import option
from hidet_lang.frontend.builtins import (
    attrs,
    exp,
    grid,
    meta,
    printf,
    register_tensor,
    rsqrt,
    sqrt,
    tensor,
    tensor_pointer,
)
from hidet_lang.frontend.script import ScriptFunction, ScriptModule, script, script_module
from hidet_lang.ir.mapping import auto_map, repeat, spatial
from hidet_lang.ir.types import (
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
from hidet_lang.version import __version__

i8, i16, i32, i64 = int8, int16, int32, int64
u8, u16, u32, u64 = uint8, uint16, uint32, uint64
f16, f32, f64 = float16, float32, float64

__all__ = [
    "__version__", "attrs", "auto_map", "boolean", "exp", "f16", "f32", "f64", "float16", "float32", "float64",
    "grid", "i8", "i16", "i32", "i64", "int8", "int16", "int32", "int64", "meta", "option", "printf",
    "register_tensor", "repeat", "rsqrt", "script", "script_module", "ScriptFunction", "ScriptModule", "spatial",
    "sqrt", "tensor", "tensor_pointer", "u8", "u16", "u32", "u64", "uint8", "uint16", "uint32", "uint64",
]

# The build path is loaded with the package so that the first `module.build()` of a process costs only the
# build itself (about 10 ms of imports moved here, out of the warm-build path).
import codegen.build  # noqa: E402,F401
