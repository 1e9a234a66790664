"""hidet-lang: an embedded Python DSL for tensor programs with first-class task mappings.

Write kernels as `@hidet.script` functions inside `with hidet.script_module() as module:`, then
`module.build()` and call the result with numpy arrays; or decorate one with `@hidet.jit` and call it (it builds
for the arguments' types and shapes on first call). See README.md and the examples folder.

This module is the facade the user's program is written against, and it loads what a name needs when the name
is first used (`from hidet_lang import f32` loads the frontend; `hidet.ops` the operator library; `hidet.asarray`
the runtime's arrays), so that `import hidet_lang.ir.expr` loads the IR alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

from hidet_lang import option as option
from hidet_lang.builder import install_builder
from hidet_lang.lazy import homes_of, lazy_attributes
from hidet_lang.version import __version__ as __version__

_DATA_TYPES = (
    "bf16", "bfloat16", "boolean", "f16", "f32", "f32x4", "f32x8", "f32x16", "f64", "float16", "float32", "float32x4",
    "float32x8", "float32x16", "float64", "i8", "i16", "i32", "i64", "int8", "int16", "int32", "int64", "u8", "u16",
    "u32", "u64", "uint8", "uint16", "uint32", "uint64", "void_p",
)
_HOMES = {
    **homes_of("hidet_lang.frontend.builtins", "address", "as_tensor_pointer", "asm", "attrs", "cast", "deref", "exp",
               "grid", "meta", "printf", "register_tensor", "rsqrt", "sqrt", "tensor", "tensor_pointer", "view"),
    **homes_of("hidet_lang.types", *_DATA_TYPES),
    **homes_of("hidet_lang.ir.layout", "column_major", "local_layout", "row_major", "strided_layout"),
    **homes_of("hidet_lang.ir.mapping", "auto_map", "repeat", "spatial"),
    **homes_of("codegen.runtime.arrays", "asarray", "empty", "full", "ones", "rand", "randn", "zeros"),
    "Tensor": ("codegen.runtime.arrays", "AnyTensor"),  # Hidet's tensor type: the arrays and the operators' tensors
    **homes_of("hidet_lang.cuda", "shared_tensor"),
    **homes_of("hidet_lang.frontend.script", "ScriptFunction", "ScriptModule"),
}
"""Where each name of the facade lives: (module, attribute), imported on first use."""

_MODULES: dict[str, tuple[str, ...]] = {
    "ops": ("stdlib_ops",),  # the operator library
    "utils": ("hidet_lang.utils", "hidet_lang.utils.benchmark"),  # `hidet.utils.benchmark.benchmark_func`, as Hidet
    "lang": ("hidet_lang",),  # Hidet's `hidet.lang` is this package: `hidet.lang.f32`, `hidet.lang.script_module()`
}
"""Modules the facade names otherwise than `hidet_lang.<name>`: the modules to import, the last one's package
being the value."""

__all__ = sorted(["__version__", "jit", "option", "script", "script_module", *_HOMES])


def script_module() -> Any:
    """A new module; use it as `with hidet.script_module() as module:`.

    The language loads no code-generation module (`import hidet_lang` and `hidet_lang.ir` stay light); the first
    module of a process loads the code generator that will build it, and reads what its builds are keyed by (in a
    source checkout, the fingerprint of the project's code), so that `module.build()` costs only the build."""
    from codegen.build import prepare_builds  # the code generator, loaded with the first module of a process
    from hidet_lang.frontend.script import script_module as new_script_module  # the frontend, on first use

    prepare_builds()
    return new_script_module()


_give_home_name, _home_names = lazy_attributes(__name__, _HOMES)


def __getattr__(name: str) -> Any:
    """The facade's names, loaded on first use (see the module docstring). `hidet.script` and `from hidet_lang
    import script` give the decorator through this hook on every lookup, so that parameter names used by later
    parameters' annotations (`x: f32[n]`) resolve outside a `script_module` block too (see
    `hidet_lang.frontend.annotation_names`), and `hidet.jit` likewise (the one-decorator path,
    `hidet_lang.frontend.jit`); `hidet.ops` is the operator library (`stdlib_ops`); `hidet.cuda`,
    `hidet.cpu` and the other subpackages load when named."""
    if name == "script":
        return importlib.import_module("hidet_lang.frontend.script").script_for_caller(sys._getframe(1))
    if name == "jit":  # `@hidet.jit`: the one-decorator path (hidet_lang.frontend.jit), its names bound as script's
        return importlib.import_module("hidet_lang.frontend.jit").jit_for_caller(sys._getframe(1))
    if name in _MODULES:
        for module in _MODULES[name]:
            importlib.import_module(module)
        return sys.modules[_MODULES[name][0]]
    if name not in _HOMES and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    return _give_home_name(name)


def __dir__() -> list[str]:
    """The facade's names (those loaded already and those loaded on first use)."""
    return sorted({*_home_names(), *_MODULES})


def _build_through_codegen(*args: Any, **kwargs: Any) -> Any:
    """The language's builder: codegen's `build_module` (the facade connects the layers; the language imports
    nothing of the code generator)."""
    from codegen.build import build_module  # loaded by the first script_module(), or here by the first build

    return build_module(*args, **kwargs)


install_builder(_build_through_codegen)
