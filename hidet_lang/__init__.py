"""hidet-lang: an embedded Python DSL for tensor programs with first-class task mappings.

Write kernels as `@hidet.script` functions inside `with hidet.script_module() as module:`, then
`module.build()` and call the result with numpy arrays. See README.md and the examples folder.
"""

from __future__ import annotations

import sys

from hidet_lang import option
from hidet_lang.cuda import shared_tensor
from hidet_lang.frontend.builtins import (
    address,
    as_tensor_pointer,
    asm,
    attrs,
    cast,
    deref,
    exp,
    grid,
    meta,
    printf,
    register_tensor,
    rsqrt,
    sqrt,
    tensor,
    tensor_pointer,
    view,
)
from hidet_lang.frontend.script import ScriptFunction, ScriptModule, script_for_caller
from hidet_lang.frontend.script import script_module as _new_script_module
from hidet_lang.ir.layout import column_major, local_layout, row_major, strided_layout
from hidet_lang.ir.mapping import auto_map, repeat, spatial
from hidet_lang.types import (
    bf16,
    bfloat16,
    boolean,
    f16,
    f32,
    f32x4,
    f32x8,
    f32x16,
    f64,
    float16,
    float32,
    float32x4,
    float32x8,
    float32x16,
    float64,
    i8,
    i16,
    i32,
    i64,
    int8,
    int16,
    int32,
    int64,
    u8,
    u16,
    u32,
    u64,
    uint8,
    uint16,
    uint32,
    uint64,
    void_p,
)
from hidet_lang.version import __version__

__all__ = [
    "__version__", "address", "as_tensor_pointer", "asarray", "asm", "attrs", "auto_map", "bf16", "bfloat16",
    "boolean", "cast", "column_major", "deref", "empty", "exp", "f16", "f32", "f32x4", "f32x8", "f32x16", "f64",
    "float16", "float32", "float32x4", "float32x8", "float32x16", "float64", "grid", "i16", "i32", "i64", "i8",
    "int16", "int32", "int64", "int8", "local_layout", "meta", "option", "printf", "randn", "register_tensor",
    "repeat", "row_major", "rsqrt", "script", "script_module", "ScriptFunction", "ScriptModule", "shared_tensor",
    "spatial", "sqrt", "strided_layout", "tensor", "tensor_pointer", "u16", "u32", "u64", "u8", "uint16", "uint32",
    "uint64", "uint8", "view", "zeros", "void_p",
]


def asarray(x: object, dtype: object = None, device: str = "cpu") -> object:
    """`x` as an array on `device` ('cpu': a numpy array with `.numpy()`; 'cuda': GPU memory, or host memory
    when CUDA modules run on the emulator)."""
    from codegen import arrays

    return arrays.asarray(x, dtype, device)


def empty(shape: object, dtype: object = "float32", device: str = "cpu") -> object:
    """An uninitialized array on `device`."""
    from codegen import arrays

    return arrays.empty(shape, dtype, device)


def zeros(shape: object, dtype: object = "float32", device: str = "cpu") -> object:
    """An array of zeros on `device`."""
    from codegen import arrays

    return arrays.zeros(shape, dtype, device)


def randn(shape: object, dtype: object = "float32", device: str = "cpu") -> object:
    """Standard-normal random values on `device`."""
    from codegen import arrays

    return arrays.randn(shape, dtype, device)


def script_module() -> ScriptModule:
    """A new module; use it as `with hidet.script_module() as module:`.

    The language loads no code-generation module (`import hidet_lang` and `hidet_lang.ir` stay light); the first
    module of a process loads the code generator that will build it, so that `module.build()` costs only the
    build."""
    import codegen.build  # noqa: F401 - loaded once; later calls find it in sys.modules

    return _new_script_module()


def __getattr__(name: str) -> object:
    """`hidet.script` and `from hidet_lang import script`: the decorator, looked up through this hook so that
    parameter names used by later parameters' annotations (`x: f32[n]`) resolve outside a `script_module` block
    too (see `hidet_lang.frontend.annotation_names`); `hidet.ops`, the operator library (`stdlib_ops`), and
    `hidet.utils` (`assert_close`, `benchmark.benchmark_func`), loaded on first use."""
    if name == "script":
        return script_for_caller(sys._getframe(1))
    if name == "ops":
        import stdlib_ops

        return stdlib_ops
    if name == "utils":
        import hidet_lang.utils
        import hidet_lang.utils.benchmark  # noqa: F401 - `hidet.utils.benchmark.benchmark_func` as in Hidet

        return hidet_lang.utils
    raise AttributeError(f"module 'hidet_lang' has no attribute {name!r}")


def _build_through_codegen(*args: object, **kwargs: object) -> object:
    """The frontend's builder: codegen's `build_module` (loaded here if no module loaded it yet)."""
    from codegen.build import build_module

    return build_module(*args, **kwargs)


# The facade connects the layers: the frontend builds through codegen, installed here.
from hidet_lang.frontend.script import install_builder as _install_builder  # noqa: E402

_install_builder(_build_through_codegen)
